// Tests of the steady-state window: a long job predicted from a window and extrapolated must
// give exactly what planning and replaying every iteration gives.
#include "advisor/steady_state.h"

#include <catch2/catch.hpp>

#include <string>

#include "advisor/predict.h"
#include "planner/jobs/training_job.h"
#include "scenario/scenario_loader.h"

namespace oomcast::advisor {

using planner::plan_steps;
using scenario::Scenario;
using scenario::load_scenario_text;

namespace {

Prediction every_iteration(const Scenario& scenario) { return predict_planned(scenario, plan_steps(scenario)); }

// `with_counters`: also memory_stats(), whose totals (inactive splits, ...) follow the exact layout.
void require_same_prediction(const Prediction& window, const Prediction& full, bool with_counters = true) {
  CHECK(window.fits == full.fits);
  CHECK(window.peak_allocated_bytes == full.peak_allocated_bytes);
  CHECK(window.peak_reserved_bytes == full.peak_reserved_bytes);
  CHECK(window.peak_at.event_index == full.peak_at.event_index);
  CHECK(window.breakdown == full.breakdown);
  CHECK(window.events == full.events);
  if (with_counters) CHECK(window.memory_stats == full.memory_stats);
  REQUIRE(window.phases.size() == full.phases.size());
  for (size_t i = 0; i < full.phases.size(); ++i) {
    INFO("phase row " << i << ": " << full.phases[i].name);
    CHECK(window.phases[i].name == full.phases[i].name);
    CHECK(window.phases[i].iteration == full.phases[i].iteration);
    CHECK(window.phases[i].allocated_bytes == full.phases[i].allocated_bytes);
    CHECK(window.phases[i].reserved_bytes == full.phases[i].reserved_bytes);
    CHECK(window.phases[i].peak_allocated_bytes == full.phases[i].peak_allocated_bytes);
    CHECK(window.phases[i].peak_reserved_bytes == full.phases[i].peak_reserved_bytes);
  }
}

TEST_CASE("A long job predicted from its steady state equals planning every iteration", "[hostile]") {
  const std::string yaml = GENERATE(
      std::string("model: gpt2-tiny\nbatch_size: 8\nseq_len: 128\nprecision: amp_bf16\niterations: 40\n"
                  "device: a100-80gb\n"),
      std::string("model: gpt2-tiny\nbatch_size: 2\nseq_len: 64\niterations: 40\nattention: sdpa_math\n"
                  "training_loop: {zero_grad_position: before_forward}\ndevice: cpu\n"),
      std::string("model: gpt2-tiny\nbatch_size: 2\nseq_len: 64\niterations: 40\n"
                  "allocator: {expandable_segments: true}\ndevice: a100-80gb\n"));
  Scenario scenario = load_scenario_text(yaml, "long.yaml");
  Prediction window = predict(scenario);
  REQUIRE(window.steady_state.extrapolated);
  CHECK(window.steady_state.exact);
  CHECK(window.steady_state.planned_iterations < scenario.iterations);
  require_same_prediction(window, every_iteration(scenario));
}

TEST_CASE("A long job with side streams and recorded frees predicted from its steady state equals planning every iteration",
          "[hostile]") {
  // Its record_stream'd blocks are all freed and their streams synchronised by the end of each
  // iteration, so the blocks are the allocator's whole state at the boundaries.
  const std::string parallel = GENERATE(
      std::string("parallel: {world_size: 4, deepspeed: {bf16: {enabled: true}, zero_optimization: {stage: 2, overlap_comm: true, "
                  "reduce_bucket_size: 100000}}}\n"),
      std::string("parallel: {world_size: 4, deepspeed: {bf16: {enabled: true}, zero_optimization: {stage: 3, overlap_comm: true, "
                  "offload_optimizer: {device: cpu}, stage3_param_persistence_threshold: 0}}}\n"),
      std::string("parallel: {world_size: 4, fsdp: {sharding_strategy: FULL_SHARD, auto_wrap: block}}\n"));
  Scenario scenario = load_scenario_text(
      "model: llama-tiny\nbatch_size: 2\nseq_len: 64\niterations: 40\ndevice: a100-80gb\n" + parallel,
      "streams.yaml");
  Prediction window = predict(scenario);
  REQUIRE(window.steady_state.extrapolated);
  CHECK(window.steady_state.planned_iterations < scenario.iterations);
  require_same_prediction(window, every_iteration(scenario), /*with_counters=*/window.steady_state.exact);
}

TEST_CASE("A job whose allocator layout never settles exactly is extrapolated only with a flag saying so",
          "[hostile]") {
  // Its schedule repeats and nothing accumulates, but blocks keep shifting within the small
  // pool's segments for the 32 planned iterations. Here the approximation still gives the
  // peaks and phase rows planning every iteration gives (not the layout-dependent counters).
  Scenario scenario = load_scenario_text(
      "model: llama-tiny\nbatch_size: 2\nseq_len: 64\niterations: 40\ngrad_accum_steps: 3\n"
      "eval: {batches: 2}\ncheckpointing: full\noptimizer: {type: adam, impl: single_tensor}\ndevice: a100-80gb\n",
      "drift.yaml");
  Prediction window = predict(scenario);
  REQUIRE(window.steady_state.extrapolated);
  CHECK_FALSE(window.steady_state.exact);
  require_same_prediction(window, every_iteration(scenario), /*with_counters=*/false);
}

TEST_CASE("A long job that does not fit keeps the OOM of the window and the demand of every iteration",
          "[hostile]") {
  Scenario scenario = load_scenario_text(
      "model: gpt2-tiny\nbatch_size: 64\nseq_len: 128\niterations: 40\n"
      "device: {total_gib: 0.05, context_mib: 0}\n",
      "oom.yaml");
  Prediction window = predict(scenario);
  Prediction full = every_iteration(scenario);
  REQUIRE_FALSE(full.fits);
  CHECK(window.oom_message == full.oom_message);
  CHECK(window.oom_at.event_index == full.oom_at.event_index);
  require_same_prediction(window, full);
}

TEST_CASE("A job that leaks every iteration has no steady state and is planned whole", "[hostile]") {
  Scenario scenario = load_scenario_text(
      "model: gpt2-tiny\nbatch_size: 2\nseq_len: 64\niterations: 40\n"
      "eval: {no_grad: false, accumulate_loss_without_item: true}\ndevice: a100-80gb\n",
      "leak.yaml");
  Prediction window = predict(scenario);
  CHECK_FALSE(window.steady_state.extrapolated);
  require_same_prediction(window, every_iteration(scenario));
}

TEST_CASE("A short job is planned whole, as before", "[hostile]") {
  Scenario scenario = load_scenario_text("model: gpt2-tiny\nbatch_size: 2\nseq_len: 64\niterations: 8\n", "s.yaml");
  CHECK_FALSE(predict(scenario).steady_state.extrapolated);
}

}  // namespace
}  // namespace oomcast::advisor
