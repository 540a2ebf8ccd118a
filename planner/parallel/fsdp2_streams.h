// The side streams FSDP2 (fully_shard) allocates on, as trace stream ids. Its FSDPCommContext
// owns an all-gather copy-in stream (the cast shards and the all-gather output), an all-gather
// stream (the in-place collective: no allocation) and a reduce-scatter stream (the
// reduce-scatter output and the sharded .grad). The caching allocator keeps one free list per
// stream, so these reserve memory of their own.
#pragma once

#include "planner/parallel/comm_streams.h"

namespace oomcast::planner {

inline constexpr sim::StreamId kFsdp2AllGatherCopyInStream = 0xf5e1;
inline constexpr sim::StreamId kFsdp2ReduceScatterStream = 0xf5e3;

}  // namespace oomcast::planner
