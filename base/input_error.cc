// Formatting of InputError: compiler-style so editors can jump to the place.
#include "base/input_error.h"

namespace oomcast {

std::string format_input_error(const SourceLocation& where, const std::string& message) {
  std::string text;
  if (!where.file.empty()) {
    text += where.file;
    if (where.line > 0) {
      text += ":" + std::to_string(where.line);
      if (where.column > 0) text += ":" + std::to_string(where.column);
    }
    text += ": ";
  }
  if (where.event >= 0) text += "event " + std::to_string(where.event) + ": ";
  text += "error: " + message;
  return text;
}

InputError::InputError(SourceLocation where, std::string key, std::string message)
    : std::runtime_error(format_input_error(where, message)),
      where_(std::move(where)),
      key_(std::move(key)),
      message_(std::move(message)) {}

}  // namespace oomcast
