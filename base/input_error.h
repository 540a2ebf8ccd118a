// InputError is the one error type for bad input (trace files, snapshots, YAML, flags, the
// PYTORCH_CUDA_ALLOC_CONF string). It carries where the problem is (file, line, column or
// event index) and the offending key, so the CLI can print it on one line and exit 2.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace oomcast {

struct SourceLocation {
  std::string file;     // path as the user gave it; empty for strings given on the command line
  int64_t line = 0;     // 1-based; 0 when unknown
  int64_t column = 0;   // 1-based; 0 when unknown
  int64_t event = -1;   // 0-based event index for traces and snapshots; -1 when not an event
};

class InputError : public std::runtime_error {
 public:
  // `key` is the offending key or token ("batch_szie", "max_split_size_mb"); may be empty.
  InputError(SourceLocation where, std::string key, std::string message);

  const SourceLocation& where() const { return where_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  SourceLocation where_;
  std::string key_;
  std::string message_;
};

// Formats "file:line:col: error: message" (parts that are unknown are left out).
std::string format_input_error(const SourceLocation& where, const std::string& message);

}  // namespace oomcast
