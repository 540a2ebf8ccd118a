// read_text_file(): reads a whole input file the user named, refusing what no scenario,
// model or config file can be: a directory, a device that never ends (/dev/zero), a file
// over `max_bytes`. Reading stops at the limit, so memory stays bounded whatever the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace oomcast {

inline constexpr size_t kMaxConfigFileBytes = size_t{64} << 20;  // 64 MiB: far above any real config

// How long a FIFO may stay silent before reading it is given up (no writer, or a stalled one).
inline constexpr int kInputWaitMilliseconds = 60'000;

// Opens `path` for blocking reads and returns the descriptor (the caller closes it). A FIFO is
// opened without blocking and waited on for at most `wait_ms` until a writer sends data, so a
// named pipe nobody writes to is an InputError, never a hang. Throws InputError (file = `path`,
// key = `key`) when the path cannot be opened.
int open_input_file(const std::string& path, const std::string& key, int wait_ms = kInputWaitMilliseconds);

// Throws InputError (file = `path`, key = `key`) when the file cannot be opened, is a
// directory, or holds more than `max_bytes` bytes. `what` names the file in the message
// ("scenario", "DeepSpeed config").
std::string read_text_file(const std::string& path, const std::string& key, const std::string& what,
                           size_t max_bytes = kMaxConfigFileBytes, int wait_ms = kInputWaitMilliseconds);

}  // namespace oomcast
