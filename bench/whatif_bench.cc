// What-if speed: the doctor on llama-2-70b under DeepSpeed ZeRO-3 (every candidate fix and
// the closed-form fit), as the scenario is and squeezed onto
// 9 GiB GPUs so that the recommendation (combinations, then GPU counts) runs too. Target
// under 2 s on 2 cores. Best of three each; prints one JSON line.
//   usage: whatif_bench [jobs=hardware threads]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "advisor/whatif.h"

using namespace oomcast;

namespace {

double best_of_three(const planner::ScenarioSource& source, size_t jobs, planner::Diagnosis* last) {
  planner::DiagnoseOptions options;
  options.jobs = jobs;
  double best = 1e18;
  for (int round = 0; round < 3; ++round) {
    *last = planner::diagnose(source, options);
    best = std::min(best, last->seconds);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t jobs = argc > 1 ? static_cast<size_t>(std::atoi(argv[1])) : planner::default_jobs();
  const std::string scenario = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/llama-2-70b-zero3-offload.yaml";
  planner::Diagnosis as_written;
  const double as_written_seconds = best_of_three(planner::ScenarioSource::file(scenario), jobs, &as_written);
  planner::Diagnosis squeezed;
  const double squeezed_seconds =
      best_of_three(planner::ScenarioSource::file(scenario, {"device.total_gib=9"}), jobs, &squeezed);
  std::printf(
      "{\"jobs\": %zu, \"model\": \"llama-2-70b\", \"engine\": \"deepspeed zero-3\", \"fixes\": %zu, "
      "\"whatif_seconds\": %.3f, \"squeezed_fits\": %s, \"squeezed_fixes\": %zu, \"squeezed_recommendation\": \"%s\", "
      "\"squeezed_whatif_seconds\": %.3f, \"target_seconds\": 2}\n",
      jobs, as_written.fixes.size(), as_written_seconds, squeezed.fits ? "true" : "false", squeezed.fixes.size(),
      squeezed.recommendation ? squeezed.recommendation->title.c_str() : "none", squeezed_seconds);
  return 0;
}
