// torch.optim.Muon with the AdamW beside it, and AnyPrecisionAdamW: which state each parameter
// gets and the step's temporaries (planner/optimizers.cc).
#include <catch2/catch.hpp>

#include "planner/jobs/training_job.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::OptimizerType;
using oomcast::scenario::Scenario;
using oomcast::scenario::testing::cpu_scenario;

namespace {

// Bytes of the first allocation of slot `name`, whatever the loop's "i0.m0/" prefix (0 when
// there is none).
uint64_t bytes_of(const PlannedTrace& planned, const std::string& name) {
  for (const oomcast::sim::Event& event : planned.trace.events) {
    if (event.kind != oomcast::sim::EventKind::Alloc) continue;
    const std::string& slot = planned.trace.slot_names[event.slot];
    const size_t slash = slot.find('/');
    if (slot == name || (slash != std::string::npos && slot.compare(slash + 1, std::string::npos, name) == 0)) return event.bytes;
  }
  return 0;
}

bool has_slot_ending(const PlannedTrace& planned, const std::string& tail) {
  for (const std::string& name : planned.trace.slot_names) {
    if (name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) return true;
  }
  return false;
}

Scenario muon_scenario() {
  Scenario s = cpu_scenario("llama-tiny", 2, 32);  // hidden 64, ffn 128, kv 2 x 16, vocab 256
  s.optimizer.type = OptimizerType::Muon;
  return s;
}

}  // namespace

TEST_CASE("Muon keeps one momentum buffer for each block matrix and AdamW moments for the rest",
          "[planner][optimizer]") {
  PlannedTrace planned = plan_steps(muon_scenario());
  // fp32: q_proj [64, 64] -> 16,384 B of momentum, no AdamW moments.
  CHECK(bytes_of(planned, "model.layers.0.self_attn.q_proj.weight.momentum_buffer") == 64 * 64 * 4);
  CHECK_FALSE(has_slot_ending(planned, "q_proj.weight.exp_avg"));
  // The embedding and the head (adamw_params) and the 1-D norms go to AdamW.
  CHECK(bytes_of(planned, "model.embed_tokens.weight.exp_avg") == 256 * 64 * 4);
  CHECK(bytes_of(planned, "lm_head.weight.exp_avg_sq") == 256 * 64 * 4);
  CHECK(bytes_of(planned, "model.layers.0.input_layernorm.weight.exp_avg") == 64 * 4);
  CHECK_FALSE(has_slot_ending(planned, "embed_tokens.weight.momentum_buffer"));
}

TEST_CASE("Muon's Newton-Schulz works on the short side of a matrix in bf16", "[planner][optimizer]") {
  PlannedTrace planned = plan_steps(muon_scenario());
  // gate_proj [128, 64]: transposed to [64, 128]; X X^T is [64, 64]; the fp32 gradient's bf16 copy.
  const std::string gate = "model.layers.0.mlp.gate_proj.weight";
  CHECK(bytes_of(planned, gate + ".muon_gram") == 64 * 64 * 2);
  CHECK(bytes_of(planned, gate + ".muon_orthogonalized") == 128 * 64 * 2);
  CHECK(bytes_of(planned, gate + ".muon_bf16") == 128 * 64 * 2);
  CHECK(bytes_of(planned, gate + ".muon_nesterov") == 128 * 64 * 4);
}

TEST_CASE("Muon without nesterov steps with the momentum buffer itself", "[planner][optimizer]") {
  Scenario s = muon_scenario();
  s.optimizer.nesterov = false;
  PlannedTrace planned = plan_steps(s);
  CHECK_FALSE(has_slot_ending(planned, ".muon_nesterov"));
  CHECK(has_slot_ending(planned, ".muon_gram"));
}

TEST_CASE("AnyPrecisionAdamW keeps bf16 moments and, with Kahan summation, a bf16 compensation buffer",
          "[planner][optimizer]") {
  Scenario s = cpu_scenario("llama-tiny", 2, 32);
  s.optimizer.type = OptimizerType::AnyPrecisionAdamW;
  s.optimizer.kahan_summation = true;
  PlannedTrace planned = plan_steps(s);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  CHECK(bytes_of(planned, q + ".exp_avg") == 64 * 64 * 2);
  CHECK(bytes_of(planned, q + ".exp_avg_sq") == 64 * 64 * 2);
  CHECK(bytes_of(planned, q + ".compensation") == 64 * 64 * 2);
  // temp_buffer = p.detach().clone(): the fp32 parameter's size.
  CHECK(bytes_of(planned, q + ".kahan_temp_buffer") == 64 * 64 * 4);
}

TEST_CASE("AnyPrecisionAdamW's dtypes follow its momentum and variance dtype arguments", "[planner][optimizer]") {
  Scenario s = cpu_scenario("llama-tiny", 2, 32);
  s.optimizer.type = OptimizerType::AnyPrecisionAdamW;
  s.optimizer.momentum_fp32 = true;
  PlannedTrace planned = plan_steps(s);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  CHECK(bytes_of(planned, q + ".exp_avg") == 64 * 64 * 4);
  CHECK(bytes_of(planned, q + ".exp_avg_sq") == 64 * 64 * 2);
  CHECK_FALSE(has_slot_ending(planned, ".compensation"));
}
