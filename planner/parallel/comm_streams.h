// The side streams data-parallel engines run their collectives on, as trace stream ids.
// Blocks allocated on one of them are reused only by requests on it (the caching allocator
// keeps one free list per stream), so overlapping collectives reserve memory of their own.
#pragma once

#include "sim/trace.h"

namespace oomcast::planner {

inline constexpr sim::StreamId kComputeStream = 0;
// FSDP1's _unshard_stream: the all-gathers (and the low-precision shard cast before them).
inline constexpr sim::StreamId kFsdpUnshardStream = 0xf5d1;
// FSDP1's _post_backward_stream: the gradient casts and reduce-scatters.
inline constexpr sim::StreamId kFsdpPostBackwardStream = 0xf5d2;

}  // namespace oomcast::planner
