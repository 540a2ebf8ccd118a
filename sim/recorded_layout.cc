// RecordedLayout: segments, mapped runs and allocated blocks as the recording shows them.
#include "sim/recorded_layout.h"


#include "base/input_error.h"
#include "sim/size_class.h"

namespace oomcast::sim {

std::string hex(uint64_t value) {
  // By hand rather than snprintf: a snapshot replay names every block by its address.
  char buffer[18];
  char* end = buffer + sizeof buffer;
  char* p = end;
  do {
    *--p = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value);
  *--p = 'x';
  *--p = '0';
  return std::string(p, end);
}

void RecordedLayout::fail(int64_t entry, const std::string& message) const {
  throw InputError({name_, 0, 0, entry}, "", "inconsistent snapshot: " + message);
}

std::map<uint64_t, RecordedSegment>::const_iterator RecordedLayout::segment_containing(uint64_t address,
                                                                                      int64_t entry) const {
  auto it = segments.upper_bound(address);
  if (it == segments.begin()) fail(entry, "address " + hex(address) + " lies in no segment");
  --it;
  if (address >= it->first + it->second.size) fail(entry, "address " + hex(address) + " lies in no segment");
  return it;
}

uint64_t RecordedLayout::infer_extent(uint64_t address, uint64_t requested, int64_t entry) const {
  auto segment = segment_containing(address, entry);
  uint64_t boundary = segment->first + segment->second.size;
  auto next = allocated.upper_bound(address);
  if (next != allocated.end() && next->first < boundary) boundary = next->first;
  uint64_t rounded = round_size(requested, *config_);
  uint64_t available = boundary - address;
  if (available < rounded)
    fail(entry, "block at " + hex(address) + " needs " + std::to_string(rounded) + " bytes but only " +
                    std::to_string(available) + " are free there");
  uint64_t remaining = available - rounded;
  bool splits = segment->second.is_small || config_->expandable_segments
                    ? remaining >= kMinBlockSize
                    : rounded < config_->max_split_size && remaining > kSmallSize;
  return splits ? rounded : available;
}

void RecordedLayout::map_range(uint64_t address, uint64_t size, uint64_t stream, bool is_small, int64_t entry) {
  if (size == 0 || address + size < address) fail(entry, "mapped range at " + hex(address) + " is empty or overflows");
  auto next = segments.lower_bound(address);
  if (next != segments.end() && next->first < address + size)
    fail(entry, "mapped range at " + hex(address) + " overlaps the segment at " + hex(next->first));
  uint64_t begin = address;
  uint64_t end = address + size;
  auto joins = [&](const RecordedSegment& run) {
    return run.expandable && run.stream == stream && run.is_small == is_small;
  };
  if (next != segments.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second.size > address)
      fail(entry, "mapped range at " + hex(address) + " overlaps the segment at " + hex(previous->first));
    if (previous->first + previous->second.size == address && joins(previous->second)) {
      begin = previous->first;
      segments.erase(previous);
    }
  }
  if (next != segments.end() && next->first == end && joins(next->second)) {
    end += next->second.size;
    segments.erase(next);
  }
  segments[begin] = RecordedSegment{end - begin, stream, is_small, true};
}

void RecordedLayout::unmap_range(uint64_t address, uint64_t size, int64_t entry) {
  auto run = segment_containing(address, entry);
  RecordedSegment whole = run->second;
  uint64_t run_begin = run->first;
  uint64_t run_end = run_begin + whole.size;
  if (!whole.expandable) fail(entry, "segment_unmap at " + hex(address) + " inside a segment that is not expandable");
  if (address + size > run_end)
    fail(entry, "segment_unmap at " + hex(address) + " of " + std::to_string(size) + " bytes runs past its mapped range");
  auto block = allocated.lower_bound(address);
  if (block != allocated.begin()) {
    auto previous = std::prev(block);
    if (previous->first + previous->second.extent > address) block = previous;
  }
  if (block != allocated.end() && block->first < address + size)
    fail(entry, "segment_unmap at " + hex(address) + " would unmap the allocated block at " + hex(block->first));
  segments.erase(run);
  if (address > run_begin) segments[run_begin] = RecordedSegment{address - run_begin, whole.stream, whole.is_small, true};
  if (address + size < run_end)
    segments[address + size] = RecordedSegment{run_end - address - size, whole.stream, whole.is_small, true};
}

bool RecordedLayout::is_small_range(const SnapshotTraceEntry& entry, bool is_unmap) const {
  if (!is_unmap) return entry.size == kSmallBuffer;
  if (entry.size % kLargeBuffer != 0) return true;
  const RecordedSegment* nearest = nullptr;
  uint64_t best_distance = UINT64_MAX;
  auto consider = [&](std::map<uint64_t, RecordedSegment>::const_iterator it) {
    if (it == segments.end() || !it->second.expandable || it->second.stream != entry.stream) return;
    uint64_t end = it->first + it->second.size;
    uint64_t distance = it->first >= entry.addr ? it->first - entry.addr : entry.addr >= end ? entry.addr - end : 0;
    if (distance < best_distance) {
      best_distance = distance;
      nearest = &it->second;
    }
  };
  // The nearest expandable run of the stream on either side, skipping other streams' runs.
  auto after = segments.lower_bound(entry.addr);
  for (auto it = after; it != segments.end(); ++it) {
    if (it->second.expandable && it->second.stream == entry.stream) {
      consider(it);
      break;
    }
  }
  for (auto it = after; it != segments.begin();) {
    --it;
    if (it->second.expandable && it->second.stream == entry.stream) {
      consider(it);
      break;
    }
  }
  return nearest ? nearest->is_small : false;
}

uint64_t RecordedLayout::reserved() const {
  uint64_t total = 0;
  for (const auto& [address, segment] : segments) total += segment.size;
  return total;
}

}  // namespace oomcast::sim
