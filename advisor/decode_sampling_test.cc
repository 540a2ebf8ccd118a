// Tests of a long generation planned on a sample of its decode steps (planner/jobs/
// decode_steps.h): at a size where every step can also be planned, the sampled plan's peaks
// are compared with the fully simulated ones on the caching allocator.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "advisor/decode_sampling.h"
#include "advisor/predict.h"
#include "planner/jobs/generate_job.h"
#include "scenario/scenario_loader.h"

namespace oomcast::advisor {

using scenario::Scenario;
using scenario::load_scenario_text;

namespace {

// Llama-2-7B's layer shape, 2 layers, bf16 weights, 8 sequences after a 128-token prompt on
// an A100-80GB: 1,024 new tokens are 1,023 decode steps, small enough to plan every one, and
// the cache they grow sets the peak (not the prefill).
const char* kLongGeneration = R"(
model: llama-2-7b
batch_size: 8
seq_len: 128
precision: fp32
attention: flash
weights: bf16
job: {kind: generate, new_tokens: 1024, cache: dynamic}
device: a100-80gb
)";

// The sampled plan's budget of decode steps: 256 of the 1,023 keeps the planner's dense ends
// of 64 steps (kDenseDecodeSteps) with one step in 7 between. The dense tail matters: with
// ends of 24 steps (a budget of 96) the torch.cat cache's reserved peak came out 6.2% low
// (7.36 GB against 7.84 GB), as its fragmentation builds up over the last few dozen steps.
constexpr int64_t kSampledBudget = 256;

struct FullAndSampled {
  Prediction full;
  Prediction sampled;
};

FullAndSampled plan_both(std::vector<std::string> sets) {
  sets.push_back("model.layers=2");
  const Scenario s = load_scenario_text(kLongGeneration, "long-generation.yaml", sets);
  const planner::PlannedTrace full = planner::plan_generate_job(s, 1 << 20);
  const planner::PlannedTrace sampled = planner::plan_generate_job(s, kSampledBudget);
  FullAndSampled both{predict_planned(s, full), predict_planned(s, sampled)};
  REQUIRE_FALSE(decode_sampling_of(both.full).sampled());
  const DecodeSampling sampling = decode_sampling_of(both.sampled);
  REQUIRE(sampling.sampled());
  REQUIRE(sampling.planned <= kSampledBudget);
  REQUIRE(sampling.total == 1023);
  return both;
}

double relative_difference(uint64_t sampled, uint64_t full) {
  return std::abs(static_cast<double>(sampled) - static_cast<double>(full)) / static_cast<double>(full);
}

}  // namespace

TEST_CASE("a sampled torch.cat-cache generation peaks at the same allocated bytes as every step simulated, and "
          "reserves within 1% of it",
          "[advisor][generate]") {
  const FullAndSampled both = plan_both({});
  INFO("full reserved " << both.full.peak_reserved_bytes << ", sampled " << both.sampled.peak_reserved_bytes);
  CHECK(both.sampled.peak_allocated_bytes == both.full.peak_allocated_bytes);
  CHECK(relative_difference(both.sampled.peak_reserved_bytes, both.full.peak_reserved_bytes) < 0.01);
  CHECK(both.sampled.peak_at.phase == both.full.peak_at.phase);
  CHECK(both.full.peak_at.phase.ends_with("/decode"));
}

TEST_CASE("a sampled static-cache generation peaks exactly as every step simulated", "[advisor][generate]") {
  const FullAndSampled both = plan_both({"job.cache=static"});
  CHECK(both.sampled.peak_allocated_bytes == both.full.peak_allocated_bytes);
  CHECK(both.sampled.peak_reserved_bytes == both.full.peak_reserved_bytes);
}

TEST_CASE("a sampled beam-search generation reserves within 1% of every step simulated", "[advisor][generate]") {
  const FullAndSampled both = plan_both({"job.num_beams=2", "batch_size=4"});
  INFO("full reserved " << both.full.peak_reserved_bytes << ", sampled " << both.sampled.peak_reserved_bytes);
  CHECK(both.sampled.peak_allocated_bytes == both.full.peak_allocated_bytes);
  CHECK(relative_difference(both.sampled.peak_reserved_bytes, both.full.peak_reserved_bytes) < 0.01);
}

}  // namespace oomcast::advisor
