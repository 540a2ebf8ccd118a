// End-to-end planning speed: llama-2-70b (80 layers), 3 iterations: schedule generation
// (plan_steps), the allocator replay, and predict() as `oomcast plan` runs it. Best of
// five runs each, measured side by side in one process. Prints one JSON line.
//   usage: plan_bench [iterations=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "advisor/predict.h"
#include "scenario/scenario_loader.h"
#include "planner/jobs/training_job.h"
#include "sim/replay.h"

using namespace oomcast;

namespace {

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 3;
  // A device large enough that the whole schedule replays (no early stop at an OOM).
  std::string yaml = "model: llama-2-70b\nbatch_size: 1\nseq_len: 4096\nprecision: amp_bf16\n"
                     "iterations: " + std::to_string(iterations) +
                     "\ndevice: {total_gib: 4096, compute_capability: 9.0}\n";
  scenario::Scenario scenario = scenario::load_scenario_text(yaml, "plan_bench.yaml", {});
  double best_plan = 1e18, best_replay = 1e18, best_predict = 1e18;
  size_t events = 0;
  for (int round = 0; round < 5; ++round) {
    auto start = std::chrono::steady_clock::now();
    planner::PlannedTrace planned = planner::plan_steps(scenario);
    best_plan = std::min(best_plan, milliseconds_since(start));
    events = planned.trace.events.size();

    start = std::chrono::steady_clock::now();
    sim::ReplayResult result = sim::replay(planned.trace, scenario.allocator, scenario.device.model);
    best_replay = std::min(best_replay, milliseconds_since(start));
    if (result.oom) std::abort();

    start = std::chrono::steady_clock::now();
    advisor::Prediction prediction = advisor::predict(scenario);
    best_predict = std::min(best_predict, milliseconds_since(start));
    if (!prediction.fits) std::abort();
  }
  std::printf(
      "{\"model\": \"llama-2-70b\", \"iterations\": %d, \"events\": %zu, \"plan_ms\": %.1f, \"replay_ms\": %.1f, "
      "\"predict_ms\": %.1f, \"plan_plus_replay_events_per_second\": %.0f}\n",
      iterations, events, best_plan, best_replay, best_predict,
      static_cast<double>(events) / ((best_plan + best_replay) / 1000.0));
  return 0;
}
