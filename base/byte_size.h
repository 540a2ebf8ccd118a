// Parsing of human byte sizes (flags, the Python API) ("80GiB", "40GB", "512MiB", "1024").
#pragma once

#include <cstdint>
#include <string>

namespace oomcast {

// Throws InputError naming `option` when `text` is not a size.
uint64_t parse_byte_size(const std::string& text, const std::string& option);

}  // namespace oomcast
