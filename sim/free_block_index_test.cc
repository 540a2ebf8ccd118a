// FreeBlockIndex against the ordered set it replaces: the same (stream, size, address)
// order for every query, over random inserts and erases.
#include "sim/free_block_index.h"

#include <catch2/catch.hpp>

#include <deque>
#include <random>
#include <set>
#include <tuple>

#include "sim/block.h"

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

}  // namespace

TEST_CASE("the free-block index keeps the ordered set's best-fit order", "[sim][pool]") {
  std::mt19937_64 random(11);
  std::deque<Block> storage;
  std::vector<Block*> indexed;
  std::set<Block*, ByOrder> reference;
  FreeBlockIndex index;
  auto random_size = [&] {
    // Sizes from 512 B to 64 GiB, many repeats (equal sizes order by address).
    int log = static_cast<int>(random() % 27);
    return (((random() % 4) + 1) << log) * 512;
  };
  for (int step = 0; step < 20000; ++step) {
    bool insert = indexed.empty() || random() % 100 < 55;
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
  }
  std::vector<Block*> expected(reference.begin(), reference.end());
  CHECK(index.in_order() == expected);
}

TEST_CASE("size classes grow with the size", "[sim][pool]") {
  uint32_t previous = 0;
  for (uint64_t size = 512; size < (1ull << 40); size += size / 7 / 512 * 512 + 512) {
    uint32_t bin = FreeBlockIndex::bin_of(size);
    CHECK(bin >= previous);
    previous = bin;
  }
}
