// Tests of the bounded input reader: a named pipe nobody writes to is an error, not a hang.
#include "base/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "base/input_error.h"

namespace oomcast {
namespace {

// A FIFO in the temp directory, removed when the test ends.
class Fifo {
 public:
  explicit Fifo(const std::string& name)
      : path_((std::filesystem::temp_directory_path() / ("oomcast_fifo_" + std::to_string(getpid()) + "_" + name))
                  .string()) {
    std::remove(path_.c_str());
    REQUIRE(mkfifo(path_.c_str(), 0600) == 0);
  }
  ~Fifo() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST_CASE("a FIFO that nobody writes to is refused after the wait, not read forever", "[base][hostile]") {
  const Fifo fifo("silent");
  try {
    read_text_file(fifo.path(), "", "scenario", kMaxConfigFileBytes, 100);
    FAIL("expected an InputError");
  } catch (const InputError& error) {
    CHECK(error.where().file == fifo.path());
    CHECK_THAT(error.message(), Catch::Contains("nothing was written to this pipe"));
  }
}

TEST_CASE("a FIFO with a writer is read to its end", "[base]") {
  const Fifo fifo("written");
  ssize_t written = -1;  // Catch's macros are not for other threads: the writer only records
  std::thread writer([&] {
    const int fd = open(fifo.path().c_str(), O_WRONLY);
    if (fd < 0) return;
    written = write(fd, "batch_size: 2\n", 14);
    close(fd);
  });
  const std::string text = read_text_file(fifo.path(), "", "scenario", kMaxConfigFileBytes, 10'000);
  writer.join();
  CHECK(written == 14);
  CHECK(text == "batch_size: 2\n");
}

}  // namespace
}  // namespace oomcast
