// Tests of the what-if doctor's model-parallel fixes (whatif_fixes.cc): raising TP, adding
// pipeline stages and more microbatches are compared at the scenario's own global batch, so
// their memory and step time are those of the same training run.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "advisor/whatif.h"
#include "planner/parallel/mesh_rank.h"
#include "scenario/scenario_source.h"

namespace oomcast::advisor {

using scenario::ScenarioSource;

namespace {

const std::string kTinyTensorParallel =
    std::string(OOMCAST_SOURCE_DIR) + "/validate/scenarios_parallel/llama-tiny-tp2-adamw.yaml";

// Every mesh fix the doctor offers for the tiny Llama under `overrides`, with the global batch
// of the scenario it describes.
std::vector<std::pair<std::string, int64_t>> mesh_fix_batches(const std::vector<std::string>& overrides) {
  DiagnoseOptions options;
  options.jobs = 2;
  options.with_fit = false;
  const Diagnosis diagnosis = diagnose(ScenarioSource::file(kTinyTensorParallel, overrides), options);
  std::vector<std::pair<std::string, int64_t>> out;
  for (const FixOutcome& fix : diagnosis.fixes) {
    if (fix.id != "raise_tensor_parallel" && fix.id != "add_pipeline_stages" && fix.id != "more_microbatches") continue;
    INFO(fix.id << ": " << fix.error);
    CHECK(fix.valid);
    std::vector<std::string> changed = overrides;
    changed.insert(changed.end(), fix.overrides.begin(), fix.overrides.end());
    out.emplace_back(fix.id, planner::global_batch_samples(ScenarioSource::file(kTinyTensorParallel, changed).load()));
  }
  return out;
}

}  // namespace

TEST_CASE("Mesh fixes of a pipelined job keep its global batch") {
  const std::vector<std::string> overrides = {"parallel.world_size=8", "parallel.engine=ddp", "parallel.pipeline_parallel=2",
                                              "parallel.pipeline_microbatches=4", "model.layers=4",
                                              "model.kv_heads=4"};  // TP 4 needs kv_heads divisible by 4
  const int64_t before = planner::global_batch_samples(ScenarioSource::file(kTinyTensorParallel, overrides).load());
  CHECK(before == 2 * 4 * 2);  // batch 2 x 4 microbatches x 2 data-parallel replicas
  const auto fixes = mesh_fix_batches(overrides);
  CHECK(fixes.size() == 3);
  for (const auto& [id, batch] : fixes) {
    INFO(id);
    CHECK(batch == before);
  }
}

TEST_CASE("Mesh fixes of a job without a pipeline keep its global batch, accumulation included") {
  const std::vector<std::string> overrides = {"parallel.world_size=8", "parallel.engine=ddp", "grad_accum_steps=2",
                                              "model.layers=4", "model.kv_heads=4"};
  const int64_t before = planner::global_batch_samples(ScenarioSource::file(kTinyTensorParallel, overrides).load());
  CHECK(before == 2 * 2 * 4);  // batch 2 x 2 accumulation steps x 4 data-parallel replicas
  const auto fixes = mesh_fix_batches(overrides);
  CHECK(fixes.size() == 2);  // raise TP, add stages (no pipeline: no microbatch split)
  for (const auto& [id, batch] : fixes) {
    INFO(id);
    CHECK(batch == before);
  }
}

}  // namespace oomcast::advisor
