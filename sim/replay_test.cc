// replay(): peaks, phase marks, OOM reporting and bad frees over whole traces.
#include "sim/replay.h"

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "sim/trace_io.h"

using namespace oomcast::sim;

namespace {
constexpr uint64_t MiB = 1ull << 20;
ReplayOptions checked() {
  ReplayOptions options;
  options.check_invariants = true;
  options.record_segment_decisions = true;
  return options;
}
}  // namespace

TEST_CASE("replay reports the allocated and reserved peaks and where they happen", "[sim][replay]") {
  Trace trace = parse_trace_text("t", "alloc a 4194304\nalloc b 4194304\nfree a\nfree b\nalloc c 1000\n");
  ReplayResult result = replay(trace, AllocatorConfig{}, DeviceModel{}, checked());
  CHECK(result.peak_allocated_bytes == 8 * MiB);
  CHECK(result.peak_allocated_event == 1);
  CHECK(result.peak_reserved_bytes == 22 * MiB);  // one 20 MiB large and one 2 MiB small segment
  CHECK(result.peak_reserved_event == 4);
  CHECK(result.segment_allocs == 2);
}

TEST_CASE("a mark reports the state at the mark and the peak of the phase it opens", "[sim][replay]") {
  Trace trace = parse_trace_text("t",
                                 "mark forward\nalloc a 4194304\nalloc b 4194304\nfree b\n"
                                 "mark backward\nalloc c 2097152\nfree c\nfree a\nmark end\n");
  ReplayResult result = replay(trace, AllocatorConfig{}, DeviceModel{}, checked());
  REQUIRE(result.marks.size() == 3);
  CHECK(result.marks[0].allocated_bytes == 0);
  CHECK(result.marks[0].peak_allocated_bytes == 8 * MiB);
  CHECK(result.marks[1].allocated_bytes == 4 * MiB);
  CHECK(result.marks[1].peak_allocated_bytes == 6 * MiB);
  CHECK(result.marks[1].reserved_bytes == 20 * MiB);
  CHECK(result.marks[2].allocated_bytes == 0);
}

TEST_CASE("replay stops at the first OOM and reports its event and message", "[sim][replay]") {
  DeviceModel device;
  device.total_bytes = 100 * MiB;
  Trace trace = parse_trace_text("t", "alloc a 62914560\nalloc b 62914560\nfree a\n");
  ReplayResult result = replay(trace, AllocatorConfig{}, device, checked());
  REQUIRE(result.oom);
  CHECK(result.oom->event_index == 1);
  CHECK(result.oom->alloc_size == 60 * MiB);
  CHECK(result.events_replayed == 2);
  CHECK(result.oom->message.rfind("CUDA out of memory. Tried to allocate 60.00 MiB. GPU 0", 0) == 0);
}

TEST_CASE("replay can go on past an OOM and count every failure", "[sim][replay]") {
  DeviceModel device;
  device.total_bytes = 100 * MiB;
  ReplayOptions options = checked();
  options.stop_at_first_oom = false;
  Trace trace = parse_trace_text("t", "alloc a 62914560\nalloc b 62914560\nfree b\nalloc c 62914560\nfree a\n");
  ReplayResult result = replay(trace, AllocatorConfig{}, device, options);
  CHECK(result.num_ooms == 2);
  CHECK(result.events_replayed == 5);
}

TEST_CASE("a zero-byte allocation can be freed and takes no memory", "[sim][replay]") {
  Trace trace = parse_trace_text("t", "alloc z 0\nfree z\n");
  ReplayResult result = replay(trace, AllocatorConfig{}, DeviceModel{}, checked());
  CHECK(result.peak_reserved_bytes == 0);
  CHECK_FALSE(result.oom);
}

TEST_CASE("a free of a slot that is not allocated is an input error naming the event", "[sim][replay]") {
  TraceBuilder builder;
  builder.alloc("a", 1000);
  Trace trace = builder.take();
  trace.events.push_back(Event{EventKind::Free, 0, 0, 0, 0});
  trace.events.push_back(Event{EventKind::Free, 0, 0, 0, 0});
  CHECK_THROWS_WITH(replay(trace, AllocatorConfig{}, DeviceModel{}, checked()),
                    "event 2: error: free of id 'a' that is not allocated (never allocated, or freed twice)");
}

TEST_CASE("empty_cache in a trace returns wholly free segments", "[sim][replay]") {
  Trace trace = parse_trace_text("t", "alloc a 4194304\nfree a\nempty_cache\n");
  ReplayResult result = replay(trace, AllocatorConfig{}, DeviceModel{}, checked());
  CHECK(result.final_stats.reserved_bytes.all().current == 0);
  REQUIRE(result.segment_decisions.size() == 2);
  CHECK(result.segment_decisions[1].kind == SegmentDecision::Kind::Free);
}
