// The allocator's rules, one per TEST_CASE, with expected numbers worked out by hand from
// the spec (the mini-traces of spec §11 among them), never copied from the simulator.
#include "sim/caching_allocator.h"

#include <catch2/catch.hpp>

using namespace oomcast::sim;

namespace {
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t GiB = 1ull << 30;

// An allocator on a device of the given size, checking invariants after every call.
struct Fixture {
  explicit Fixture(const std::string& conf = "", uint64_t total = 80 * GiB, double fraction = 0.0)
      : config(parse_alloc_conf(conf)), device(make_model(total, fraction)), allocator(config, device) {
    allocator.record_segment_decisions(&decisions);
  }
  static DeviceModel make_model(uint64_t total, double fraction) {
    DeviceModel model;
    model.total_bytes = total;
    model.memory_fraction = fraction;
    return model;
  }
  Block* alloc(uint64_t bytes) {
    Block* block = allocator.malloc(bytes);
    REQUIRE(allocator.check_invariants() == "");
    return block;
  }
  void free(Block* block) {
    allocator.free(block);
    REQUIRE(allocator.check_invariants() == "");
  }
  int64_t allocated() const { return allocator.stats().allocated_bytes.all().current; }
  int64_t reserved() const { return allocator.stats().reserved_bytes.all().current; }
  int64_t requested() const { return allocator.stats().requested_bytes.all().current; }
  int64_t segments() const { return allocator.stats().segment.all().current; }
  int64_t inactive_split() const { return allocator.stats().inactive_split.all().current; }
  int64_t inactive_split_bytes() const { return allocator.stats().inactive_split_bytes.all().current; }

  AllocatorConfig config;
  SimulatedDevice device;
  CachingAllocator allocator;
  std::vector<SegmentDecision> decisions;
};
}  // namespace

TEST_CASE("a 1000-byte request takes 1024 bytes of a new 2 MiB small segment", "[sim][split]") {
  Fixture f;
  f.alloc(1000);
  CHECK(f.reserved() == int64_t(2 * MiB));
  CHECK(f.allocated() == 1024);
  CHECK(f.requested() == 1000);
  CHECK(f.segments() == 1);
  CHECK(f.inactive_split() == 1);
  CHECK(f.inactive_split_bytes() == int64_t(2 * MiB - 1024));
}

TEST_CASE("a 5 MiB request splits a new 20 MiB segment and leaves 15 MiB cached", "[sim][split]") {
  Fixture f;
  f.alloc(1000);
  f.alloc(5 * MiB);
  CHECK(f.reserved() == int64_t(22 * MiB));
  CHECK(f.allocated() == int64_t(5 * MiB + 1024));
  CHECK(f.segments() == 2);
  CHECK(f.inactive_split() == 2);
  CHECK(f.inactive_split_bytes() == int64_t(2 * MiB - 1024 + 15 * MiB));
}

TEST_CASE("a request equal to a cached remainder takes it whole without new memory", "[sim][split]") {
  Fixture f;
  f.alloc(1000);
  f.alloc(5 * MiB);
  f.alloc(15 * MiB);
  CHECK(f.reserved() == int64_t(22 * MiB));
  CHECK(f.allocated() == int64_t(20 * MiB + 1024));
  CHECK(f.inactive_split() == 1);
  CHECK(f.inactive_split_bytes() == int64_t(2 * MiB - 1024));
}

TEST_CASE("freeing a block between two allocated neighbours does not merge", "[sim][merge]") {
  Fixture f;
  f.alloc(1000);
  Block* five = f.alloc(5 * MiB);
  f.alloc(15 * MiB);
  f.free(five);
  CHECK(f.inactive_split() == 2);
  CHECK(f.inactive_split_bytes() == int64_t(2 * MiB - 1024 + 5 * MiB));
}

TEST_CASE("best fit ignores a smaller free block and grows a new segment", "[sim][split]") {
  // Spec §11 step 5: only a 5 MiB free block exists, so 6 MiB needs a third segment.
  Fixture f;
  f.alloc(1000);
  Block* five = f.alloc(5 * MiB);
  f.alloc(15 * MiB);
  f.free(five);
  f.alloc(6 * MiB);
  CHECK(f.reserved() == int64_t(42 * MiB));
  CHECK(f.segments() == 3);
  CHECK(f.inactive_split() == 3);
  // Step 6: empty_cache finds no wholly free segment.
  f.allocator.empty_cache();
  CHECK(f.reserved() == int64_t(42 * MiB));
  // Step 7: 11 MiB takes the 14 MiB remainder, leaving 3 MiB (> 1 MiB, so it splits).
  int64_t split_bytes_before = f.inactive_split_bytes();
  f.alloc(11 * MiB);
  CHECK(f.reserved() == int64_t(42 * MiB));
  CHECK(f.inactive_split() == 3);
  CHECK(f.inactive_split_bytes() == split_bytes_before - int64_t(11 * MiB));
}

TEST_CASE("a large block is handed out whole when exactly 1 MiB would remain", "[sim][split]") {
  // 11 MiB -> a 12 MiB segment; the 1 MiB remainder is not > 1 MiB, so no split.
  Fixture f;
  f.alloc(11 * MiB);
  CHECK(f.allocated() == int64_t(12 * MiB));
  CHECK(f.requested() == int64_t(11 * MiB));
  CHECK(f.inactive_split() == 0);
}

TEST_CASE("a small block is split when at least 512 bytes remain", "[sim][split]") {
  Fixture f;
  Block* a = f.alloc(2 * MiB - 512);  // rounded 2 MiB - 512 > 1 MiB: large pool, 20 MiB segment
  CHECK(a->pool->is_small() == false);
  Fixture g;
  g.alloc(MiB);  // exactly 1 MiB: small pool, 2 MiB segment, 1 MiB remainder splits off
  CHECK(g.reserved() == int64_t(2 * MiB));
  CHECK(g.inactive_split_bytes() == int64_t(MiB));
}

TEST_CASE("freeing the middle block merges with both free neighbours", "[sim][merge]") {
  Fixture f;
  Block* a = f.alloc(4 * MiB);
  Block* b = f.alloc(4 * MiB);
  Block* c = f.alloc(4 * MiB);  // 20 MiB segment: a, b, c and an 8 MiB remainder
  f.free(a);
  f.free(c);                    // merges with the 8 MiB tail -> 12 MiB
  CHECK(f.inactive_split() == 2);
  f.free(b);                    // merges with a (4) and the 12 MiB run: one 20 MiB block
  CHECK(f.inactive_split() == 0);
  CHECK(f.inactive_split_bytes() == 0);
  f.allocator.empty_cache();
  CHECK(f.reserved() == 0);
}

TEST_CASE("empty_cache returns a wholly free segment with one segment_free", "[sim][empty_cache]") {
  // Spec §11 step 9.
  Fixture f;
  Block* block = f.alloc(2 * MiB);
  f.free(block);
  f.allocator.empty_cache();
  CHECK(f.reserved() == 0);
  CHECK(f.segments() == 0);
  REQUIRE(f.decisions.size() == 2);
  CHECK(f.decisions[1].kind == SegmentDecision::Kind::Free);
  CHECK(f.decisions[1].size == 20 * MiB);
}

TEST_CASE("allocated bytes fall at free while the freed block keeps its requested size", "[sim][merge]") {
  Fixture f;
  Block* a = f.alloc(3000);
  CHECK(f.requested() == 3000);
  f.free(a);
  CHECK(f.allocated() == 0);
  CHECK(f.requested() == 0);
  CHECK(a->requested_size == 3000);
}

TEST_CASE("with max_split_size a small request never takes an oversize block", "[sim][oversize]") {
  // Spec §11 step 10 with max_split_size_mb:100.
  Fixture f("max_split_size_mb:100");
  Block* big = f.alloc(150 * MiB);
  CHECK(f.allocator.stats().oversize_segments.current == 1);
  CHECK(f.allocator.stats().oversize_allocations.current == 1);
  f.free(big);
  f.alloc(50 * MiB);  // 50 < 100 <= 150: miss, new 50 MiB segment
  CHECK(f.reserved() == int64_t(200 * MiB));
}

TEST_CASE("with max_split_size an oversize block serves a request within 20 MiB of it", "[sim][oversize]") {
  Fixture f("max_split_size_mb:100");
  Block* big = f.alloc(150 * MiB);
  f.free(big);
  Block* reused = f.alloc(140 * MiB);  // 150 < 140 + 20: hit, handed out whole (no split >= max)
  CHECK(reused->size == 150 * MiB);
  CHECK(f.reserved() == int64_t(150 * MiB));
}

TEST_CASE("with max_split_size an oversize block 20 MiB above the request is skipped", "[sim][oversize]") {
  Fixture f("max_split_size_mb:100");
  Block* big = f.alloc(150 * MiB);
  f.free(big);
  f.alloc(120 * MiB);  // 150 >= 120 + 20: miss, new 120 MiB segment
  CHECK(f.reserved() == int64_t(270 * MiB));
}

TEST_CASE("max_non_split_rounding_mb widens the oversize tolerance", "[sim][oversize]") {
  Fixture f("max_split_size_mb:100,max_non_split_rounding_mb:64");
  Block* big = f.alloc(150 * MiB);
  f.free(big);
  Block* reused = f.alloc(120 * MiB);  // 150 < 120 + 64: hit
  CHECK(reused->size == 150 * MiB);
}

TEST_CASE("a failed cudaMalloc frees cached segments and retries before OOM", "[sim][oom]") {
  // 100 MiB device. Cache a free 60 MiB segment, keep 20 MiB live, then ask for 70 MiB,
  // which the cached block cannot serve: 60 + 20 + 70 > 100, so the first cudaMalloc
  // fails; the flush frees the 60 MiB and the retry succeeds.
  Fixture f("", 100 * MiB);
  Block* cached = f.alloc(60 * MiB);
  f.alloc(20 * MiB);
  f.free(cached);
  Block* third = f.alloc(70 * MiB);
  REQUIRE(third != nullptr);
  CHECK(f.allocator.stats().num_alloc_retries == 1);
  CHECK(f.reserved() == int64_t(90 * MiB));
}

TEST_CASE("an allocation that does not fit after the retry is an OOM with PyTorch's text", "[sim][oom]") {
  Fixture f("", 100 * MiB);
  f.alloc(60 * MiB);
  Block* block = f.allocator.malloc(50 * MiB);
  CHECK(block == nullptr);
  REQUIRE(f.allocator.last_oom());
  CHECK(f.allocator.stats().num_ooms == 1);
  CHECK(f.allocator.stats().num_alloc_retries == 1);
  CHECK(f.allocator.last_oom()->message ==
        "CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a total capacity of 100.00 MiB of which "
        "40.00 MiB is free. Including non-PyTorch memory, this process has 60.00 MiB memory in use. Of the "
        "allocated memory 60.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. "
        "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
}

TEST_CASE("a caught OOM leaves the cache flushed", "[sim][oom]") {
  Fixture f("", 100 * MiB);
  Block* cached = f.alloc(30 * MiB);
  f.alloc(40 * MiB);
  f.free(cached);
  CHECK(f.allocator.malloc(80 * MiB) == nullptr);
  CHECK(f.reserved() == int64_t(40 * MiB));
}

TEST_CASE("the memory fraction caps reserved memory", "[sim][oom]") {
  // 100 MiB device at fraction 0.5: 40 MiB fits, a further 20 MiB segment would exceed 50.
  Fixture f("", 100 * MiB, 0.5);
  f.alloc(40 * MiB);
  CHECK(f.allocator.malloc(12 * MiB) == nullptr);
  CHECK(f.allocator.last_oom()->message.find("50.00 MiB allowed; ") != std::string::npos);
}

TEST_CASE("release_available_cached_blocks frees one oversize block big enough", "[sim][oversize]") {
  // 300 MiB device, max_split 100 MiB. Cache a free 150 MiB block and keep 100 MiB live;
  // a 120 MiB request misses (150 >= 120 + 20), cudaMalloc fails (150+100+120 > 300), and
  // release_available_cached_blocks frees the 150 MiB block so the next attempt fits
  // without the full flush (no retry counted).
  Fixture f("max_split_size_mb:100", 300 * MiB);
  Block* cached = f.alloc(150 * MiB);
  f.alloc(100 * MiB);
  f.free(cached);
  REQUIRE(f.alloc(120 * MiB) != nullptr);
  CHECK(f.allocator.stats().num_alloc_retries == 0);
  CHECK(f.reserved() == int64_t(220 * MiB));
}

TEST_CASE("garbage collection frees old cached segments above the threshold", "[sim][gc]") {
  // 1000 MiB device, fraction 1.0, threshold 0.1: reclaim starts above 100 MiB reserved.
  // Two 100 MiB segments are cached; a new 300 MiB request misses, so GC runs before the
  // cudaMalloc: both candidates have age >= mean and are freed.
  Fixture f("garbage_collection_threshold:0.1", 1000 * MiB, 1.0);
  Block* a = f.alloc(100 * MiB);
  Block* b = f.alloc(100 * MiB);
  f.free(a);
  f.free(b);
  CHECK(f.reserved() == int64_t(200 * MiB));
  f.alloc(300 * MiB);
  CHECK(f.reserved() == int64_t(300 * MiB));
}

TEST_CASE("garbage collection is inert without a memory fraction", "[sim][gc]") {
  Fixture f("garbage_collection_threshold:0.1", 1000 * MiB, 0.0);
  Block* a = f.alloc(100 * MiB);
  f.free(a);
  f.alloc(300 * MiB);
  CHECK(f.reserved() == int64_t(400 * MiB));
}

TEST_CASE("expandable segments grow in 20 MiB pages as the devlog example shows", "[sim][expandable]") {
  // Eight 16 MiB allocations map 20, 40, 60, 80, 80, 100, 120, 140 MiB.
  Fixture f("expandable_segments:True");
  const int64_t expected[] = {20, 40, 60, 80, 80, 100, 120, 140};
  std::vector<Block*> blocks;
  for (int64_t reserved_mib : expected) {
    blocks.push_back(f.alloc(16 * MiB));
    CHECK(f.reserved() == reserved_mib * int64_t(MiB));
  }
  CHECK(f.segments() == 0);
  CHECK(f.inactive_split() == 0);
  // After freeing all eight, one merged free block serves 4 x 32 MiB with no new mapping.
  for (Block* block : blocks) f.free(block);
  for (int i = 0; i < 4; ++i) f.alloc(32 * MiB);
  CHECK(f.reserved() == int64_t(140 * MiB));
}

TEST_CASE("empty_cache unmaps the whole free pages of an expandable segment", "[sim][expandable]") {
  Fixture f("expandable_segments:True");
  Block* a = f.alloc(16 * MiB);
  Block* b = f.alloc(16 * MiB);  // maps a second page: [0, 40) mapped, a=[0,16), b=[16,32)
  f.free(b);                     // free [16, 40): page [20, 40) lies entirely inside it
  f.allocator.empty_cache();
  CHECK(f.reserved() == int64_t(20 * MiB));
  f.free(a);
  f.allocator.empty_cache();
  CHECK(f.reserved() == 0);
  CHECK(f.allocator.stats().num_device_free == 2);
}

TEST_CASE("an expandable segment does not grow over a block whose free waits for another stream",
          "[sim][expandable][streams]") {
  // PyTorch's find_expandable_block takes the block before an unmapped range only when it is
  // allocatable (no pending events): handing out the pending block would give one address
  // to two live tensors.
  Fixture f("expandable_segments:True");
  Block* a = f.alloc(40 * MiB);  // two whole pages, the unmapped rest right after it
  f.allocator.record_stream(a, 5);
  f.allocator.free(a);
  const uint64_t pending_address = a->address;
  Block* b = f.alloc(10 * MiB);
  CHECK(b->address == pending_address + 40 * MiB);  // a fresh page after the pending block
  CHECK(f.reserved() == int64_t(60 * MiB));
  REQUIRE(f.allocator.check_invariants() == "");
}

TEST_CASE("expandable segments run out of memory page by page", "[sim][expandable]") {
  Fixture f("expandable_segments:True", 100 * MiB);
  f.alloc(60 * MiB);  // 3 pages
  CHECK(f.allocator.malloc(50 * MiB) == nullptr);
  CHECK(f.allocator.last_oom()->message.rfind("CUDA out of memory. Tried to allocate 50.00 MiB.", 0) == 0);
}

TEST_CASE("a zero-byte request touches nothing", "[sim][malloc]") {
  Fixture f;
  CHECK(f.allocator.malloc(0) == nullptr);
  CHECK_FALSE(f.allocator.last_oom());
  CHECK(f.reserved() == 0);
  CHECK(f.allocator.stats().allocation.all().allocated == 0);
}

TEST_CASE("a request of 1 EiB fails at once with its own message", "[sim][oom]") {
  Fixture f;
  CHECK(f.allocator.malloc(1ull << 60) == nullptr);
  CHECK(f.allocator.last_oom()->message == "CUDA out of memory. Tried to allocate more than 1EB memory.");
  CHECK(f.reserved() == 0);
}

TEST_CASE("blocks on different streams are not shared", "[sim][streams]") {
  Fixture f;
  Block* a = f.allocator.malloc(4 * MiB, 1);
  f.allocator.free(a);
  f.allocator.malloc(4 * MiB, 2);
  CHECK(f.reserved() == int64_t(40 * MiB));
  CHECK(f.allocator.check_invariants() == "");
}
