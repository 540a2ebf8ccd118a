// torch.cuda.MemPool user pools (`with torch.cuda.use_mem_pool(pool)`): which allocations go
// to the pool, who may reuse its blocks, when its memory goes back to CUDA, and the OOM retry
// that does not flush the cache while a pool context is open. Expected numbers worked out by
// hand from the allocator rules (20 MiB segments for 1-10 MiB requests).
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "sim/replay.h"
#include "sim/trace_io.h"

using namespace oomcast::sim;

namespace {
constexpr uint64_t MiB = 1ull << 20;

ReplayResult run(const std::string& text, uint64_t total = 80ull << 30) {
  DeviceModel model;
  model.total_bytes = total;
  ReplayOptions options;
  options.check_invariants = true;
  options.stop_at_first_oom = false;
  return replay(parse_trace_text("t", text), AllocatorConfig{}, model, options);
}

Bytes reserved_at_end(const ReplayResult& result) {
  return static_cast<Bytes>(result.final_stats.reserved_bytes.all().current);
}
}  // namespace

TEST_CASE("memory freed inside a use_mem_pool context is not reused by the default pool", "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter p\n"
      "alloc tmp 4194304\n"  // a 20 MiB segment of p
      "free tmp\n"           // back to p
      "mempool_exit p\n"
      "alloc x 4194304\n");  // the default pool has nothing cached: a second segment
  CHECK(result.segment_allocs == 2);
  CHECK(reserved_at_end(result) == 40 * MiB);
}

TEST_CASE("a block of a user pool freed after its context closed returns to that pool", "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter p\nalloc kept 4194304\nmempool_exit p\n"
      "free kept\n"                 // outside the context, but the block is p's
      "alloc x 4194304\n"           // default pool: a new segment
      "mempool_enter p\nalloc y 4194304\nmempool_exit p\n");  // p reuses kept's block
  CHECK(result.segment_allocs == 2);
}

TEST_CASE("inside use_mem_pool the allocations of every stream go to the pool", "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter p\n"
      "alloc a 4194304 0\n"
      "alloc b 4194304 3\n"  // another stream: also p, in a segment of stream 3
      "free b\n"
      "alloc c 4194304 3\n"  // reuses b's block in p
      "mempool_exit p\n");
  CHECK(result.segment_allocs == 2);
}

TEST_CASE("empty_cache keeps a live user pool's memory and returns it once the pool is released", "[sim][mempool]") {
  ReplayResult kept = run("mempool_enter p\nalloc tmp 4194304\nfree tmp\nmempool_exit p\nempty_cache\n");
  CHECK(kept.segment_frees == 0);
  CHECK(reserved_at_end(kept) == 20 * MiB);
  ReplayResult released =
      run("mempool_enter p\nalloc tmp 4194304\nfree tmp\nmempool_exit p\nmempool_release p\nempty_cache\n");
  CHECK(released.segment_frees == 1);
  CHECK(reserved_at_end(released) == 0);
}

TEST_CASE("a released user pool keeps the segments of tensors still allocated in it", "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter p\nalloc out 4194304\nalloc tmp 25165824\nfree tmp\nmempool_exit p\n"
      "mempool_release p\nempty_cache\n"   // tmp's 24 MiB segment goes; out's 20 MiB one stays
      "free out\nempty_cache\n");          // now out's goes too
  CHECK(result.segment_frees == 2);
  CHECK(reserved_at_end(result) == 0);
}

TEST_CASE("inside use_mem_pool the OOM retry does not flush the default pool's cache", "[sim][mempool]") {
  // 50 MiB device: a free 20 MiB segment cached by the default pool, then a 36 MiB request.
  const std::string cached = "alloc x 4194304\nfree x\n";
  ReplayResult outside = run(cached + "alloc big 37748736\n", 50 * MiB);
  CHECK(outside.num_ooms == 0);  // the retry returned the cached segment, then got 36 MiB
  ReplayResult inside = run(cached + "mempool_enter p\nalloc big 37748736\nmempool_exit p\n", 50 * MiB);
  // The retry's first step frees only the request's own pool (p holds nothing) and the full
  // flush is skipped while a pool context is open, as in PyTorch: OOM.
  CHECK(inside.num_ooms == 1);
}

TEST_CASE("a graph can capture into a user pool and reuse what the pool freed", "[sim][mempool]") {
  ReplayResult result = run(
      "mempool_enter p\nalloc tmp 4194304\nfree tmp\nmempool_exit p\n"
      "capture_begin g 7 p\n"   // pool=p.id: captures on stream 7 into p
      "alloc s 4194304 7\n"     // stream 7 has no block in p yet: a new segment of p
      "capture_end g\n"
      "mempool_enter p\nalloc again 4194304\nmempool_exit p\n");  // stream 0 reuses tmp's block
  CHECK(result.segment_allocs == 2);
}

TEST_CASE("empty_cache inside a use_mem_pool context is allowed", "[sim][mempool]") {
  ReplayResult result = run("alloc x 4194304\nfree x\nmempool_enter p\nempty_cache\nmempool_exit p\n");
  CHECK(result.segment_frees == 1);
}

TEST_CASE("pool actions out of order are errors naming the line", "[sim][mempool]") {
  CHECK_THROWS_AS(parse_trace_text("t", "mempool_exit p\n"), oomcast::InputError);
  CHECK_THROWS_AS(parse_trace_text("t", "mempool_enter p\nmempool_enter p\n"), oomcast::InputError);
  CHECK_THROWS_AS(parse_trace_text("t", "mempool_enter p\nmempool_release p\n"), oomcast::InputError);
  CHECK_THROWS_AS(parse_trace_text("t", "mempool_release p\n"), oomcast::InputError);
  CHECK_THROWS_WITH(parse_trace_text("t", "alloc a 512\nmempool_exit p\n"), Catch::Contains("t:2"));
}
