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
// DeepSpeed ZeRO with overlap_comm: the reduction stream of stages 1-2 (reduction_stream),
// which also makes the grad partition, and the all-gather stream of stage 3 (the parameter
// coordinator's __allgather_stream). Without overlap_comm both are the compute stream.
inline constexpr sim::StreamId kDeepSpeedReductionStream = 0xd5e1;
inline constexpr sim::StreamId kDeepSpeedAllgatherStream = 0xd5e2;
// DeepSpeed ZeRO-3 with overlap_comm: the optimizer's reduce_and_partition_stream, where the
// ipg bucket is filled and reduce-scattered (the plan allocates nothing there; the autograd
// grads it copies are record_stream'd on it).
inline constexpr sim::StreamId kDeepSpeedReduceAndPartitionStream = 0xd5e3;

}  // namespace oomcast::planner
