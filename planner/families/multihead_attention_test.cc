// Tests for nn.MultiheadAttention's plan per torch release: 1.13's hand-written bmm/softmax path,
// and 2.x's F.scaled_dot_product_attention, whose CPU kernel (flash without dropout, math with
// it) `attention: eager` stands for (validate/torch_releases.py compares both with real torch).
#include <catch2/catch.hpp>

#include <string>

#include "planner/families/families.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::OptimizerType;
using oomcast::scenario::Scenario;
using oomcast::scenario::testing::inline_model;

namespace {

Scenario encoder_job(int torch_version, double dropout, bool cpu = true) {
  Scenario scenario;
  scenario.model = inline_model("transformer_encoder",
                                {{"layers", 1}, {"hidden", 64}, {"heads", 4}, {"ffn_hidden", 128}, {"vocab", 128},
                                 {"max_positions", 32}, {"num_labels", 4}},
                                {{"batch_first", "true"}});
  scenario.batch_size = 2;
  scenario.seq_len = 32;
  scenario.iterations = 1;
  scenario.attention = AttentionImpl::Eager;
  scenario.dropout = dropout;
  scenario.optimizer.type = OptimizerType::Sgd;
  scenario.device.is_cpu = cpu;
  scenario.device.profile = cpu ? "cpu" : "h200";
  scenario.allocator.torch_version = torch_version;
  scenario.eval.enabled = true;
  return scenario;
}

// Whether a tensor named `<phase prefix>...<leaf>` is allocated in the plan ("i0.m0/" is the
// first training forward, "i0.e0/" the first evaluation batch).
bool plans_tensor(const PlannedTrace& planned, const std::string& prefix, const std::string& leaf) {
  for (const std::string& name : planned.trace.slot_names) {
    if (name.rfind(prefix, 0) == 0 && name.size() >= leaf.size() &&
        name.compare(name.size() - leaf.size(), leaf.size(), leaf) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("under torch 2.x on the CPU without dropout the encoder's attention is the flash kernel",
          "[planner][multihead_attention]") {
  PlannedTrace planned = plan_steps(encoder_job(206, 0.0));
  CHECK(plans_tensor(planned, "i0.m0/", "self_attn.attention.logsumexp"));
  CHECK_FALSE(plans_tensor(planned, "i0.m0/", "self_attn.attention.qk.out"));
  // the CPU kernel writes its output in the query's [s, b, heads, d] order: no permute copy
  CHECK_FALSE(plans_tensor(planned, "i0.m0/", "self_attn.attn_output_contiguous"));
}

TEST_CASE("under torch 2.x on the CPU with dropout training runs the math kernel and evaluation the flash one",
          "[planner][multihead_attention]") {
  PlannedTrace planned = plan_steps(encoder_job(206, 0.1));
  CHECK(plans_tensor(planned, "i0.m0/", "self_attn.attention.safe_softmax.out"));
  CHECK_FALSE(plans_tensor(planned, "i0.m0/", "self_attn.attention.logsumexp"));
  // q, k and v view `packed` as 3-D: matmul copies none of them
  CHECK_FALSE(plans_tensor(planned, "i0.m0/", "self_attn.attention.qk.a_contiguous"));
  CHECK_FALSE(plans_tensor(planned, "i0.m0/", "self_attn.attention.av.b_contiguous"));
  CHECK(plans_tensor(planned, "i0.e0/", "self_attn.attention.logsumexp"));
}

TEST_CASE("under torch 1.13 the encoder's attention is the hand-written bmm and softmax whatever the dropout",
          "[planner][multihead_attention]") {
  for (double dropout : {0.0, 0.1}) {
    PlannedTrace planned = plan_steps(encoder_job(113, dropout));
    CHECK(plans_tensor(planned, "i0.m0/", "self_attn.qk.out"));
    CHECK_FALSE(plans_tensor(planned, "i0.m0/", "logsumexp"));
  }
}

TEST_CASE("on a GPU torch 2.x's eager attention stays the materialized-scores plan (the CUDA choice is not modelled)",
          "[planner][multihead_attention]") {
  PlannedTrace planned = plan_steps(encoder_job(206, 0.0, /*cpu=*/false));
  CHECK_FALSE(plans_tensor(planned, "i0.m0/", "logsumexp"));
}
