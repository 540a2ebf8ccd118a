// Tensors a forward's Python locals still name live until that forward returns, even past their
// last use: the families' embedding outputs (HF LlamaModel's inputs_embeds, GPT-NeoX's, nanoGPT's
// tok_emb and pos_emb) are freed by the frame's return, not after the op that last reads them.
#include <catch2/catch.hpp>

#include <string>

#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::JobKind;
using oomcast::scenario::Scenario;
using oomcast::scenario::resolve_model;
using oomcast::scenario::testing::cpu_scenario;

namespace {

// Index of the first event of `kind` on the slot named exactly `slot`; events.size() if none.
size_t event_on(const PlannedTrace& planned, oomcast::sim::EventKind kind, const std::string& slot) {
  const auto& events = planned.trace.events;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == kind && planned.trace.slot_names[events[i].slot] == slot) return i;
  }
  return events.size();
}

size_t alloc_of(const PlannedTrace& planned, const std::string& slot) {
  return event_on(planned, oomcast::sim::EventKind::Alloc, slot);
}
size_t free_of(const PlannedTrace& planned, const std::string& slot) {
  return event_on(planned, oomcast::sim::EventKind::Free, slot);
}

Scenario no_grad_inference(const std::string& preset) {
  Scenario s = cpu_scenario(preset, 2, 32);
  s.attention = AttentionImpl::Eager;
  s.job.job.kind = JobKind::Inference;
  s.job.job.batches = 2;
  s.job.job.compute_loss = false;
  s.job.job.held_outputs = {"logits"};
  return s;
}

}  // namespace

TEST_CASE("under no_grad the Llama embedding output lives until LlamaModel.forward returns after the final norm",
          "[planner][families]") {
  PlannedTrace planned = plan_steps(no_grad_inference("llama-tiny"));
  REQUIRE(testing::check_schedule(planned).ok);
  const size_t embedding_freed = free_of(planned, "i0/model.embed_tokens.out");
  REQUIRE(embedding_freed < planned.trace.events.size());
  // Its last reader is layer 0; the frame ends after model.norm and before lm_head runs.
  CHECK(embedding_freed > alloc_of(planned, "i0/model.layers.1.mlp_residual.out"));
  CHECK(embedding_freed > alloc_of(planned, "i0/model.norm.weight_mul.out"));
  CHECK(embedding_freed < alloc_of(planned, "i0/lm_head.out"));
}

TEST_CASE("nanoGPT's tok_emb and pos_emb live until GPT.forward returns after the loss", "[planner][families]") {
  Scenario s = cpu_scenario("gpt2-tiny", 2, 32);
  PlannedTrace planned = plan_steps(s);
  REQUIRE(testing::check_schedule(planned).ok);
  const size_t loss = alloc_of(planned, "i0.m0/cross_entropy.loss");
  REQUIRE(loss < planned.trace.events.size());
  for (const char* local : {"i0.m0/transformer.wte.out", "i0.m0/transformer.wpe.out"}) {
    INFO(local);
    const size_t freed = free_of(planned, local);
    CHECK(freed > loss);
    CHECK(freed < planned.trace.events.size());
  }
}

TEST_CASE("under no_grad the GPT-NeoX embedding output lives until the model's forward returns",
          "[planner][families]") {
  Scenario s = no_grad_inference("llama-tiny");
  s.model = resolve_model(std::string(OOMCAST_SOURCE_DIR) + "/validate/hf/gpt-neox-tiny/config.json", "");
  PlannedTrace planned = plan_steps(s);
  REQUIRE(testing::check_schedule(planned).ok);
  const size_t embedding_freed = free_of(planned, "i0/gpt_neox.embed_in.out");
  REQUIRE(embedding_freed < planned.trace.events.size());
  CHECK(embedding_freed > alloc_of(planned, "i0/gpt_neox.layers.1.residual.out"));
  CHECK(embedding_freed < alloc_of(planned, "i0/embed_out.out"));
}
