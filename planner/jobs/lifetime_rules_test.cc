// Lifetime rules of the loops around the model, each from a reproducer of issue 26 measured
// on the CPU (torch 2.13): a view held by a KV cache keeps its whole base, a graph the caller
// holds keeps the inputs it saved, and a loss computed by the caller frees last step's outputs
// before it runs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <string>

#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::planner::testing::check_schedule;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::JobKind;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::testing::cpu_scenario;
using oomcast::scenario::testing::inline_model;

namespace {

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Index of the first event from `from` on matching `kind` whose slot name satisfies `match`;
// -1 if none.
int64_t first_event(const PlannedTrace& planned, oomcast::sim::EventKind kind,
                    const std::function<bool(const std::string&)>& match, int64_t from = 0) {
  const auto& events = planned.trace.events;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(from, 0)); i < events.size(); ++i) {
    if (events[i].kind == kind && match(planned.trace.slot_names[events[i].slot])) return static_cast<int64_t>(i);
  }
  return -1;
}

int64_t mark_index(const PlannedTrace& planned, const std::string& label) {
  const auto& events = planned.trace.events;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == oomcast::sim::EventKind::Mark && planned.trace.strings[events[i].tag] == label) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

// The reproducer: GPT-2 with its fused c_attn, generate 2 tokens after a 10-token prompt.
Scenario gpt2_generate() {
  Scenario s = cpu_scenario("gpt2-tiny", 2, 10, Precision::Fp32, AttentionImpl::Eager);
  s.model = inline_model("gpt2", {{"layers", 1}, {"hidden", 64}, {"heads", 4}, {"vocab", 128}, {"max_positions", 32}});
  s.job.job.kind = JobKind::Generate;
  s.job.job.compute_loss = false;
  s.job.job.generate.prompt_len = 10;
  s.job.job.generate.new_tokens = 2;
  return s;
}

}  // namespace

TEST_CASE("a KV cache holding views of the fused c_attn output keeps all of it until the first decode step",
          "[planner][generate][lifetime]") {
  PlannedTrace planned = plan_steps(gpt2_generate());
  REQUIRE(check_schedule(planned).ok);
  auto prefill_c_attn = [](const std::string& name) { return starts_with(name, "i0/") && ends_with(name, "c_attn.out"); };
  const int64_t allocated = first_event(planned, oomcast::sim::EventKind::Alloc, prefill_c_attn);
  const int64_t freed = first_event(planned, oomcast::sim::EventKind::Free, prefill_c_attn);
  REQUIRE(allocated >= 0);
  // [2, 10, 192] fp32: q, k and v together; the cache's k and v are views of it.
  CHECK(planned.trace.events[static_cast<size_t>(allocated)].bytes == 2 * 10 * 192 * 4);
  CHECK(freed > mark_index(planned, "iter1/decode"));
}

TEST_CASE("a forward loop holding its outputs under grad mode frees the last input after the next output exists",
          "[planner][forward][lifetime]") {
  Scenario s = cpu_scenario("mlp", 4, 0);
  s.model = inline_model("mlp", {{"layers", 1}, {"input", 64}, {"hidden", 64}, {"output", 64}});
  s.job.job.kind = JobKind::Forward;
  s.job.job.batches = 3;
  s.job.job.held_outputs = {"logits"};
  s.job.job.compute_loss = false;
  PlannedTrace planned = plan_steps(s);
  REQUIRE(check_schedule(planned).ok);
  // The linear saved its input for the weight gradient; the held output's graph keeps it.
  const int64_t old_input_freed = first_event(planned, oomcast::sim::EventKind::Free,
                                              [](const std::string& name) { return starts_with(name, "i0/") &&
                                                                                   name.find("input") != std::string::npos; });
  const int64_t new_output = first_event(planned, oomcast::sim::EventKind::Alloc, [](const std::string& name) {
    return starts_with(name, "i1/") && name.find("inputs") == std::string::npos && name.find("targets") == std::string::npos;
  });
  REQUIRE(old_input_freed >= 0);
  REQUIRE(new_output >= 0);
  CHECK(old_input_freed > new_output);
}

TEST_CASE("a loss computed by the caller frees last step's held logits before it runs, the model's loss after",
          "[planner][training][lifetime]") {
  auto plan = [](bool loss_outside_model) {
    Scenario s = cpu_scenario("mlp", 4, 0);
    s.model = inline_model("mlp", {{"layers", 1}, {"input", 64}, {"hidden", 64}, {"output", 64}});
    s.loop.caller_held_outputs = {"logits", "loss"};
    s.loop.loss_outside_model = loss_outside_model;
    return plan_steps(s);
  };
  // The first of last step's slots (other than its batch) freed in the next forward is its held logits.
  auto logits_freed_before_loss = [](const PlannedTrace& planned) {
    const int64_t next_forward = mark_index(planned, "iter1/forward");
    REQUIRE(next_forward >= 0);
    const int64_t freed = first_event(
        planned, oomcast::sim::EventKind::Free,
        [](const std::string& name) {
          return starts_with(name, "i0.m0/") && name.find("inputs") == std::string::npos &&
                 name.find("targets") == std::string::npos;
        },
        next_forward);
    const int64_t loss_starts = first_event(planned, oomcast::sim::EventKind::Alloc, [](const std::string& name) {
      return starts_with(name, "i1.m0/") && name.find("cross_entropy") != std::string::npos;
    });
    REQUIRE(freed >= 0);
    REQUIRE(loss_starts >= 0);
    return freed < loss_starts;
  };
  PlannedTrace outside = plan(true);
  PlannedTrace inside = plan(false);
  REQUIRE(check_schedule(outside).ok);
  REQUIRE(check_schedule(inside).ok);
  CHECK(logits_freed_before_loss(outside));
  CHECK_FALSE(logits_freed_before_loss(inside));
}
