// Tests for Gemma 2's attention logit softcapping (scores / cap, tanh, * cap) as the llama
// family plans it: eager attention keeps tanh's result for backward, and a model with it runs
// eager attention where the scenario names an SDPA kernel (transformers' Gemma 2 has no SDPA).
#include <catch2/catch.hpp>

#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::OptimizerType;
using oomcast::scenario::Scenario;
using oomcast::planner::testing::check_schedule;
using oomcast::scenario::testing::inline_model;

namespace {

uint64_t saved_after_forward(bool softcap, AttentionImpl attention) {
  Scenario scenario;
  scenario.model = inline_model("llama",
                                {{"layers", 2}, {"hidden", 64}, {"heads", 4}, {"kv_heads", 2}, {"ffn_hidden", 128},
                                 {"vocab", 128}, {"max_positions", 64}},
                                {{"attn_logit_softcap", softcap ? "true" : "false"}});
  scenario.batch_size = 2;
  scenario.seq_len = 32;
  scenario.iterations = 1;
  scenario.attention = attention;
  scenario.optimizer.type = OptimizerType::Sgd;
  scenario.device.is_cpu = true;
  testing::ScheduleCheck check = check_schedule(plan_steps(scenario));
  REQUIRE(check.ok);
  return check.live_at_mark.at("iter0/backward");
}

}  // namespace

TEST_CASE("eager attention with a logit softcap saves one more score-sized tensor per layer", "[planner][attention]") {
  // tanh saves its result: 2 layers x batch 2 x 4 heads x 32 x 32 fp32 scores.
  CHECK(saved_after_forward(true, AttentionImpl::Eager) - saved_after_forward(false, AttentionImpl::Eager) ==
        2u * 2u * 4u * 32u * 32u * 4u);
}

TEST_CASE("a model with a logit softcap runs eager attention where SDPA was asked for, as transformers does",
          "[planner][attention]") {
  // modeling_gemma2.py: _supports_sdpa = False (SDPA takes no soft-capping).
  CHECK(saved_after_forward(true, AttentionImpl::SdpaMath) == saved_after_forward(true, AttentionImpl::Eager));
  CHECK(saved_after_forward(true, AttentionImpl::Flash) == saved_after_forward(true, AttentionImpl::Eager));
  CHECK(saved_after_forward(false, AttentionImpl::SdpaMath) != saved_after_forward(false, AttentionImpl::Eager));
}
