// Side streams that join a CUDA graph capture (side.wait_stream(capture_stream) inside
// torch.cuda.graph): their allocations go to the graph's private pool until the capture ends,
// as PyTorch's capture filter takes every stream whose capture id is the graph's. Expected
// numbers worked out by hand from the allocator rules (20 MiB segments for 1-10 MiB requests).
#include <catch2/catch.hpp>

#include <sstream>

#include "base/input_error.h"
#include "sim/replay.h"
#include "sim/trace_io.h"

using namespace oomcast::sim;

namespace {
constexpr uint64_t MiB = 1ull << 20;

ReplayResult run(const std::string& text) {
  DeviceModel model;
  model.total_bytes = 80ull << 30;
  ReplayOptions options;
  options.check_invariants = true;
  return replay(parse_trace_text("t", text), AllocatorConfig{}, model, options);
}
}  // namespace

TEST_CASE("a side stream that joined a capture allocates from the graph's pool", "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin g 7\n"
      "capture_join g 9\n"     // stream 9 waited on stream 7 inside the capture
      "alloc side 4194304 9\n" // a segment of g's pool, on stream 9
      "free side\n"            // back to g's pool
      "capture_end g\n"
      "alloc after 4194304 9\n");  // outside the capture: the ordinary pool, a new segment
  CHECK(result.segment_allocs == 2);
  CHECK(result.final_stats.reserved_bytes.all().current == static_cast<int64_t>(40 * MiB));
}

TEST_CASE("a stream that did not join the capture allocates from the ordinary pools", "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin g 7\n"
      "alloc side 4194304 9\nfree side\n"  // stream 9 is not part of the capture
      "capture_end g\n"
      "alloc after 4194304 9\n");          // so its cached block is reused
  CHECK(result.segment_allocs == 1);
}

TEST_CASE("a joined stream's blocks are reused by the next capture into the pool on that stream", "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin a 7\ncapture_join a 9\nalloc s 4194304 9\nfree s\ncapture_end a\n"
      "capture_begin b 7 a\ncapture_join b 9\nalloc t 4194304 9\nfree t\ncapture_end b\n");
  CHECK(result.segment_allocs == 1);
}

TEST_CASE("joining a capture that is not underway is an error naming the line", "[sim][graphs]") {
  CHECK_THROWS_AS(parse_trace_text("t", "capture_join g 9\n"), oomcast::InputError);
  CHECK_THROWS_WITH(parse_trace_text("t", "capture_begin g 7\ncapture_end g\ncapture_join g 9\n"),
                    Catch::Contains("t:3"));
  // A stream takes part in one capture at a time.
  CHECK_THROWS_AS(parse_trace_text("t", "capture_begin a 7\ncapture_begin b 8\ncapture_join a 8\n"),
                  oomcast::InputError);
}

TEST_CASE("capture_join and the pool actions survive a write and a read", "[sim][graphs][mempool]") {
  const std::string text =
      "capture_begin g 7\ncapture_join g 9\nalloc s 4194304 9\ncapture_end g\n"
      "mempool_enter p\nalloc x 512\nmempool_exit p\nfree x\nmempool_release p\n";
  Trace first = parse_trace_text("t", text);
  std::ostringstream written;
  write_trace(written, first);
  Trace second = parse_trace_text("t2", written.str());
  REQUIRE(second.events.size() == first.events.size());
  for (size_t i = 0; i < first.events.size(); ++i) {
    CHECK(second.events[i].kind == first.events[i].kind);
    CHECK(second.events[i].stream == first.events[i].stream);
    CHECK(second.strings[second.events[i].tag] == first.strings[first.events[i].tag]);
  }
}
