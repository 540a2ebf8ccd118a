// The options of torch.cuda.MemPool: use_on_oom (2.8+: a default-pool allocation about to
// fail may take a cached block of the pool) and no_split (2.10+: the pool's blocks are handed
// out whole). Expected numbers worked out by hand from the allocator rules: requests of 10 MiB
// or more get segments of their own size (rounded to 2 MiB), 1-10 MiB ones 20 MiB segments,
// small ones 2 MiB segments; max_split_size is unlimited, so the retry's first step frees
// nothing and only its full flush returns the default pools' cache.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include "base/input_error.h"
#include "sim/replay.h"
#include "sim/trace_io.h"

using namespace oomcast::sim;

namespace {
constexpr uint64_t MiB = 1ull << 20;

AllocatorConfig torch(TorchVersion version) {
  AllocatorConfig config;
  config.torch_version = version;
  return config;
}

ReplayResult run(const std::string& text, uint64_t total, TorchVersion version = 210) {
  DeviceModel model;
  model.total_bytes = total;
  ReplayOptions options;
  options.check_invariants = true;
  options.stop_at_first_oom = false;
  return replay(parse_trace_text("t", text), torch(version), model, options);
}

// The address each alloc got, by id (0 for a failed one).
std::map<std::string, uint64_t> addresses(const std::string& text, uint64_t total, TorchVersion version) {
  Trace trace = parse_trace_text("t", text);
  DeviceModel model;
  model.total_bytes = total;
  ReplayOptions options;
  options.check_invariants = true;
  options.stop_at_first_oom = false;
  Replayer replayer(torch(version), model, options);
  std::map<std::string, uint64_t> found;
  replayer.on_event([&](size_t index) {
    const Event& event = trace.events[index];
    if (event.kind == EventKind::Alloc) found[trace.slot_names[event.slot]] = replayer.address_of(event.slot);
  });
  replayer.run(trace);
  return found;
}

Bytes allocated_at_end(const ReplayResult& result) {
  return static_cast<Bytes>(result.final_stats.allocated_bytes.all().current);
}
Bytes reserved_at_end(const ReplayResult& result) {
  return static_cast<Bytes>(result.final_stats.reserved_bytes.all().current);
}

// PyTorch's test_mempool_limited_memory_with_allocator, on a device with 80 MiB free: 40 MiB
// in a pool that is not used on OOM, 40 MiB in one that is.
const std::string kLimitedMemory =
    "mempool_enter do_not_use\nalloc a 41943040\nmempool_exit do_not_use\n"
    "mempool_enter use use_on_oom\nalloc b 41943040\nmempool_exit use\n"
    "alloc c 41943040\n"   // OOM: no memory left and both pools' blocks are in use
    "free a\nfree b\n"     // both pools now cache a free 40 MiB segment
    "alloc c2 31457280\n"  // 30 MiB: taken from use's segment (split 30 + 10)
    "alloc d 31457280\n"   // OOM: use has 10 MiB left, do_not_use is never borrowed from
    "free c2\n";           // back to use, merged into its 40 MiB block again
}  // namespace

TEST_CASE("a default-pool allocation about to OOM takes a cached block of a use_on_oom pool", "[sim][mempool]") {
  TorchVersion version = GENERATE(208, 210);
  ReplayResult result = run(kLimitedMemory, 80 * MiB, version);
  CHECK(result.num_ooms == 2);  // c and d
  CHECK(result.segment_allocs == 2);
  CHECK(result.segment_frees == 0);
  CHECK(reserved_at_end(result) == 80 * MiB);
  std::map<std::string, uint64_t> at = addresses(kLimitedMemory, 80 * MiB, version);
  CHECK(at["c2"] == at["b"]);  // c2 sits at the front of use's segment
  CHECK(at["c"] == 0);
  CHECK(at["d"] == 0);
}

TEST_CASE("a block taken from a use_on_oom pool returns to that pool when freed", "[sim][mempool]") {
  ReplayResult result = run(kLimitedMemory +
                                "mempool_enter use\nalloc again 41943040\nmempool_exit use\n"  // use's 40 MiB block, whole
                                "free again\nmark end\nempty_cache\n",
                            80 * MiB);
  CHECK(result.segment_allocs == 2);  // no third segment: c2's memory went back to use
  REQUIRE(result.marks.size() == 1);
  CHECK(result.marks[0].allocated_bytes == 0);
  CHECK(result.segment_frees == 0);  // both pools live: empty_cache keeps their memory
}

TEST_CASE("the OOM when no use_on_oom pool has a fitting cached block reports the request as PyTorch does",
          "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter use use_on_oom\nalloc b 41943040\nmempool_exit use\nfree b\n"  // use caches 40 MiB
      "alloc big 52428800\n",  // 50 MiB: the device has 40 MiB free and use's block is too small
      80 * MiB);
  CHECK(result.num_ooms == 1);
  REQUIRE(result.oom);
  CHECK_THAT(result.oom->message, Catch::StartsWith("CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a "
                                                    "total capacity of 80.00 MiB of which 40.00 MiB is free."));
  // From 2.4 the pool's free cached block counts as allocated, in private pools.
  CHECK_THAT(result.oom->message,
             Catch::Contains("Of the allocated memory 40.00 MiB is allocated by PyTorch, with 40.00 MiB allocated in "
                             "private pools (e.g., CUDA Graphs), and 0 bytes is reserved by PyTorch but unallocated."));
}

TEST_CASE("torch 2.10 borrows from a use_on_oom pool before freeing the default pools' cache", "[sim][mempool]") {
  // 70 MiB device: the default pool caches a free 20 MiB segment, the pool a free 40 MiB one,
  // 10 MiB stay free; then a 24 MiB request that the default cache cannot serve.
  const std::string trace =
      "alloc x 20971520\nfree x\n"
      "mempool_enter p use_on_oom\nalloc t 41943040\nmempool_exit p\nfree t\n"
      "alloc y 25165824\n";
  ReplayResult result = run(trace, 70 * MiB, 210);
  CHECK(result.num_ooms == 0);
  CHECK(result.segment_frees == 0);  // the default cache is kept: y went into p's segment
  CHECK(result.segment_allocs == 2);
  CHECK(reserved_at_end(result) == 60 * MiB);
}

TEST_CASE("torch 2.8 borrows from a use_on_oom pool only after the OOM retry flushed the cache", "[sim][mempool]") {
  // As above: on 2.8 the retry first returns the default pool's 20 MiB segment, after which
  // cudaMalloc finds the 24 MiB for y, so the pool is never borrowed from.
  const std::string trace =
      "alloc x 20971520\nfree x\n"
      "mempool_enter p use_on_oom\nalloc t 41943040\nmempool_exit p\nfree t\n"
      "alloc y 25165824\n";
  ReplayResult result = run(trace, 70 * MiB, 208);
  CHECK(result.num_ooms == 0);
  CHECK(result.segment_frees == 1);   // x's segment
  CHECK(result.segment_allocs == 3);  // x, t, and a new one for y
  CHECK(reserved_at_end(result) == 64 * MiB);
}

TEST_CASE("an allocation bound for another private pool does not borrow from a use_on_oom pool", "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter p use_on_oom\nalloc t 41943040\nmempool_exit p\nfree t\n"
      "mempool_enter q\nalloc y 31457280\nmempool_exit q\n",  // inside q's context: q or nothing
      40 * MiB);
  CHECK(result.num_ooms == 1);
}

TEST_CASE("a default-pool request borrows from a use_on_oom pool while a graph captures on another stream",
          "[sim][mempool]") {
  // The capture skips the retry's flush; the borrowing is still allowed, as the request is
  // not the capture's.
  TorchVersion version = GENERATE(208, 210);
  ReplayResult result = run(
      "mempool_enter p use_on_oom\nalloc t 41943040\nmempool_exit p\nfree t\n"
      "capture_begin g 7\n"
      "alloc y 31457280\n"     // stream 0: the default pool, nothing free on the device
      "alloc z 31457280 7\n"   // the capture's request: the graph's pool or nothing
      "capture_end g\n",
      40 * MiB, version);
  CHECK(result.num_ooms == 1);  // z only
  CHECK(allocated_at_end(result) == 30 * MiB);
}

TEST_CASE("a use_on_oom pool lends only blocks of the request's stream", "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter p use_on_oom\nalloc t 41943040 5\nmempool_exit p\nfree t\n"  // p caches 40 MiB on stream 5
      "alloc y 31457280 0\n",
      40 * MiB);
  CHECK(result.num_ooms == 1);
}

TEST_CASE("a released use_on_oom pool is not borrowed from and the OOM retry returns its memory", "[sim][mempool]") {
  TorchVersion version = GENERATE(208, 210);
  ReplayResult result = run(
      "mempool_enter p use_on_oom\nalloc t 41943040\nmempool_exit p\nfree t\n"
      "mempool_release p\n"
      "alloc y 31457280\n",  // the flush frees p's segment (no graph uses it), then cudaMalloc succeeds
      40 * MiB, version);
  CHECK(result.num_ooms == 0);
  CHECK(result.segment_frees == 1);
  CHECK(result.segment_allocs == 2);
  CHECK(reserved_at_end(result) == 30 * MiB);
}

TEST_CASE("empty_cache keeps a live use_on_oom pool's cached blocks for later borrowing", "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter p use_on_oom\nalloc t 41943040\nmempool_exit p\nfree t\n"
      "empty_cache\n"
      "alloc y 31457280\n",
      40 * MiB);
  CHECK(result.num_ooms == 0);
  CHECK(result.segment_frees == 0);
  CHECK(result.segment_allocs == 1);
  CHECK(allocated_at_end(result) == 30 * MiB);
}

TEST_CASE("a no_split pool hands out a fresh segment whole", "[sim][mempool]") {
  ReplayResult split = run("mempool_enter p\nalloc a 4194304\nalloc b 4194304\nmempool_exit p\n", 1ull << 30);
  CHECK(split.segment_allocs == 1);  // b is cut from a's 20 MiB segment
  CHECK(allocated_at_end(split) == 8 * MiB);
  ReplayResult whole = run("mempool_enter p no_split\nalloc a 4194304\nalloc b 4194304\nmempool_exit p\n", 1ull << 30);
  CHECK(whole.segment_allocs == 2);  // each 4 MiB request takes a 20 MiB segment of its own
  CHECK(allocated_at_end(whole) == 40 * MiB);
  CHECK(whole.final_stats.inactive_split.all().current == 0);
}

TEST_CASE("a cached block of a no_split pool serves a smaller request whole", "[sim][mempool]") {
  ReplayResult result = run("mempool_enter p no_split\nalloc a 4194304\nfree a\nalloc b 2097152\nmempool_exit p\n",
                            1ull << 30);
  CHECK(result.segment_allocs == 1);
  CHECK(allocated_at_end(result) == 20 * MiB);
}

TEST_CASE("a no_split pool hands out its small segments whole too", "[sim][mempool]") {
  ReplayResult result = run("mempool_enter p no_split\nalloc a 512\nalloc b 512\nmempool_exit p\n", 1ull << 30);
  CHECK(result.segment_allocs == 2);  // two 2 MiB small segments, not two 512-byte blocks of one
  CHECK(result.final_stats.allocated_bytes.pool(true).current == static_cast<int64_t>(4 * MiB));
}

TEST_CASE("a block borrowed from a no_split use_on_oom pool is taken whole", "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter p use_on_oom no_split\nalloc t 41943040\nmempool_exit p\nfree t\n"
      "alloc y 31457280\n",
      40 * MiB);
  CHECK(result.num_ooms == 0);
  CHECK(allocated_at_end(result) == 40 * MiB);  // the whole 40 MiB block, no 10 MiB remainder
}

TEST_CASE("a MemPool option older torch lacks is refused naming the option and the release", "[sim][mempool]") {
  CHECK_THROWS_WITH(run("alloc x 512\nmempool_enter p use_on_oom\nmempool_exit p\n", 1ull << 30, 207),
                    Catch::StartsWith("t:2: event 1: error: memory pool 'p' is created with use_on_oom") &&
                        Catch::Contains("2.8") && Catch::Contains("2.7"));
  CHECK_THROWS_WITH(run("mempool_enter p no_split\nmempool_exit p\n", 1ull << 30, 209),
                    Catch::Contains("no_split") && Catch::Contains("2.10") && Catch::Contains("2.9"));
  CHECK_NOTHROW(run("mempool_enter p use_on_oom\nmempool_exit p\n", 1ull << 30, 208));
}

TEST_CASE("an unknown MemPool option is an error naming the line and the option", "[sim][mempool]") {
  CHECK_THROWS_WITH(parse_trace_text("t", "alloc a 512\nmempool_enter p use_on_om\n"),
                    Catch::Contains("t:2") && Catch::Contains("'use_on_om'") && Catch::Contains("use_on_oom"));
  CHECK_THROWS_AS(parse_trace_text("t", "mempool_enter p no_split no_split\n"), oomcast::InputError);
}

TEST_CASE("MemPool options are given only where the pool is created", "[sim][mempool]") {
  CHECK_THROWS_WITH(parse_trace_text("t", "mempool_enter p\nmempool_exit p\nmempool_enter p use_on_oom\n"),
                    Catch::Contains("t:3") && Catch::Contains("line 1"));
  // After mempool_release the name makes a new pool, which may take options.
  CHECK_NOTHROW(parse_trace_text("t", "mempool_enter p\nmempool_exit p\nmempool_release p\nmempool_enter p no_split\n"));
}

TEST_CASE("MemPool options survive writing a trace and reading it back", "[sim][mempool]") {
  Trace trace = parse_trace_text("t", "mempool_enter p no_split use_on_oom\nmempool_exit p\nmempool_enter p\n");
  std::ostringstream text;
  write_trace(text, trace);
  Trace again = parse_trace_text("again", text.str());
  REQUIRE(again.events.size() == 3);
  CHECK(again.events[0].slot == (kMemPoolUseOnOom | kMemPoolNoSplit));
  CHECK(again.events[2].slot == 0);
}
