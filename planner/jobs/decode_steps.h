// Which decode steps of a long generation are planned. Every decode step runs the same graph
// on one new token per sequence; only the cache's length differs from one step to the next.
// So a generation of tens of thousands of tokens is planned on a sample of its steps: the
// first and the last ones densely (the prefill's hand-over and the largest cache, where the
// peak is), every k-th between them with the cache grown by the steps left out. Plan size and
// time stay bounded whatever job.new_tokens is; the simulated-versus-sampled comparison is a
// test (advisor/decode_sampling_test.cc).
#pragma once

#include <cstdint>
#include <vector>

namespace oomcast::planner {

// Decode steps planned one after another at the start and at the end of a sampled generation.
inline constexpr int64_t kDenseDecodeSteps = 64;
// Decode steps planned at most (dense head + sample + dense tail) unless a caller asks otherwise.
inline constexpr int64_t kMaxPlannedDecodeSteps = 512;

// The steps to plan, ascending: 0 (the prefill) and the decode steps 1 .. new_tokens - 1, all
// of them when there are at most `max_planned` decode steps, else the first and last
// kDenseDecodeSteps (fewer when max_planned is small) and an evenly strided sample between.
// `max_planned` below 2 counts as 2 (the first and the last decode step).
std::vector<int64_t> planned_generation_steps(int64_t new_tokens, int64_t max_planned);

}  // namespace oomcast::planner
