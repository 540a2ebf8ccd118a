// FreeBlockIndex against the ordered set it replaces: the same (stream, size, address)
// order for every query, over random inserts and erases.
#include "sim/free_block_index.h"

#include <catch2/catch.hpp>

#include <deque>
#include <random>
#include <set>
#include <tuple>

#include "sim/block.h"
#include "sim/free_block_bin.h"

using namespace oomcast::sim;

namespace {

struct ByOrder {
  bool operator()(const Block* a, const Block* b) const {
    return std::tie(a->stream, a->size, a->address) < std::tie(b->stream, b->size, b->address);
  }
};

Block* reference_lower_bound(const std::set<Block*, ByOrder>& set, uint64_t stream, uint64_t size) {
  Block probe;
  probe.stream = stream;
  probe.size = size;
  probe.address = 0;
  auto it = set.lower_bound(&probe);
  return it == set.end() || (*it)->stream != stream ? nullptr : *it;
}

Block* reference_last_before(const std::set<Block*, ByOrder>& set, uint64_t stream, uint64_t size) {
  Block probe;
  probe.stream = stream;
  probe.size = size;
  probe.address = 0;
  auto it = set.lower_bound(&probe);
  return it == set.begin() ? nullptr : *std::prev(it);
}


// Random inserts and erases (more inserts in the first half, more erases in the second, so
// bins grow and shrink again), every query compared with the ordered set after each step.
template <typename RandomSize>
void check_against_ordered_set(std::mt19937_64& random, RandomSize random_size, int steps) {
  std::deque<Block> storage;
  std::vector<Block*> indexed;
  std::set<Block*, ByOrder> reference;
  FreeBlockIndex index;
  for (int step = 0; step < steps; ++step) {
    const uint64_t insert_percent = step < steps / 2 ? 60 : 35;
    bool insert = indexed.empty() || random() % 100 < insert_percent;
    if (insert) {
      Block& block = storage.emplace_back();
      block.stream = random() % 3 * 7;
      block.size = random_size();
      block.address = 0x7f0000000000ull + (random() % 100000) * 512 * 1024 + storage.size() * 512;
      index.insert(&block);
      reference.insert(&block);
      indexed.push_back(&block);
    } else {
      size_t pick = random() % indexed.size();
      index.erase(indexed[pick]);
      reference.erase(indexed[pick]);
      indexed[pick] = indexed.back();
      indexed.pop_back();
    }
    REQUIRE(index.size() == reference.size());
    uint64_t stream = random() % 4 * 7;
    uint64_t size = random_size();
    REQUIRE(index.lower_bound(stream, size) == reference_lower_bound(reference, stream, size));
    REQUIRE(index.last_before(stream, size) == reference_last_before(reference, stream, size));
    if (!indexed.empty()) {
      Block* some = indexed[random() % indexed.size()];
      auto at = reference.find(some);
      REQUIRE(index.next(some) == (std::next(at) == reference.end() ? nullptr : *std::next(at)));
      REQUIRE(index.prev(some) == (at == reference.begin() ? nullptr : *std::prev(at)));
    }
    if (step % 1000 == 0 || step == steps - 1) {
      std::vector<Block*> expected(reference.begin(), reference.end());
      REQUIRE(index.in_order() == expected);
    }
  }
}

}  // namespace

TEST_CASE("the free-block index keeps the ordered set's best-fit order", "[sim][pool]") {
  std::mt19937_64 random(11);
  auto random_size = [&] {
    // Sizes from 512 B to 64 GiB, many repeats (equal sizes order by address).
    int log = static_cast<int>(random() % 27);
    return (((random() % 4) + 1) << log) * 512;
  };
  check_against_ordered_set(random, random_size, 20000);
}

TEST_CASE("many free blocks of a few sizes keep the ordered set's order as bins grow long and shrink back",
          "[sim][pool]") {
  // Six sizes in three bins: each bin holds hundreds of blocks at its longest (a tree), then
  // drains below the array threshold again.
  std::mt19937_64 random(12);
  const uint64_t sizes[6] = {2 << 20, (2 << 20) + 512, 6 << 20, 6 << 20, 20 << 20, (20 << 20) + 4096};
  auto random_size = [&] { return sizes[random() % 6]; };
  check_against_ordered_set(random, random_size, 20000);
}

TEST_CASE("size classes grow with the size", "[sim][pool]") {
  uint32_t previous = 0;
  for (uint64_t size = 512; size < (1ull << 40); size += size / 7 / 512 * 512 + 512) {
    uint32_t bin = FreeBlockIndex::bin_of(size);
    CHECK(bin >= previous);
    previous = bin;
  }
}

TEST_CASE("a bin is a tree while it is long and an array again once it is short", "[sim][pool]") {
  FreeBlockNodes nodes;
  std::deque<Block> storage;
  FreeBlockBin bin;
  for (size_t i = 0; i <= FreeBlockBin::kTreeAbove; ++i) {
    Block& block = storage.emplace_back();
    block.size = 4 << 20;
    block.address = 0x7f0000000000ull + (FreeBlockBin::kTreeAbove - i) * (4 << 20);  // descending
    bin.insert(FreeBlockBin::Entry{block.size, block.address, &block}, &nodes);
  }
  CHECK(bin.is_tree());
  CHECK(bin.front() == &storage.back());  // the lowest address first
  while (bin.size() >= FreeBlockBin::kArrayBelow) {
    Block& block = storage.front();
    bin.erase(block.size, block.address, &block);
    storage.pop_front();
  }
  CHECK_FALSE(bin.is_tree());
  CHECK(bin.front() == &storage.back());
  CHECK(bin.back() == &storage.front());
}
