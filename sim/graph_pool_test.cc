// CUDA graph private pools: what a capture allocates, what it frees, which later requests
// may reuse it, and when its memory can go back to CUDA. Expected numbers worked out by hand
// from the allocator rules (20 MiB segments for 1-10 MiB requests, 2 MiB small segments).
#include <catch2/catch.hpp>

#include <sstream>

#include "base/input_error.h"
#include "sim/caching_allocator.h"
#include "sim/replay.h"
#include "sim/trace_io.h"

using namespace oomcast::sim;

namespace {
constexpr uint64_t MiB = 1ull << 20;

ReplayOptions checked() {
  ReplayOptions options;
  options.check_invariants = true;
  options.record_segment_decisions = true;
  options.stop_at_first_oom = false;
  return options;
}

ReplayResult run(const std::string& text, const AllocatorConfig& config = {}, uint64_t total = 80ull << 30) {
  DeviceModel model;
  model.total_bytes = total;
  return replay(parse_trace_text("t", text), config, model, checked());
}

Bytes reserved_at_end(const ReplayResult& result) {
  return static_cast<Bytes>(result.final_stats.reserved_bytes.all().current);
}
}  // namespace

TEST_CASE("memory a capture freed is not reused by allocations outside the graph's pool", "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin g 7\n"
      "alloc tmp 4194304 7\n"  // a 20 MiB segment of g's pool
      "free tmp\n"             // back to g's pool, not to the allocator's
      "capture_end g\n"
      "alloc x 4194304 7\n");  // same stream and size, but outside the capture
  CHECK(result.segment_allocs == 2);
  CHECK(reserved_at_end(result) == 40 * MiB);
}

TEST_CASE("a capture into a shared pool reuses the memory an earlier capture freed", "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin big 7\n"
      "alloc big_tmp 8388608 7\n"
      "alloc big_out 1048576 7\n"
      "free big_tmp\n"
      "capture_end big\n"
      "capture_begin small 7 big\n"  // pool=big.pool()
      "alloc small_tmp 4194304 7\n"
      "free small_tmp\n"
      "capture_end small\n");
  CHECK(result.segment_allocs == 2);  // big's 20 MiB segment and one 2 MiB small segment
  CHECK(reserved_at_end(result) == 22 * MiB);
}

TEST_CASE("graphs with pools of their own do not reuse each other's memory", "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin a 7\nalloc a_tmp 4194304 7\nfree a_tmp\ncapture_end a\n"
      "capture_begin b 7\nalloc b_tmp 4194304 7\nfree b_tmp\ncapture_end b\n");
  CHECK(result.segment_allocs == 2);
  CHECK(reserved_at_end(result) == 40 * MiB);
}

TEST_CASE("graphs naming the same pool handle share one pool", "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin a 7 handle\nalloc a_tmp 4194304 7\nfree a_tmp\ncapture_end a\n"
      "capture_begin b 7 handle\nalloc b_tmp 4194304 7\nfree b_tmp\ncapture_end b\n");
  CHECK(result.segment_allocs == 1);
}

TEST_CASE("empty_cache keeps the free memory of a live graph's pool", "[sim][graphs]") {
  ReplayResult result = run("capture_begin g 7\nalloc tmp 4194304 7\nfree tmp\ncapture_end g\nempty_cache\n");
  CHECK(result.segment_frees == 0);
  CHECK(reserved_at_end(result) == 20 * MiB);
}

TEST_CASE("after the last graph of a pool is released empty_cache returns its free segments", "[sim][graphs]") {
  ReplayResult result =
      run("capture_begin g 7\nalloc tmp 4194304 7\nfree tmp\ncapture_end g\ngraph_release g\nempty_cache\n");
  CHECK(result.segment_frees == 1);
  CHECK(reserved_at_end(result) == 0);
}

TEST_CASE("a pool shared by two graphs stays while one of them lives", "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin a 7\nalloc tmp 4194304 7\nfree tmp\ncapture_end a\n"
      "capture_begin b 7 a\ncapture_end b\n"
      "graph_release a\nempty_cache\n");
  CHECK(result.segment_frees == 0);
  CHECK(reserved_at_end(result) == 20 * MiB);
}

TEST_CASE("a released pool's segments with a live graph output are kept until that output is freed",
          "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin g 7\nalloc out 4194304 7\ncapture_end g\ngraph_release g\nempty_cache\n"
      "mark held\nfree out\nempty_cache\n");
  REQUIRE(result.marks.size() == 1);
  CHECK(result.marks[0].reserved_bytes == 20 * MiB);
  CHECK(reserved_at_end(result) == 0);
}

TEST_CASE("allocations on other streams during a capture come from the allocator's own pool", "[sim][graphs]") {
  ReplayResult result = run(
      "capture_begin g 7\n"
      "alloc side 4194304 0\nfree side\n"  // stream 0 is not capturing
      "capture_end g\n"
      "alloc later 4194304 0\n");          // reuses side's segment
  CHECK(result.segment_allocs == 1);
}

TEST_CASE("an allocation that fails during a capture does not flush the cache first", "[sim][graphs]") {
  // 100 MiB device: 60 MiB cached in the allocator's pool. Outside a capture the OOM retry
  // would free it and fit the 60 MiB request; during a capture it must not synchronise.
  const std::string prelude = "alloc cached 62914560 7\nfree cached\n";
  ReplayResult captured = run(prelude + "capture_begin g 7\nalloc x 62914560 7\ncapture_end g\n", {}, 100 * MiB);
  CHECK(captured.num_ooms == 1);
  ReplayResult uncaptured = run(prelude + "alloc x 62914560 3\n", {}, 100 * MiB);
  CHECK(uncaptured.num_ooms == 0);
}

TEST_CASE("a record_stream free during a capture waits for a sync after the capture ends", "[sim][graphs][streams]") {
  ReplayResult result = run(
      "alloc shared 20971520 0\nrecord_stream shared 5\n"  // one whole 20 MiB segment
      "capture_begin g 7\nfree shared\nsync 5\ncapture_end g\n"  // the event is recorded only now
      "alloc a 20971520 0\n"                                      // shared's block is not back: a new segment
      "sync 5\nalloc b 20971520 0\n");                            // back, and reused
  CHECK(result.segment_allocs == 2);
  CHECK(reserved_at_end(result) == 40 * MiB);
}

TEST_CASE("a private pool takes whole segments even with expandable segments on", "[sim][graphs][expandable]") {
  AllocatorConfig config;
  config.expandable_segments = true;
  ReplayResult result = run("capture_begin g 7\nalloc tmp 4194304 7\ncapture_end g\n", config);
  REQUIRE(result.segment_decisions.size() == 1);
  CHECK(result.segment_decisions[0].kind == SegmentDecision::Kind::Alloc);
  CHECK(result.segment_decisions[0].size == 20 * MiB);
}

TEST_CASE("a pool with no segment left disappears at the next empty_cache", "[sim][graphs]") {
  DeviceModel model;
  SimulatedDevice device(model);
  CachingAllocator allocator(AllocatorConfig{}, device);
  REQUIRE(allocator.begin_allocate_to_pool(1, 7));
  REQUIRE(allocator.end_allocate_to_pool(1));
  REQUIRE(allocator.release_pool(1));
  CHECK(allocator.private_pool(1) != nullptr);
  allocator.empty_cache();
  CHECK(allocator.private_pool(1) == nullptr);
  CHECK(allocator.begin_allocate_to_pool(1, 7));  // the id is usable again
}

TEST_CASE("capturing into a released pool that still holds memory is refused as PyTorch's assert",
          "[sim][graphs][errors]") {
  CHECK_THROWS_AS(run("capture_begin a 7 handle\nalloc out 4194304 7\ncapture_end a\ngraph_release a\n"
                      "capture_begin b 7 handle\n"),
                  oomcast::InputError);
}

TEST_CASE("the trace reader refuses graph events out of order, naming the line", "[sim][graphs][errors]") {
  auto message_of = [](const std::string& text) {
    try {
      parse_trace_text("t", text);
    } catch (const oomcast::InputError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message_of("capture_end g\n"), Catch::Contains("not capturing"));
  CHECK_THAT(message_of("capture_begin g 7\ncapture_begin g 8\n"), Catch::Contains("line 1"));
  CHECK_THAT(message_of("capture_begin g 7\ncapture_begin h 7\n"), Catch::Contains("already capturing"));
  CHECK_THAT(message_of("capture_begin g 7\nempty_cache\n"), Catch::Contains("forbids"));
  CHECK_THAT(message_of("graph_release g\n"), Catch::Contains("never captured"));
  CHECK_THAT(message_of("capture_begin g 7\ngraph_release g\n"), Catch::Contains("while it is capturing"));
  CHECK_THAT(message_of("capture_begin g 7\ncapture_end g\ncapture_begin g 7\n"), Catch::Contains("graph_release"));
  CHECK_THAT(message_of("capture_begin g\n"), Catch::Contains("capture_begin <graph> <stream> [pool]"));
}

TEST_CASE("graph events survive a write and read of the text form", "[sim][graphs][trace_io]") {
  const std::string text =
      "capture_begin a 7\nalloc x 4194304 7\ncapture_end a\ncapture_begin b 7 a\ncapture_end b\n"
      "graph_release a\ngraph_release b\nfree x\n";
  Trace original = parse_trace_text("t", text);
  std::ostringstream written;
  write_trace(written, original);
  Trace again = parse_trace_text("t2", written.str());
  REQUIRE(again.events.size() == original.events.size());
  for (size_t i = 0; i < original.events.size(); ++i) {
    CHECK(again.events[i].kind == original.events[i].kind);
    CHECK(again.strings[again.events[i].tag] == original.strings[original.events[i].tag]);
    CHECK(again.events[i].stream == original.events[i].stream);
  }
  CHECK(again.strings[again.events[3].slot] == "a");
}
