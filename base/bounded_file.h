// read_text_file(): reads a whole input file the user named, refusing what no scenario,
// model or config file can be: a directory, a device that never ends (/dev/zero), a file
// over `max_bytes`. Reading stops at the limit, so memory stays bounded whatever the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace oomcast {

inline constexpr size_t kMaxConfigFileBytes = size_t{64} << 20;  // 64 MiB: far above any real config

// Throws InputError (file = `path`, key = `key`) when the file cannot be opened, is a
// directory, or holds more than `max_bytes` bytes. `what` names the file in the message
// ("scenario", "DeepSpeed config").
std::string read_text_file(const std::string& path, const std::string& key, const std::string& what,
                           size_t max_bytes = kMaxConfigFileBytes);

}  // namespace oomcast
