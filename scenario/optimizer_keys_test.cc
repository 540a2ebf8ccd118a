// Tests of the optimizer keys of Muon and AnyPrecisionAdamW.
#include <catch2/catch.hpp>

#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;

const std::string kBase = "model: gpt2-tiny\nbatch_size: 2\nseq_len: 32\n";

Scenario load(const std::string& extra) { return load_scenario_text(kBase + extra, "s.yaml", {}); }

std::string load_error(const std::string& extra) {
  return error_of([&] { load(extra); });
}

TEST_CASE("optimizer muon reads torch.optim.Muon's arguments and the parameters left to AdamW", "[scenario][optimizer]") {
  Scenario s = load("optimizer: {type: muon, nesterov: false, ns_steps: 3, adamw_params: [wte, lm_head]}\n");
  CHECK(s.optimizer.type == OptimizerType::Muon);
  CHECK_FALSE(s.optimizer.nesterov);
  CHECK(s.optimizer.ns_steps == 3);
  CHECK(s.optimizer.adamw_params == std::vector<std::string>{"wte", "lm_head"});
}

TEST_CASE("Muon's keys on another optimizer are an error naming the key", "[scenario][optimizer]") {
  CHECK(load_error("optimizer: {type: adamw, ns_steps: 5}\n").find("'optimizer.ns_steps' applies only to muon") !=
        std::string::npos);
}

TEST_CASE("Muon has no fused implementation", "[scenario][optimizer]") {
  CHECK(load_error("optimizer: {type: muon, impl: fused}\n").find("no fused implementation") != std::string::npos);
}

TEST_CASE("optimizer anyprecision_adamw reads the dtypes and Kahan summation", "[scenario][optimizer]") {
  Scenario s = load("optimizer: {type: anyprecision_adamw, use_kahan_summation: true, momentum_dtype: fp32}\n");
  CHECK(s.optimizer.type == OptimizerType::AnyPrecisionAdamW);
  CHECK(s.optimizer.kahan_summation);
  CHECK(s.optimizer.momentum_fp32);
  CHECK_FALSE(s.optimizer.variance_fp32);
  CHECK(s.optimizer.impl == OptimizerImpl::SingleTensor);
}

TEST_CASE("AnyPrecisionAdamW loops over its parameters: foreach is an error", "[scenario][optimizer]") {
  CHECK(load_error("optimizer: {type: anyprecision_adamw, impl: foreach}\n").find("single_tensor") != std::string::npos);
}

}  // namespace
}  // namespace oomcast::scenario
