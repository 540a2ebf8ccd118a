// Tests of the doctor's step-time pricing: every fix carries its step time before and after,
// and the recommendation is the fitting fix (or combination, or GPU count) with the least
// step time.
#include <catch2/catch.hpp>

#include "advisor/whatif.h"
#include "scenario/scenario_source.h"

namespace oomcast::advisor {

using scenario::ScenarioSource;

namespace {

const std::string kScenarios = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/";
const std::string kGpt2Small = kScenarios + "gpt2-small-b8-amp-bf16.yaml";
const std::string kZero3 = kScenarios + "llama-2-7b-zero3-8xa100.yaml";

Diagnosis doctor(const std::string& path, std::vector<std::string> overrides = {}) {
  DiagnoseOptions options;
  options.jobs = 2;
  options.with_fit = false;
  return diagnose(ScenarioSource::file(path, std::move(overrides)), options);
}

const FixOutcome* find_fix(const Diagnosis& d, const std::string& id) {
  for (const auto& fix : d.fixes) {
    if (fix.id == id) return &fix;
  }
  return nullptr;
}

TEST_CASE("Every fix carries the step time before and after it") {
  Diagnosis d = doctor(kGpt2Small, {"device.total_gib=6"});
  REQUIRE(d.step_seconds > 0.0);
  for (const FixOutcome& fix : d.fixes) {
    if (!fix.valid) continue;
    CHECK(fix.step_seconds_before == d.step_seconds);
    CHECK(fix.step_seconds_after > 0.0);
  }
}

TEST_CASE("Checkpointing costs step time and an allocator setting does not") {
  Diagnosis d = doctor(kGpt2Small, {"device.total_gib=6"});
  const FixOutcome* checkpointing = find_fix(d, "checkpointing");
  const FixOutcome* expandable = find_fix(d, "expandable_segments");
  REQUIRE(checkpointing != nullptr);
  REQUIRE(expandable != nullptr);
  CHECK(checkpointing->step_seconds_after > 1.1 * checkpointing->step_seconds_before);
  CHECK(expandable->step_seconds_after == expandable->step_seconds_before);
}

TEST_CASE("The recommendation fits and no fitting single fix is faster") {
  Diagnosis d = doctor(kGpt2Small, {"device.total_gib=6"});
  REQUIRE_FALSE(d.fits);
  REQUIRE(d.recommendation);
  CHECK(d.recommendation->fits);
  CHECK(d.recommendation->peak_reserved_bytes_after <= d.usable_bytes);
  for (const FixOutcome& fix : d.fixes) {
    if (fix.valid && fix.fits_after) CHECK(d.recommendation->step_seconds_after <= fix.step_seconds_after * 1.01);
  }
}

TEST_CASE("A job that already fits gets no recommendation") {
  Diagnosis d = doctor(kGpt2Small);
  REQUIRE(d.fits);
  CHECK_FALSE(d.recommendation);
}

TEST_CASE("A combination is recommended when no single fix fits") {
  Diagnosis d = doctor(kZero3, {"device.total_gib=14"});
  bool single_fits = false;
  for (const FixOutcome& fix : d.fixes) single_fits = single_fits || (fix.valid && fix.fits_after);
  REQUIRE_FALSE(single_fits);
  REQUIRE(d.recommendation);
  CHECK(d.recommendation->fits);
  CHECK(d.recommendation->fix_ids.size() >= 2);
  CHECK(d.recommendation->fix_ids.size() <= 3);
}

TEST_CASE("When nothing fits on the job's GPUs, more GPUs of the same sharding are suggested") {
  // 7 GiB GPUs, one sequence per rank: no fix or combination fits on 8 ranks. The collectives
  // stay on the compute stream: with overlap_comm's all-gather stream, whose blocks the
  // activations cannot reuse, the step stays above 7 GiB reserved even on 256 ranks.
  Diagnosis d = doctor(kZero3, {"device.total_gib=7", "batch_size=1", "parallel.deepspeed.zero_optimization.overlap_comm=false"});
  REQUIRE_FALSE(d.fits);
  REQUIRE(d.recommendation);
  CHECK(d.recommendation->world_size > 8);
  CHECK(d.recommendation->fix_ids.empty());
  CHECK(d.recommendation->fits);
}

TEST_CASE("The whatif JSON carries the step-time fields of every fix") {
  Diagnosis d = doctor(kGpt2Small, {"device.total_gib=6"});
  std::string json = render_whatif_json(d);
  for (const char* key : {"\"peak_reserved_bytes_after\"", "\"step_seconds_before\"", "\"step_seconds_after\"",
                          "\"fits\"", "\"recommendation\""}) {
    CHECK(json.find(key) != std::string::npos);
  }
}

}  // namespace
}  // namespace oomcast::advisor
