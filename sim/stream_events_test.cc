// Frees that wait for other streams (record_stream) and the synchronisation points that
// complete them; expected numbers worked out by hand from spec §3.1 and §7.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "sim/caching_allocator.h"
#include "sim/replay.h"
#include "sim/trace_io.h"

using namespace oomcast::sim;

namespace {
constexpr uint64_t MiB = 1ull << 20;

struct Fixture {
  explicit Fixture(uint64_t total = 80ull << 30) : device(make_model(total)), allocator(AllocatorConfig{}, device) {}
  static DeviceModel make_model(uint64_t total) {
    DeviceModel model;
    model.total_bytes = total;
    return model;
  }
  void check() { REQUIRE(allocator.check_invariants() == ""); }
  int64_t reserved() const { return allocator.stats().reserved_bytes.all().current; }
  int64_t allocated() const { return allocator.stats().allocated_bytes.all().current; }
  int64_t active() const { return allocator.stats().active_bytes.all().current; }

  SimulatedDevice device;
  CachingAllocator allocator;
};

}  // namespace

TEST_CASE("a block used on another stream is not reused until that stream is synchronised",
          "[sim][streams][events]") {
  Fixture f;
  Block* a = f.allocator.malloc(16 * MiB, 0);  // a 16 MiB segment, wholly used
  f.allocator.record_stream(a, 5);
  f.allocator.free(a);
  f.check();
  CHECK(f.allocated() == 0);                 // allocated drops at the free request
  CHECK(f.active() == int64_t(16 * MiB));    // active only when the event completes
  CHECK(f.allocator.pending_frees() == 1);
  f.allocator.malloc(16 * MiB, 0);           // a's block is not back: a second segment
  CHECK(f.reserved() == int64_t(32 * MiB));
  f.allocator.synchronize_stream(5);
  Block* c = f.allocator.malloc(16 * MiB, 0);  // process_events returns a's block first
  f.check();
  CHECK(c->address == a->address);
  CHECK(f.reserved() == int64_t(32 * MiB));
  CHECK(f.allocator.pending_frees() == 0);
}

TEST_CASE("synchronising an unrelated stream completes nothing", "[sim][streams][events]") {
  Fixture f;
  Block* a = f.allocator.malloc(16 * MiB, 0);
  f.allocator.record_stream(a, 5);
  f.allocator.free(a);
  f.allocator.synchronize_stream(6);
  f.allocator.malloc(16 * MiB, 0);
  CHECK(f.reserved() == int64_t(32 * MiB));
  CHECK(f.allocator.pending_frees() == 1);
}

TEST_CASE("a block waits for every stream that used it", "[sim][streams][events]") {
  Fixture f;
  Block* a = f.allocator.malloc(4 * MiB, 0);
  f.allocator.record_stream(a, 5);
  f.allocator.record_stream(a, 6);
  f.allocator.free(a);
  f.allocator.synchronize_stream(5);
  f.allocator.malloc(1000, 0);
  CHECK(f.allocator.pending_frees() == 1);
  f.allocator.synchronize_device();
  f.allocator.malloc(1000, 0);
  CHECK(f.allocator.pending_frees() == 0);
}

TEST_CASE("record_stream on the block's own stream changes nothing", "[sim][streams][events]") {
  Fixture f;
  Block* a = f.allocator.malloc(4 * MiB, 3);
  f.allocator.record_stream(a, 3);
  f.allocator.free(a);
  CHECK(f.allocator.pending_frees() == 0);
  CHECK(f.active() == 0);
}

TEST_CASE("empty_cache waits for outstanding events and then releases the segment", "[sim][streams][events]") {
  Fixture f;
  Block* a = f.allocator.malloc(4 * MiB, 0);
  f.allocator.record_stream(a, 5);
  f.allocator.free(a);
  f.allocator.empty_cache();
  f.check();
  CHECK(f.reserved() == 0);
  CHECK(f.allocator.pending_frees() == 0);
}

TEST_CASE("a pending block does not merge with its freed neighbours until it completes", "[sim][streams][events]") {
  Fixture f;
  Block* a = f.allocator.malloc(1000, 0);
  Block* b = f.allocator.malloc(1000, 0);  // same 2 MiB small segment, right after a
  f.allocator.record_stream(a, 5);
  f.allocator.free(a);
  f.allocator.free(b);  // merges with the tail only
  f.check();
  f.allocator.empty_cache();  // syncs: a completes, the segment is whole again, and is released
  f.check();
  CHECK(f.reserved() == 0);
}

TEST_CASE("the OOM retry's flush completes pending frees and reuses their memory", "[sim][streams][events][oom]") {
  Fixture f(40 * MiB);
  Block* a = f.allocator.malloc(16 * MiB, 0);  // a 16 MiB segment
  f.allocator.record_stream(a, 5);
  f.allocator.free(a);
  // 30 MiB does not fit beside the pending 16 MiB; the retry syncs, frees a's segment, fits.
  Block* b = f.allocator.malloc(30 * MiB, 0);
  REQUIRE(b != nullptr);
  f.check();
  CHECK(f.reserved() == int64_t(30 * MiB));
  CHECK(f.allocator.stats().num_alloc_retries == 1);
}

TEST_CASE("a trace with record_stream and sync replays the deferred reuse", "[sim][streams][replay]") {
  Trace trace = parse_trace_text("t.trace",
                                 "alloc a 16777216\n"
                                 "record_stream a 5\n"
                                 "free a\n"
                                 "alloc b 16777216\n"   // a still pending: a second segment
                                 "sync 5\n"
                                 "alloc c 16777216\n"); // reuses a's block
  DeviceModel device;
  ReplayResult result = replay(trace, AllocatorConfig{}, device, ReplayOptions{true});
  CHECK(result.peak_reserved_bytes == 32 * MiB);
  CHECK(result.peak_allocated_bytes == 32 * MiB);
  CHECK(result.segment_allocs == 2);
}

TEST_CASE("free_requested keeps the block until free_completed", "[sim][streams][replay]") {
  Trace trace = parse_trace_text("t.trace",
                                 "alloc a 16777216\n"
                                 "free_requested a\n"
                                 "alloc b 16777216\n"
                                 "free_completed a\n"
                                 "alloc c 16777216\n");
  ReplayResult result = replay(trace, AllocatorConfig{}, DeviceModel{}, ReplayOptions{true});
  CHECK(result.segment_allocs == 2);
  CHECK(result.peak_allocated_bytes == 32 * MiB);
}

TEST_CASE("a free of a block whose free was already requested is an error", "[sim][streams][replay]") {
  TraceBuilder builder;
  builder.alloc("a", 100);
  builder.free_requested("a");
  Trace trace = builder.take();
  trace.events.push_back(Event{EventKind::Free, 0, 0, 0, 0});
  CHECK_THROWS_AS(replay(trace, AllocatorConfig{}, DeviceModel{}), oomcast::InputError);
}
