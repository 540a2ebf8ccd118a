// ExpandableSegment: a reserve-then-map segment (expandable_segments:True). A large virtual
// range, of which pages (2 MiB small pool, 20 MiB large pool) are mapped on demand. Its
// blocks, mapped or not, form one linked list in address order (spec §4).
#pragma once

#include <cstdint>

namespace oomcast::sim {

class BlockPool;

struct ExpandableSegment {
  uint64_t base = 0;            // start of the reserved virtual range
  uint64_t reserved_size = 0;   // virtual bytes reserved (about 1.125 x device memory)
  uint64_t page_size = 0;
  uint64_t stream = 0;
  BlockPool* pool = nullptr;
  uint64_t mapped_bytes = 0;
};

}  // namespace oomcast::sim
