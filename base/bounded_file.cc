// read_text_file(): POSIX reads in chunks up to a limit; see bounded_file.h.
#include "base/bounded_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

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

int open_input_file(const std::string& path, const std::string& key, int wait_ms) {
  SourceLocation where{path};
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  Descriptor file{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) throw InputError(where, key, std::string("cannot open file: ") + std::strerror(errno));
  struct stat info {};
  if (fstat(file.fd, &info) == 0 && S_ISFIFO(info.st_mode)) {
    pollfd ready{file.fd, POLLIN, 0};
    int n = 0;
    do {
      n = poll(&ready, 1, wait_ms);
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
      throw InputError(where, key, "nothing was written to this pipe for " + std::to_string(wait_ms / 1000) +
                                       " s; give a file, or start the writer first");
    }
  }
  const int flags = fcntl(file.fd, F_GETFL);
  if (flags >= 0) fcntl(file.fd, F_SETFL, flags & ~O_NONBLOCK);
  return std::exchange(file.fd, -1);
}

std::string read_text_file(const std::string& path, const std::string& key, const std::string& what,
                           size_t max_bytes, int wait_ms) {
  SourceLocation where{path};
  Descriptor file{open_input_file(path, key, wait_ms)};
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
