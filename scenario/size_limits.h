// The limits every size of a scenario is checked against where it enters (scenario YAML,
// --set, model files, DeepSpeed JSON), and check_scenario_sizes(), which checks the sizes
// that only mean something together (one tensor's elements, attention scores). Each limit is
// far above any real job, so it only stops values that would overflow or exhaust the host.
#pragma once

#include <cstdint>

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

inline constexpr int64_t kMaxBatchSize = int64_t{1} << 24;
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 24;
inline constexpr int64_t kMaxImageSize = int64_t{1} << 16;
inline constexpr int64_t kMaxGradAccumSteps = int64_t{1} << 20;
inline constexpr int64_t kMaxIterations = 1000;
inline constexpr int64_t kMaxEvalBatches = int64_t{1} << 20;
inline constexpr int64_t kMaxLayers = 1024;                   // model.layers (Llama 3 405B has 126)
inline constexpr int64_t kMaxModelWidth = int64_t{1} << 24;   // hidden, ffn_hidden, vocab, heads, ...
inline constexpr int64_t kMaxTrainBatchSize = int64_t{1} << 44;
// One tensor of 2^44 elements is 64 TiB in fp32: no device holds it, and byte counts of
// many such tensors still fit in 64 bits.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 44;

// a * b, saturating at INT64_MAX (both non-negative).
int64_t saturating_product(int64_t a, int64_t b);

// Throws InputError naming the keys when a model dimension is beyond its limit, or when the
// batch, sequence and model sizes together make one tensor larger than kMaxTensorElements.
void check_scenario_sizes(const YamlNode& root, const Scenario& scenario);

}  // namespace oomcast::scenario
