// Tests of the generation step-time model (generation_time.h): a small-batch decode step is
// bound by reading the weights once, a longer cache costs more per step, a torch.cat cache
// more than a static one, and a device without figures is not modelled.
#include <catch2/catch.hpp>

#include "planner/timing/generation_time.h"
#include "planner/timing/op_cost.h"
#include "planner/planner_test_support.h"
#include "planner/jobs/training_job.h"
#include "scenario/device_profiles.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::CapturedPhase;
using oomcast::scenario::CudaGraphConfig;
using oomcast::scenario::DeviceThroughput;
using oomcast::scenario::GenerateConfig;
using oomcast::scenario::JobKind;
using oomcast::scenario::KvCacheKind;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::device_config_from_profile;
using oomcast::scenario::find_device_profile;

namespace {

// Llama-2-7B in bf16 generating `new_tokens` after `prompt` tokens on an A100-80GB.
Scenario generate_7b(int64_t batch, int64_t prompt, KvCacheKind cache, int64_t new_tokens = 32) {
  Scenario s = oomcast::scenario::testing::cpu_scenario("llama-2-7b", batch, prompt, Precision::PureBf16, AttentionImpl::Flash);
  s.device = device_config_from_profile(*find_device_profile("a100-80gb"));
  s.iterations = 1;
  s.job.job.kind = JobKind::Generate;
  s.job.job.compute_loss = false;
  GenerateConfig& g = s.job.job.generate;
  g.prompt_len = prompt;
  g.new_tokens = new_tokens;
  g.cache = cache;
  g.max_cache_len = cache == KvCacheKind::Static ? prompt + new_tokens : 0;
  return s;
}

}  // namespace

TEST_CASE("A batch-1 decode step of Llama-2-7B in bf16 takes about its weights over the HBM bandwidth", "[planner][generate][step_time]") {
  PlannedTrace planned = plan_steps(generate_7b(1, 8, KvCacheKind::Static));
  const StepTime& t = planned.step_time;
  REQUIRE(t.modelled);
  REQUIRE(t.generation);
  CHECK(t.decode_steps == 31);
  CHECK(t.sequences == 1);
  // 6.74e9 parameters x 2 bytes, less the embedding table (a lookup reads one row), read once
  // per step at 80% of 2,039 GB/s: 8.1 ms. The small ops' launch floors add to it eagerly.
  const double weights = (static_cast<double>(planned.parameter_count) - 32000.0 * 4096.0) * 2.0;
  const double bound = weights / (2039e9 * kHbmFraction);
  CHECK(t.decode_seconds_per_step() >= bound);
  CHECK(t.decode_seconds_per_step() < 2.0 * bound);
  CHECK(t.decode_tokens_per_second() == Approx(1.0 / t.decode_seconds_per_step()));
  CHECK(t.step_seconds == Approx(t.prefill_seconds + t.decode_seconds));
  CHECK(t.tokens_per_step == Approx(32.0));
}

TEST_CASE("Decode steps cost more the longer the cache they read", "[planner][generate][step_time]") {
  const StepTime short_prompt = plan_steps(generate_7b(8, 128, KvCacheKind::Dynamic)).step_time;
  const StepTime long_prompt = plan_steps(generate_7b(8, 4096, KvCacheKind::Dynamic)).step_time;
  // 8 sequences x 4,096 positions x 32 layers x 2 (K, V) x 4,096 x 2 B = 16 GiB of cache read
  // per step, besides the 13.5 GB of weights.
  CHECK(long_prompt.decode_seconds_per_step() > 1.5 * short_prompt.decode_seconds_per_step());
  CHECK(long_prompt.prefill_seconds > 10.0 * short_prompt.prefill_seconds);
}

TEST_CASE("A torch.cat cache, which copies itself every step, decodes slower than a static one", "[planner][generate][step_time]") {
  const StepTime dynamic = plan_steps(generate_7b(8, 2048, KvCacheKind::Dynamic)).step_time;
  const StepTime fixed = plan_steps(generate_7b(8, 2048, KvCacheKind::Static)).step_time;
  CHECK(dynamic.decode_seconds_per_step() > fixed.decode_seconds_per_step());
}

TEST_CASE("A decode step replayed from a CUDA graph has no CPU launch floor", "[planner][generate][step_time]") {
  Scenario eager = generate_7b(1, 8, KvCacheKind::Static);
  Scenario graphs = eager;
  CudaGraphConfig decode;
  decode.name = "decode";
  decode.phase = CapturedPhase::Decode;
  decode.batch_sizes = {1};
  graphs.cuda_graphs.push_back(decode);
  CHECK(plan_steps(graphs).step_time.decode_seconds_per_step() < plan_steps(eager).step_time.decode_seconds_per_step());
}

TEST_CASE("Generation on a device without throughput figures is reported as not modelled", "[planner][generate][step_time]") {
  Scenario s = generate_7b(1, 8, KvCacheKind::Static, 4);
  s.device.throughput = DeviceThroughput{};
  const StepTime t = plan_steps(s).step_time;
  CHECK_FALSE(t.modelled);
  CHECK_FALSE(t.not_modelled.empty());
}
