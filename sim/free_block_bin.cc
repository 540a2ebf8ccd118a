// FreeBlockBin: a sorted array while short, a balanced tree while long, same order either way.
#include "sim/free_block_bin.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <new>

namespace oomcast::sim {

void* FreeBlockNodes::do_allocate(size_t bytes, size_t alignment) {
  if (bytes > kNodeBytes || alignment > alignof(std::max_align_t)) [[unlikely]]
    return ::operator new(bytes, std::align_val_t{alignment});
  if (free_) {
    FreeNode* node = free_;
    free_ = node->next;
    return node;
  }
  if (used_in_last_chunk_ == kChunkNodes) {
    chunks_.push_back(std::make_unique<std::byte[]>(kChunkNodes * kNodeBytes));
    used_in_last_chunk_ = 0;
  }
  return chunks_.back().get() + kNodeBytes * used_in_last_chunk_++;
}

void FreeBlockNodes::do_deallocate(void* node, size_t bytes, size_t alignment) {
  if (bytes > kNodeBytes || alignment > alignof(std::max_align_t)) [[unlikely]] {
    ::operator delete(node, std::align_val_t{alignment});
    return;
  }
  free_ = new (node) FreeNode{free_};
}

void FreeBlockBin::insert_into_tree(const Entry& entry, std::pmr::memory_resource* nodes) {
  if (!tree_) {
    // The array is full: its sorted entries go into a tree (a hinted insert at the end each).
    tree_ = std::make_unique<Tree>(nodes);
    for (const Entry& moved : array_) tree_->emplace_hint(tree_->end(), moved);
    array_.clear();
    array_.shrink_to_fit();
    found_ = tree_->end();
  }
  tree_->insert(entry);
}

void FreeBlockBin::erase_from_tree(uint64_t size, uint64_t address, const Block* block) {
  if (found_ != tree_->end() && found_->block == block) {
    tree_->erase(found_);
    found_ = tree_->end();
  } else {
    tree_->erase(Entry{size, address, nullptr});  // the remembered iterator stays valid
  }
  if (tree_->size() >= kArrayBelow) return;
  array_.assign(tree_->begin(), tree_->end());
  tree_.reset();
}

Block* FreeBlockBin::first_in_tree_at_least(uint64_t size) const {
  auto at = tree_->lower_bound(Entry{size, 0, nullptr});
  return at == tree_->end() ? nullptr : remember(at);
}

Block* FreeBlockBin::last_below(uint64_t size) const {
  if (tree_) {
    auto at = tree_->lower_bound(Entry{size, 0, nullptr});
    return at == tree_->begin() ? nullptr : std::prev(at)->block;
  }
  auto at = std::partition_point(array_.begin(), array_.end(), [size](const Entry& e) { return e.size < size; });
  return at == array_.begin() ? nullptr : (at - 1)->block;
}

Block* FreeBlockBin::after(uint64_t size, uint64_t address) const {
  const Entry key{size, address, nullptr};
  if (tree_) {
    auto at = tree_->upper_bound(key);
    return at == tree_->end() ? nullptr : at->block;
  }
  auto at = std::upper_bound(array_.begin(), array_.end(), key, EntryLess{});
  return at == array_.end() ? nullptr : at->block;
}

Block* FreeBlockBin::before(uint64_t size, uint64_t address) const {
  const Entry key{size, address, nullptr};
  if (tree_) {
    auto at = tree_->lower_bound(key);
    return at == tree_->begin() ? nullptr : std::prev(at)->block;
  }
  auto at = std::lower_bound(array_.begin(), array_.end(), key, EntryLess{});
  return at == array_.begin() ? nullptr : (at - 1)->block;
}

}  // namespace oomcast::sim
