// Whole-file input: memory mapping, reading, gzip decompression with zlib, and large
// allocations backed by huge pages. Gzip errors carry the offset in the compressed input.
#include "sim/gzip_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <utility>

#include "base/bounded_file.h"
#include "base/input_error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define OOMCAST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define OOMCAST_SANITIZED 1
#endif

namespace oomcast::sim {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& message) {
  throw InputError({name, 0, 0, -1}, "", message);
}

// A first guess at the decompressed size: the gzip trailer's ISIZE field (the size modulo
// 2^32 of the last member), trusted only within what deflate can achieve.
[[noreturn]] void too_large(const std::string& name, size_t max_output) {
  fail(name, "decompresses to more than " + std::to_string(max_output) + " bytes, the limit for a compressed "
             "input (against gzip bombs); a genuine file this large can be given uncompressed");
}

size_t initial_output_size(const uint8_t* data, size_t size) {
  const size_t fallback = size * 4 + 1024;
  if (size < 18) return fallback;
  const uint8_t* t = data + size - 4;
  const size_t isize = size_t{t[0]} | size_t{t[1]} << 8 | size_t{t[2]} << 16 | size_t{t[3]} << 24;
  const size_t max_ratio = 1032;  // deflate's best case
  if (isize < size / 2 || isize / max_ratio > size) return fallback;
  return isize + 1;  // one spare byte, so a right guess ends without a regrow
}

// Closes a file descriptor on every path out of read_file_bytes.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) close(fd);
  }
};

struct InflateStream {
  z_stream z{};
  ~InflateStream() { inflateEnd(&z); }
};

}  // namespace

namespace detail {

bool is_large(size_t bytes) {
#ifdef OOMCAST_SANITIZED
  (void)bytes;
  return false;  // keep every buffer visible to the sanitizer's heap checks
#else
  return bytes >= (size_t{1} << 20);
#endif
}

// Huge pages only back the 2 MiB-aligned stretches of a mapping: a 3 MiB array mapped
// anywhere got one at best and ~700 4 KiB faults for the rest (measured on the 2.7B step
// snapshot's frame-id list). Mappings are whole, aligned huge pages; the untouched tail of
// one costs nothing.
constexpr size_t kHugePage = size_t{2} << 20;

size_t mapped_size(size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

void* allocate_large(size_t bytes) {
  const size_t length = mapped_size(bytes);
  void* p = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* start = static_cast<uint8_t*>(p);
  auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(start) + kHugePage - 1) & ~(kHugePage - 1));
  if (aligned > start) munmap(start, static_cast<size_t>(aligned - start));
  uint8_t* end = start + length + kHugePage;
  if (end > aligned + length) munmap(aligned + length, static_cast<size_t>(end - (aligned + length)));
#ifdef MADV_HUGEPAGE
  madvise(aligned, length, MADV_HUGEPAGE);  // advice only: without THP this is a plain mapping
#endif
  return aligned;
}

void deallocate_large(void* p, size_t bytes) { munmap(p, mapped_size(bytes)); }

}  // namespace detail

FileBytes::FileBytes(FileBytes&& other) noexcept
    : map_(other.map_), map_size_(other.map_size_), bytes_(std::move(other.bytes_)) {
  other.map_ = nullptr;
  other.map_size_ = 0;
}

FileBytes& FileBytes::operator=(FileBytes&& other) noexcept {
  if (this != &other) {
    if (map_) munmap(const_cast<uint8_t*>(map_), map_size_);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
    bytes_ = std::move(other.bytes_);
  }
  return *this;
}

FileBytes::~FileBytes() {
  if (map_) munmap(const_cast<uint8_t*>(map_), map_size_);
}

bool has_gzip_magic(const uint8_t* data, size_t size) {
  return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

ByteVector gunzip(const std::string& name, const uint8_t* data, size_t size, size_t max_output) {
  InflateStream stream;
  z_stream& z = stream.z;
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail(name, "cannot initialise zlib");
  // One byte over the cap tells a stream of exactly max_output bytes from a longer one.
  const size_t capacity = max_output == SIZE_MAX ? SIZE_MAX : max_output + 1;
  ByteVector out(std::min(initial_output_size(data, size), capacity));
  size_t in_pos = 0;
  size_t out_pos = 0;
  for (;;) {
    if (out_pos == out.size()) {
      if (out.size() >= capacity) {
        too_large(name, max_output);
      }
      out.resize(std::min(out.size() * 2, capacity));
    }
    // zlib counts in uInt, so feed inputs and outputs over 4 GiB in slices.
    const size_t in_slice = std::min<size_t>(size - in_pos, UINT_MAX);
    const size_t out_slice = std::min<size_t>(out.size() - out_pos, UINT_MAX);
    z.next_in = const_cast<Bytef*>(data + in_pos);
    z.avail_in = static_cast<uInt>(in_slice);
    z.next_out = out.data() + out_pos;
    z.avail_out = static_cast<uInt>(out_slice);
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t consumed = in_slice - z.avail_in;
    const size_t produced = out_slice - z.avail_out;
    in_pos += consumed;
    out_pos += produced;
    if (rc == Z_STREAM_END) {
      // Concatenated members form one stream; zero padding after the last one is tolerated.
      if (has_gzip_magic(data + in_pos, size - in_pos)) {
        inflateReset(&z);
        continue;
      }
      const bool only_padding =
          std::all_of(data + in_pos, data + size, [](uint8_t byte) { return byte == 0; });
      if (!only_padding) {
        fail(name, "trailing data after the gzip stream at byte " + std::to_string(in_pos));
      }
      break;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
      fail(name, std::string("corrupt gzip data (") + (z.msg ? z.msg : "bad stream") +
                     ") at byte " + std::to_string(in_pos));
    }
    if (rc == Z_MEM_ERROR) fail(name, "out of memory while decompressing");
    // Output space left over with all input used means zlib wants more input.
    if (in_pos == size && z.avail_out != 0) {
      fail(name, "truncated gzip data: the file ends at byte " + std::to_string(size) +
                     " before the end of the compressed stream");
    }
    if (consumed == 0 && produced == 0 && z.avail_out != 0) {
      fail(name, "gzip decompression made no progress at byte " + std::to_string(in_pos));
    }
  }
  if (out_pos > max_output) too_large(name, max_output);
  out.resize(out_pos);
  return out;
}

FileBytes read_file_bytes(const std::string& path) {
  FileDescriptor file{open_input_file(path, "")};  // a FIFO nobody writes to is an error, not a hang
  struct stat info {};
  if (fstat(file.fd, &info) != 0) fail(path, std::string("cannot read file: ") + std::strerror(errno));
  if (S_ISDIR(info.st_mode)) fail(path, "cannot read file: it is a directory");
  FileBytes result;
  if (S_ISREG(info.st_mode) && info.st_size > 0) {
    // Mapping a file from the page cache costs almost nothing; reading it costs a copy.
    const auto size = static_cast<size_t>(info.st_size);
    void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
    if (map != MAP_FAILED) {
      result.map_ = static_cast<const uint8_t*>(map);
      result.map_size_ = size;
      return result;
    }
  }
  // Pipes, devices and filesystems that cannot map: read until the end.
  ByteVector& bytes = result.bytes_;
  size_t used = 0;
  for (;;) {
    if (used == bytes.size()) bytes.resize(std::max<size_t>(bytes.size() * 2, 1 << 16));
    const ssize_t n = read(file.fd, bytes.data() + used, bytes.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, std::string("cannot read file: ") + std::strerror(errno));
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  bytes.resize(used);
  return result;
}

FileBytes read_maybe_gzipped_file(const std::string& path) {
  FileBytes file = read_file_bytes(path);
  if (!has_gzip_magic(file.data(), file.size())) return file;
  return FileBytes(gunzip(path, file.data(), file.size()));
}

}  // namespace oomcast::sim
