// Whole input files in memory: mapping or reading them, gunzipping them when they start with
// the gzip magic bytes (1f 8b) whatever their name, and an allocator for the large arrays
// decoded from them. Used by the snapshot reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace oomcast::sim {

namespace detail {
void* allocate_large(size_t bytes);
void deallocate_large(void* p, size_t bytes);
bool is_large(size_t bytes);
}  // namespace detail

// An allocator for arrays of hundreds of MB. Large requests get their own mapping with
// transparent huge pages requested: on some virtual machines each 4 KiB page fault costs
// microseconds, more than decoding the page. Elements are default-initialised, so growing a
// vector of bytes does not write zeros that are about to be overwritten.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding must be implicit

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (detail::is_large(bytes)) return static_cast<T*>(detail::allocate_large(bytes));
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (detail::is_large(bytes)) return detail::deallocate_large(p, bytes);
    ::operator delete(p);
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;
    } else {
      ::new (static_cast<void*>(p)) U(static_cast<Args&&>(args)...);
    }
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

using ByteVector = std::vector<uint8_t, HugePageAllocator<uint8_t>>;

// The bytes of a whole file (memory-mapped when possible) or of decompressed data.
class FileBytes {
 public:
  FileBytes() = default;
  explicit FileBytes(ByteVector bytes) : bytes_(std::move(bytes)) {}
  FileBytes(FileBytes&& other) noexcept;
  FileBytes& operator=(FileBytes&& other) noexcept;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes();

  const uint8_t* data() const { return map_ ? map_ : bytes_.data(); }
  size_t size() const { return map_ ? map_size_ : bytes_.size(); }

 private:
  friend FileBytes read_file_bytes(const std::string& path);
  const uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  ByteVector bytes_;
};

// True when `data` starts with the gzip magic bytes 1f 8b.
bool has_gzip_magic(const uint8_t* data, size_t size);

// Decompressed snapshots beyond this are refused: a 4 MiB gzip can inflate to 4 GiB (deflate
// compresses runs about 1,000 to 1), and the pickle's values cost more again once parsed. A
// genuine recording this large can be given uncompressed (mapped, not copied).
inline constexpr size_t kMaxDecompressedSnapshotBytes = size_t{4} << 30;

// Decompresses gzip data (several concatenated members are read as one stream). `name` is
// used in errors. Throws InputError with the compressed byte offset for corrupt or truncated
// input, and when the output would exceed `max_output` bytes (before allocating it).
ByteVector gunzip(const std::string& name, const uint8_t* data, size_t size, size_t max_output = SIZE_MAX);

// Reads the whole file. Throws InputError when it cannot be opened or read.
FileBytes read_file_bytes(const std::string& path);

// Reads the whole file and gunzips it when it has the gzip magic bytes.
FileBytes read_maybe_gzipped_file(const std::string& path);

}  // namespace oomcast::sim
