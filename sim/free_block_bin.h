// FreeBlockBin: one size-class bin of the free-block index, its blocks in (size, address)
// order. A short bin is a sorted array (a few cache lines, the common case); a bin that
// grows past kTreeAbove entries becomes a balanced tree, so that many free blocks of one
// size (hundreds of layers' activations cached between iterations) cost O(log n) per insert,
// erase and lookup instead of shifting the rest of the array. It goes back to an array when
// it shrinks below kArrayBelow; the gap between the two makes each conversion's O(n) copy
// amortized O(1) over the operations that caused it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <set>
#include <vector>

namespace oomcast::sim {

struct Block;

// The tree nodes of one index's bins: freed nodes are kept on a list and handed out again,
// so a replay that keeps long bins allocates nodes only as the bins reach new lengths, and a
// node costs a few instructions to get or return (std::pmr's pool resource: ~50 each).
class FreeBlockNodes final : public std::pmr::memory_resource {
 public:
  FreeBlockNodes() = default;
  FreeBlockNodes(const FreeBlockNodes&) = delete;
  FreeBlockNodes& operator=(const FreeBlockNodes&) = delete;

 private:
  struct FreeNode {
    FreeNode* next;
  };
  static constexpr size_t kNodeBytes = 64;  // a red-black tree node of a 24-byte entry is 56
  static constexpr size_t kChunkNodes = 1024;
  void* do_allocate(size_t bytes, size_t alignment) override;
  void do_deallocate(void* node, size_t bytes, size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }

  FreeNode* free_ = nullptr;
  std::vector<std::unique_ptr<std::byte[]>> chunks_;
  size_t used_in_last_chunk_ = kChunkNodes;
};

class FreeBlockBin {
 public:
  struct Entry {
    uint64_t size;
    uint64_t address;
    Block* block;
  };
  static constexpr size_t kTreeAbove = 64;
  static constexpr size_t kArrayBelow = 16;

  bool empty() const { return tree_ ? tree_->empty() : array_.empty(); }
  size_t size() const { return tree_ ? tree_->size() : array_.size(); }
  bool is_tree() const { return tree_ != nullptr; }

  // `nodes` allocates the tree's nodes when the bin becomes one (shared by a whole index).
  void insert(const Entry& entry, std::pmr::memory_resource* nodes) {
    if (!tree_ && array_.size() < kTreeAbove) [[likely]] {
      insert_into_array(entry);
      return;
    }
    insert_into_tree(entry, nodes);
  }
  // Requires: `block`, of this size and address, is in the bin.
  void erase(uint64_t size, uint64_t address, const Block* block) {
    if (!tree_) [[likely]] {
      erase_from_array(size, address, block);
      return;
    }
    erase_from_tree(size, address, block);
  }

  // Requires: the bin is not empty.
  Block* front() const {
    if (!tree_) [[likely]]
      return array_.front().block;
    return remember(tree_->begin());
  }
  Block* back() const { return tree_ ? std::prev(tree_->end())->block : array_.back().block; }
  // The first block whose size is >= `size`, or nullptr.
  Block* first_at_least(uint64_t size) const {
    if (tree_) [[unlikely]]
      return first_in_tree_at_least(size);
    if (array_.empty() || array_.back().size < size) return nullptr;
    if (array_.size() <= kLinearScan) {
      for (const Entry& entry : array_)
        if (entry.size >= size) return entry.block;
    }
    return std::partition_point(array_.begin(), array_.end(), [size](const Entry& e) { return e.size < size; })->block;
  }
  // The last block whose size is < `size`, or nullptr.
  Block* last_below(uint64_t size) const;
  // The in-bin neighbours of the indexed entry (size, address), or nullptr at the bin's ends.
  Block* after(uint64_t size, uint64_t address) const;
  Block* before(uint64_t size, uint64_t address) const;

  template <typename Visit>
  void for_each(Visit&& visit) const {
    if (tree_) {
      for (const Entry& entry : *tree_) visit(entry.block);
    } else {
      for (const Entry& entry : array_) visit(entry.block);
    }
  }

 private:
  struct EntryLess {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.size != b.size ? a.size < b.size : a.address < b.address;
    }
  };
  using Tree = std::pmr::set<Entry, EntryLess>;
  // Bins up to this long are searched linearly (a few cache lines, no mispredicted halving).
  static constexpr size_t kLinearScan = 8;

  void insert_into_array(const Entry& entry) {
    // Most bins hold a few blocks and most inserts land near the end: an insertion-sort step
    // from the back, which moves each entry it passes as it compares; a long way in, a binary
    // search and one move (at most kTreeAbove entries).
    array_.push_back(entry);
    Entry* first = array_.data();
    Entry* at = first + array_.size() - 1;
    Entry* stop = at - std::min<std::ptrdiff_t>(at - first, static_cast<std::ptrdiff_t>(kLinearScan));
    const EntryLess less;
    while (at != stop && less(entry, *(at - 1))) {
      *at = *(at - 1);
      --at;
    }
    if (at == stop && at != first && less(entry, *(at - 1))) {
      Entry* found = std::upper_bound(first, at, entry, less);
      std::move_backward(found, at, at + 1);
      at = found;
    }
    *at = entry;
  }
  void erase_from_array(uint64_t size, uint64_t address, const Block* block) {
    Entry* first = array_.data();
    Entry* last = first + array_.size();
    Entry* at = first;
    if (array_.size() <= kLinearScan) {
      while (at->block != block) ++at;
    } else {
      at = std::lower_bound(first, last, Entry{size, address, nullptr}, EntryLess{});
    }
    for (Entry* next = at + 1; next != last; ++next) *(next - 1) = *next;
    array_.pop_back();
  }
  void insert_into_tree(const Entry& entry, std::pmr::memory_resource* nodes);
  void erase_from_tree(uint64_t size, uint64_t address, const Block* block);
  Block* first_in_tree_at_least(uint64_t size) const;
  // A best-fit lookup is almost always followed by the erase of the block it found: the
  // tree remembers where that block is, so that erase need not search again.
  Block* remember(Tree::const_iterator at) const {
    found_ = at;
    return at->block;
  }

  std::vector<Entry> array_;    // the entries while the bin is short
  std::unique_ptr<Tree> tree_;  // the entries once it is long (then array_ is empty)
  mutable Tree::const_iterator found_;  // the last block a lookup returned (valid while tree_ holds it)
};

}  // namespace oomcast::sim
