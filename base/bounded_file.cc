// read_text_file(): POSIX reads in chunks up to a limit; see bounded_file.h.
#include "base/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/input_error.h"

namespace oomcast {

namespace {

struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) close(fd);
  }
};

std::string mebibytes(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

std::string read_text_file(const std::string& path, const std::string& key, const std::string& what,
                           size_t max_bytes) {
  SourceLocation where{path};
  Descriptor file{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) throw InputError(where, key, std::string("cannot read file: ") + std::strerror(errno));
  struct stat info {};
  if (fstat(file.fd, &info) != 0) throw InputError(where, key, std::string("cannot read file: ") + std::strerror(errno));
  if (S_ISDIR(info.st_mode)) throw InputError(where, key, "cannot read the " + what + " file: it is a directory");
  if (S_ISREG(info.st_mode) && static_cast<uint64_t>(info.st_size) > max_bytes) {
    throw InputError(where, key, "the " + what + " file is " + std::to_string(info.st_size) +
                                     " bytes, over the limit of " + mebibytes(max_bytes));
  }
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = read(file.fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(where, key, std::string("cannot read file: ") + std::strerror(errno));
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      throw InputError(where, key, "the " + what + " file holds more than " + mebibytes(max_bytes) +
                                       " (a device or a stream that does not end?)");
    }
    text.append(chunk, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace oomcast
