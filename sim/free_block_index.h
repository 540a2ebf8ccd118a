// FreeBlockIndex: a pool's free blocks in PyTorch's best-fit order (stream, then size, then
// address: BlockComparatorSize), built for the replay hot path. Per stream, blocks sit in
// size-class bins (16 classes per power of two, as in TLSF allocators) with a two-level
// bitmap of the non-empty bins; inside a bin they are in (size, address) order, a sorted
// array while the bin is short and a balanced tree once it is long (FreeBlockBin), so many
// free blocks of one size cost O(log n) per operation, not a shift of the whole bin.
// A best-fit lookup is a bin index, at most two bit scans and a search inside one bin; the
// order seen by every walk (next, prev, for_each) is exactly the ordered set's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <vector>

#include "sim/free_block_bin.h"

namespace oomcast::sim {

struct Block;

class FreeBlockIndex {
 public:
  FreeBlockIndex();
  ~FreeBlockIndex();
  FreeBlockIndex(const FreeBlockIndex&) = delete;
  FreeBlockIndex& operator=(const FreeBlockIndex&) = delete;

  // Requires: the block's stream, size and address do not change while it is indexed.
  void insert(Block* block);
  void erase(const Block* block);

  // The first block at or after (stream, size, address 0) that is on `stream`, or nullptr.
  Block* lower_bound(uint64_t stream, uint64_t size) const;
  // The last block before (stream, size, address 0) in the whole order, or nullptr.
  Block* last_before(uint64_t stream, uint64_t size) const;
  // In-order neighbours of an indexed block (across streams), or nullptr.
  Block* next(const Block* block) const;
  Block* prev(const Block* block) const;

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Every block, in order.
  std::vector<Block*> in_order() const;

  // Bin of a block size (a multiple of 512); monotonic in the size.
  static uint32_t bin_of(uint64_t size);

 private:
  static constexpr uint32_t kSubBins = 16;
  static constexpr uint32_t kLevels = 56;
  static constexpr uint32_t kBins = kLevels * kSubBins;
  struct StreamBins {
    uint64_t stream = 0;
    uint64_t level_bits = 0;                   // bit l: some bin of level l is non-empty
    std::array<uint16_t, kLevels> bin_bits{};  // bit s of level l: bin l*16+s is non-empty
    std::array<FreeBlockBin, kBins> bins;
    size_t count = 0;
  };

  // Almost every call names the stream of the call before (one stream, or one at a time).
  StreamBins* find_stream(uint64_t stream) const {
    if (last_used_ && last_used_->stream == stream) [[likely]]
      return last_used_;
    return find_other_stream(stream);
  }
  StreamBins* find_other_stream(uint64_t stream) const;
  size_t stream_rank(uint64_t stream) const;  // index of the first stream >= `stream`
  // The first non-empty bin > `bin` (UINT32_MAX if none), the last non-empty bin < `bin`.
  static uint32_t next_bin(const StreamBins& bins, uint32_t bin);
  static uint32_t prev_bin(const StreamBins& bins, uint32_t bin);
  Block* first_of_stream_at_or_after(size_t rank) const;
  Block* last_of_stream_before(size_t rank) const;

  FreeBlockNodes tree_nodes_;  // the long bins' tree nodes (outlives streams_)
  std::vector<std::unique_ptr<StreamBins>> streams_;  // ascending stream id
  mutable StreamBins* last_used_ = nullptr;
  size_t count_ = 0;
};

}  // namespace oomcast::sim
