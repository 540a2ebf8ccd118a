// libFuzzer entry point for the snapshot reader: gunzips inputs that start with the gzip
// magic bytes, as read_snapshot does, then decodes the pickle. InputError is the expected
// way to reject bad bytes; anything else (a crash, a sanitizer report, a hang) is a bug.
#include <cstddef>
#include <cstdint>

#include "base/input_error.h"
#include "sim/gzip_file.h"
#include "sim/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    if (oomcast::sim::has_gzip_magic(data, size)) {
      const oomcast::sim::ByteVector bytes = oomcast::sim::gunzip("fuzz", data, size);
      oomcast::sim::parse_snapshot("fuzz", bytes.data(), bytes.size());
    } else {
      oomcast::sim::parse_snapshot("fuzz", data, size);
    }
  } catch (const oomcast::InputError&) {
  }
  return 0;
}
