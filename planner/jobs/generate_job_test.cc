// Tests of the generation job: the KV cache grows by one token per decode step (torch.cat
// cache) or not at all (static cache), the prefill's full logits outweigh the decode steps.
#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/jobs/decode_steps.h"
#include "planner/jobs/generate_job.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::GenerateConfig;
using oomcast::scenario::JobKind;
using oomcast::scenario::KvCacheKind;
using oomcast::scenario::Scenario;
using oomcast::planner::testing::check_schedule;
using oomcast::scenario::testing::cpu_scenario;

namespace {

Scenario generate_scenario(KvCacheKind cache) {
  // llama-tiny: 2 layers, hidden 64, 4 heads of 16, 2 kv heads, vocab 256; batch 2, fp32.
  Scenario s = cpu_scenario("llama-tiny", 2, 16);
  s.job.job.kind = JobKind::Generate;
  s.job.job.compute_loss = false;
  GenerateConfig& g = s.job.job.generate;
  g.prompt_len = 16;
  g.new_tokens = 6;
  g.cache = cache;
  g.max_cache_len = 22;
  return s;
}

// How many allocations of the plan are of the tensor named `tensor`.
int allocations_of(const PlannedTrace& plan, const std::string& tensor) {
  int count = 0;
  for (size_t i = 0; i < plan.trace.events.size(); ++i) {
    if (plan.trace.events[i].kind == oomcast::sim::EventKind::Alloc && plan.names[plan.info[i].tensor] == tensor) ++count;
  }
  return count;
}

uint64_t live_at(const testing::ScheduleCheck& check, const std::string& mark) {
  auto found = check.live_at_mark.find(mark);
  REQUIRE(found != check.live_at_mark.end());
  return found->second;
}

}  // namespace

TEST_CASE("a torch.cat cache grows by one token of K and V per layer every decode step", "[planner][generate]") {
  testing::ScheduleCheck check = check_schedule(plan_steps(generate_scenario(KvCacheKind::Dynamic)));
  REQUIRE(check.ok);
  // Per token: K and V of 2 sequences x 2 kv heads x 16 dims x 4 B = 256 B each, in 2 layers
  // = 1,024 B; input_ids grows by 2 x 8 B.
  for (int step = 2; step < 6; ++step) {
    INFO("step " << step);
    CHECK(live_at(check, "iter" + std::to_string(step) + "/decode") -
              live_at(check, "iter" + std::to_string(step - 1) + "/decode") ==
          1024 + 16);
  }
}

TEST_CASE("a static cache is allocated once and only input_ids grows over the decode steps", "[planner][generate]") {
  testing::ScheduleCheck check = check_schedule(plan_steps(generate_scenario(KvCacheKind::Static)));
  REQUIRE(check.ok);
  for (int step = 2; step < 6; ++step) {
    CHECK(live_at(check, "iter" + std::to_string(step) + "/decode") -
              live_at(check, "iter" + std::to_string(step - 1) + "/decode") ==
          16);
  }
  // 22 positions x 1,024 B of cache exist before the prompt is loaded.
  CHECK(live_at(check, "iter1/decode") > 22 * 1024);
}

TEST_CASE("the prefill's logits cover every prompt position, or only the last with logits_to_keep",
          "[planner][generate]") {
  Scenario full = generate_scenario(KvCacheKind::Dynamic);
  full.job.job.generate.prefill_full_logits = true;
  Scenario last = full;
  last.job.job.generate.prefill_full_logits = false;
  auto prefill_logits_bytes = [](const PlannedTrace& planned) {
    for (const oomcast::sim::Event& event : planned.trace.events) {
      if (event.kind == oomcast::sim::EventKind::Alloc && planned.trace.slot_names[event.slot] == "i0/lm_head.out") {
        return event.bytes;
      }
    }
    return uint64_t{0};
  };
  // [2, 16, 256] fp32 = 32 KiB; the last position: [2, 1, 256] = 2 KiB.
  CHECK(prefill_logits_bytes(plan_steps(full)) == 2 * 16 * 256 * 4);
  CHECK(prefill_logits_bytes(plan_steps(last)) == 2 * 1 * 256 * 4);
}

TEST_CASE("a generation of a million new tokens plans a bounded sample of its decode steps, ending on the last",
          "[planner][generate][hostile]") {
  Scenario s = generate_scenario(KvCacheKind::Dynamic);
  s.job.job.generate.new_tokens = 1 << 20;
  s.job.job.generate.max_cache_len = 0;
  const PlannedTrace planned = plan_steps(s);
  // Each planned decode step is a phase iter{t}/decode; the last step, t = new_tokens - 1, is one.
  size_t decode_phases = 0;
  bool last_planned = false;
  for (const std::string& name : planned.names) {
    if (name.ends_with("/decode")) ++decode_phases;
    if (name == "iter" + std::to_string((1 << 20) - 1) + "/decode") last_planned = true;
  }
  CHECK(decode_phases <= static_cast<size_t>(kMaxPlannedDecodeSteps));
  CHECK(decode_phases >= static_cast<size_t>(kMaxPlannedDecodeSteps) - 8);
  CHECK(last_planned);
  // The last step's cache holds the prompt and every token before it, planned or skipped:
  // input_ids after it covers prompt + new_tokens positions (2 sequences x 8 B each).
  uint64_t largest_input_ids = 0;
  for (const oomcast::sim::Event& event : planned.trace.events) {
    if (event.kind == oomcast::sim::EventKind::Alloc && planned.trace.slot_names[event.slot].ends_with("/input_ids")) {
      largest_input_ids = std::max(largest_input_ids, event.bytes);
    }
  }
  CHECK(largest_input_ids == uint64_t{2} * 8 * (16 + (1 << 20)));
}

TEST_CASE("a generation whose planned steps exceed the work limit is refused naming job.new_tokens, before it is planned",
          "[planner][generate][hostile]") {
  Scenario s = generate_scenario(KvCacheKind::Dynamic);
  s.job.job.generate.new_tokens = 1 << 20;
  s.job.job.generate.max_cache_len = 0;
  const std::string error = oomcast::scenario::testing::error_of([&] { plan_generate_job(s, 1 << 20); });
  CHECK_THAT(error, Catch::Contains("job.new_tokens"));
  CHECK_THAT(error, Catch::Contains("over the limit of 20000000"));
}

TEST_CASE("the planned decode steps are every step up to the budget, else dense ends and an even sample between",
          "[planner][generate]") {
  const std::vector<int64_t> all = planned_generation_steps(100, 512);
  REQUIRE(all.size() == 100);
  for (int64_t step = 0; step < 100; ++step) CHECK(all[static_cast<size_t>(step)] == step);

  const std::vector<int64_t> sampled = planned_generation_steps(32768, 512);
  CHECK(sampled.size() <= 513);
  CHECK(sampled.size() >= 500);
  CHECK(sampled.front() == 0);
  CHECK(sampled.back() == 32767);
  for (int64_t step = 1; step <= kDenseDecodeSteps; ++step) CHECK(sampled[static_cast<size_t>(step)] == step);
  CHECK(sampled[sampled.size() - kDenseDecodeSteps] == 32768 - kDenseDecodeSteps);  // the dense tail starts there
  for (size_t i = 1; i < sampled.size(); ++i) CHECK(sampled[i] > sampled[i - 1]);
}

TEST_CASE("grouped-query decode steps repeat the cache to every head under eager attention, not under flash's enable_gqa",
          "[planner][generate]") {
  Scenario eager = generate_scenario(KvCacheKind::Dynamic);
  eager.attention = oomcast::scenario::AttentionImpl::Eager;
  Scenario flash = eager;
  flash.attention = oomcast::scenario::AttentionImpl::Flash;
  // 5 decode steps x 2 layers repeat the cached positions (eager's repeat_kv).
  CHECK(allocations_of(plan_steps(eager), "kv_cache.repeat_k") == 10);
  CHECK(allocations_of(plan_steps(flash), "kv_cache.repeat_k") == 0);
}

TEST_CASE("transformers 4.55's cache keeps the prefill's K and V, 4.56's copies them at the update",
          "[planner][generate]") {
  Scenario old_cache = generate_scenario(KvCacheKind::Dynamic);
  old_cache.model.dims["transformers_version"] = 455;
  Scenario new_cache = old_cache;
  new_cache.model.dims["transformers_version"] = 456;
  // The copy: one K and one V per layer made in the prefill, besides the decode steps' 5 each.
  CHECK(allocations_of(plan_steps(old_cache), "kv_cache.layers.0.k") == 5);
  CHECK(allocations_of(plan_steps(new_cache), "kv_cache.layers.0.k") == 6);
}
