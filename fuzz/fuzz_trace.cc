// libFuzzer entry point for the text trace reader. InputError is the expected way to reject
// bad text; anything else (a crash, a sanitizer report, a hang) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/input_error.h"
#include "sim/trace_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    oomcast::sim::parse_trace_text("fuzz", std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const oomcast::InputError&) {
  }
  return 0;
}
