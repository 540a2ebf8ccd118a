// Search and sweep speed: the largest batch size in 1..4096 that fits llama-2-7b (pure bf16,
// full checkpointing, H200; target < 1 s), the largest micro-batch of a global batch of 1024
// on the same job (`--keep-global-batch 1024`; target < 1 s) and a 1,000-combination sweep of
// GPT-2 small (target < 30 s on 2 cores). Best of three searches; one sweep. Prints one JSON line.
//   usage: search_bench [jobs=hardware threads]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "advisor/global_batch_search.h"
#include "advisor/search.h"
#include "advisor/sweep.h"

using namespace oomcast;

int main(int argc, char** argv) {
  size_t jobs = argc > 1 ? static_cast<size_t>(std::atoi(argv[1])) : advisor::default_jobs();
  const std::string scenarios = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/";

  advisor::SearchOptions search_options;
  search_options.max_value = 4096;
  search_options.jobs = jobs;
  double best_search = 1e18;
  advisor::SearchResult search;
  for (int round = 0; round < 3; ++round) {
    search = advisor::search_max_fitting(
        scenario::ScenarioSource::file(scenarios + "llama-2-7b-full-ckpt-bf16-h200.yaml"), search_options);
    best_search = std::min(best_search, search.seconds);
  }

  advisor::GlobalBatchOptions global_options;
  global_options.global_batch = 1024;
  global_options.jobs = jobs;
  double best_global = 1e18;
  advisor::GlobalBatchResult global;
  for (int round = 0; round < 3; ++round) {
    global = advisor::search_keep_global_batch(
        scenario::ScenarioSource::file(scenarios + "llama-2-7b-full-ckpt-bf16-h200.yaml"), global_options);
    best_global = std::min(best_global, global.seconds);
  }

  // 25 batch sizes x 5 sequence lengths x 2 precisions x 2 checkpointing x 2 allocator modes.
  auto axes = advisor::parse_grid(
      "batch_size=1..25 seq_len=64,128,256,512,1024 precision=amp_fp16,amp_bf16 checkpointing=none,full "
      "allocator.expandable_segments=false,true");
  advisor::SweepOptions sweep_options;
  sweep_options.jobs = jobs;
  advisor::SweepResult sweep =
      advisor::run_sweep(scenario::ScenarioSource::file(scenarios + "gpt2-small-b8-amp-bf16.yaml"), axes, sweep_options);

  std::printf(
      "{\"jobs\": %zu, \"search_model\": \"llama-2-7b\", \"search_range\": [1, 4096], \"search_max_fitting\": %lld, "
      "\"search_values_simulated\": %zu, \"search_seconds\": %.3f, \"search_target_seconds\": 1, "
      "\"keep_global_batch\": 1024, \"keep_global_batch_micro_batch\": %lld, \"keep_global_batch_accum_steps\": %lld, "
      "\"keep_global_batch_splits_simulated\": %zu, \"keep_global_batch_seconds\": %.3f, "
      "\"keep_global_batch_target_seconds\": 1, "
      "\"sweep_model\": \"gpt2\", \"sweep_combinations\": %zu, \"sweep_seconds\": %.2f, "
      "\"sweep_ms_per_combination_per_thread\": %.1f, \"sweep_target_seconds\": 30}\n",
      jobs, static_cast<long long>(search.max_fitting.value_or(0)), search.evaluated.size(), best_search,
      static_cast<long long>(global.best ? global.best->micro_batch : 0),
      static_cast<long long>(global.best ? global.best->accum_steps : 0), global.evaluated.size(), best_global,
      sweep.rows.size(), sweep.seconds, 1000.0 * sweep.seconds * static_cast<double>(sweep.jobs) / static_cast<double>(sweep.rows.size()));
  return 0;
}
