// FreeBlockIndex: size-class bins with bitmaps, in exact (stream, size, address) order.
#include "sim/free_block_index.h"

#include <algorithm>
#include <bit>

#include "sim/block.h"

namespace oomcast::sim {
namespace {
constexpr uint32_t kNone = UINT32_MAX;
}

FreeBlockIndex::FreeBlockIndex() = default;
FreeBlockIndex::~FreeBlockIndex() = default;

uint32_t FreeBlockIndex::bin_of(uint64_t size) {
  uint64_t unit = size >> 9;  // block sizes are multiples of 512
  if (unit < kSubBins) return static_cast<uint32_t>(unit);
  auto log = static_cast<uint32_t>(63 - std::countl_zero(unit));                  // >= 4
  auto sub = static_cast<uint32_t>((unit >> (log - 4)) & (kSubBins - 1));           // the next 4 bits
  return (log - 3) * kSubBins + sub;
}

FreeBlockIndex::StreamBins* FreeBlockIndex::find_other_stream(uint64_t stream) const {
  size_t rank = stream_rank(stream);
  if (rank == streams_.size() || streams_[rank]->stream != stream) return nullptr;
  last_used_ = streams_[rank].get();
  return last_used_;
}

size_t FreeBlockIndex::stream_rank(uint64_t stream) const {
  auto it = std::lower_bound(streams_.begin(), streams_.end(), stream,
                             [](const std::unique_ptr<StreamBins>& bins, uint64_t s) { return bins->stream < s; });
  return static_cast<size_t>(it - streams_.begin());
}

uint32_t FreeBlockIndex::next_bin(const StreamBins& bins, uint32_t bin) {
  uint32_t level = bin / kSubBins;
  uint32_t sub = bin % kSubBins;
  uint32_t above = bins.bin_bits[level] & ~((2u << sub) - 1u);
  if (above) return level * kSubBins + static_cast<uint32_t>(std::countr_zero(above));
  uint64_t levels = level + 1 < 64 ? bins.level_bits & ~((2ull << level) - 1ull) : 0;
  if (!levels) return kNone;
  auto next_level = static_cast<uint32_t>(std::countr_zero(levels));
  return next_level * kSubBins + static_cast<uint32_t>(std::countr_zero(static_cast<uint32_t>(bins.bin_bits[next_level])));
}

uint32_t FreeBlockIndex::prev_bin(const StreamBins& bins, uint32_t bin) {
  uint32_t level = bin / kSubBins;
  uint32_t sub = bin % kSubBins;
  uint32_t below = bins.bin_bits[level] & ((1u << sub) - 1u);
  if (below) return level * kSubBins + static_cast<uint32_t>(31 - std::countl_zero(below));
  uint64_t levels = bins.level_bits & ((1ull << level) - 1ull);
  if (!levels) return kNone;
  auto prev_level = static_cast<uint32_t>(63 - std::countl_zero(levels));
  return prev_level * kSubBins +
         static_cast<uint32_t>(31 - std::countl_zero(static_cast<uint32_t>(bins.bin_bits[prev_level])));
}

void FreeBlockIndex::insert(Block* block) {
  StreamBins* bins = find_stream(block->stream);
  if (!bins) {
    size_t rank = stream_rank(block->stream);
    auto fresh = std::make_unique<StreamBins>();
    fresh->stream = block->stream;
    bins = fresh.get();
    streams_.insert(streams_.begin() + static_cast<std::ptrdiff_t>(rank), std::move(fresh));
    last_used_ = bins;
  }
  uint32_t bin = bin_of(block->size);
  bins->bins[bin].insert(FreeBlockBin::Entry{block->size, block->address, block}, &tree_nodes_);
  bins->bin_bits[bin / kSubBins] = static_cast<uint16_t>(bins->bin_bits[bin / kSubBins] | (1u << (bin % kSubBins)));
  bins->level_bits |= 1ull << (bin / kSubBins);
  bins->count += 1;
  count_ += 1;
}

void FreeBlockIndex::erase(const Block* block) {
  StreamBins* bins = find_stream(block->stream);
  uint32_t bin = bin_of(block->size);
  FreeBlockBin& entries = bins->bins[bin];
  entries.erase(block->size, block->address, block);
  if (entries.empty()) {
    uint32_t level = bin / kSubBins;
    bins->bin_bits[level] = static_cast<uint16_t>(bins->bin_bits[level] & ~(1u << (bin % kSubBins)));
    if (!bins->bin_bits[level]) bins->level_bits &= ~(1ull << level);
  }
  bins->count -= 1;
  count_ -= 1;
}

Block* FreeBlockIndex::lower_bound(uint64_t stream, uint64_t size) const {
  const StreamBins* bins = find_stream(stream);
  if (!bins || bins->count == 0) return nullptr;
  uint32_t bin = bin_of(size);
  if (Block* found = bins->bins[bin].first_at_least(size)) return found;
  uint32_t next = next_bin(*bins, bin);
  return next == kNone ? nullptr : bins->bins[next].front();
}

Block* FreeBlockIndex::first_of_stream_at_or_after(size_t rank) const {
  for (; rank < streams_.size(); ++rank) {
    const StreamBins& bins = *streams_[rank];
    if (bins.count == 0) continue;
    uint32_t first = bins.bin_bits[0] & 1u ? 0 : next_bin(bins, 0);
    return bins.bins[first].front();
  }
  return nullptr;
}

Block* FreeBlockIndex::last_of_stream_before(size_t rank) const {
  while (rank-- > 0) {
    const StreamBins& bins = *streams_[rank];
    if (bins.count == 0) continue;
    auto level = static_cast<uint32_t>(63 - std::countl_zero(bins.level_bits));
    uint32_t last = level * kSubBins + static_cast<uint32_t>(31 - std::countl_zero(static_cast<uint32_t>(bins.bin_bits[level])));
    return bins.bins[last].back();
  }
  return nullptr;
}

Block* FreeBlockIndex::last_before(uint64_t stream, uint64_t size) const {
  size_t rank = stream_rank(stream);
  if (rank < streams_.size() && streams_[rank]->stream == stream) {
    const StreamBins& bins = *streams_[rank];
    uint32_t bin = bin_of(size);
    if (Block* found = bins.bins[bin].last_below(size)) return found;
    uint32_t previous = prev_bin(bins, bin);
    if (previous != kNone) return bins.bins[previous].back();
  }
  return last_of_stream_before(rank);
}

Block* FreeBlockIndex::next(const Block* block) const {
  const StreamBins* bins = find_stream(block->stream);
  uint32_t bin = bin_of(block->size);
  if (Block* found = bins->bins[bin].after(block->size, block->address)) return found;
  uint32_t next = next_bin(*bins, bin);
  if (next != kNone) return bins->bins[next].front();
  return first_of_stream_at_or_after(stream_rank(block->stream) + 1);
}

Block* FreeBlockIndex::prev(const Block* block) const {
  const StreamBins* bins = find_stream(block->stream);
  uint32_t bin = bin_of(block->size);
  if (Block* found = bins->bins[bin].before(block->size, block->address)) return found;
  uint32_t previous = prev_bin(*bins, bin);
  if (previous != kNone) return bins->bins[previous].back();
  return last_of_stream_before(stream_rank(block->stream));
}

std::vector<Block*> FreeBlockIndex::in_order() const {
  std::vector<Block*> blocks;
  blocks.reserve(count_);
  for (const auto& bins : streams_) {
    if (bins->count == 0) continue;
    for (uint32_t bin = bins->bin_bits[0] & 1u ? 0 : next_bin(*bins, 0); bin != kNone; bin = next_bin(*bins, bin))
      bins->bins[bin].for_each([&blocks](Block* block) { blocks.push_back(block); });
  }
  return blocks;
}

}  // namespace oomcast::sim
