// Tests of captured decode graphs in a generate job's plan: what is captured, in which order
// and pool, and what a replayed step no longer allocates. The reserved-memory comparisons
// replay the plans through the simulator (default allocator settings, an 80 GiB device).
#include "planner/cuda_graph_capture.h"

#include <catch2/catch.hpp>

#include "planner/planner_test_support.h"
#include "planner/jobs/training_job.h"
#include "sim/replay.h"

using namespace oomcast::planner;
using oomcast::scenario::CapturedPhase;
using oomcast::scenario::CudaGraphConfig;
using oomcast::scenario::GenerateConfig;
using oomcast::scenario::JobKind;
using oomcast::scenario::KvCacheKind;
using oomcast::scenario::Scenario;
using oomcast::planner::testing::check_schedule;
using oomcast::scenario::testing::cpu_scenario;

namespace {

// llama-tiny (2 layers, hidden 64, 4 heads, 2 kv heads, vocab 256), 4 sequences, static cache.
Scenario graphed_generation(std::vector<int64_t> batch_sizes, bool share_pool = true) {
  Scenario s = cpu_scenario("llama-tiny", 4, 16);
  s.device.is_cpu = false;
  s.device.profile = "a100-80gb";
  s.job.job.kind = JobKind::Generate;
  s.job.job.compute_loss = false;
  GenerateConfig& g = s.job.job.generate;
  g.prompt_len = 16;
  g.new_tokens = 5;
  g.cache = KvCacheKind::Static;
  g.max_cache_len = 21;
  if (!batch_sizes.empty()) s.cuda_graphs.push_back(CudaGraphConfig{"decode", CapturedPhase::Decode, batch_sizes, share_pool});
  return s;
}

std::vector<const oomcast::sim::Event*> events_of(const PlannedTrace& plan, oomcast::sim::EventKind kind) {
  std::vector<const oomcast::sim::Event*> found;
  for (const auto& event : plan.trace.events)
    if (event.kind == kind) found.push_back(&event);
  return found;
}

size_t allocs_in_phase(const PlannedTrace& plan, const std::string& phase) {
  size_t count = 0;
  for (size_t i = 0; i < plan.trace.events.size(); ++i)
    if (plan.trace.events[i].kind == oomcast::sim::EventKind::Alloc && plan.names[plan.info[i].phase] == phase) ++count;
  return count;
}

oomcast::sim::Bytes peak_reserved(const PlannedTrace& plan) {
  return oomcast::sim::replay(plan.trace, oomcast::sim::AllocatorConfig{}, oomcast::sim::DeviceModel{}).peak_reserved_bytes;
}

}  // namespace

TEST_CASE("captured decode graphs are one capture per batch size, largest first, into the first graph's pool",
          "[planner][generate][cuda_graphs]") {
  PlannedTrace plan = plan_steps(graphed_generation({8, 4, 1}));
  REQUIRE(check_schedule(plan).ok);
  auto begins = events_of(plan, oomcast::sim::EventKind::CaptureBegin);
  REQUIRE(begins.size() == 3);
  const auto& strings = plan.trace.strings;
  CHECK(strings[begins[0]->tag] == "decode_b8");
  CHECK(begins[0]->slot == 0);  // a fresh pool
  CHECK(strings[begins[1]->tag] == "decode_b4");
  CHECK(strings[begins[1]->slot] == "decode_b8");
  CHECK(strings[begins[2]->slot] == "decode_b8");
  CHECK(begins[0]->stream == kGraphCaptureStream);
  CHECK(events_of(plan, oomcast::sim::EventKind::CaptureEnd).size() == 3);
  CHECK(events_of(plan, oomcast::sim::EventKind::GraphRelease).size() == 3);
}

TEST_CASE("a decode step a captured graph covers allocates nothing inside the model", "[planner][generate][cuda_graphs]") {
  PlannedTrace eager = plan_steps(graphed_generation({}));
  PlannedTrace graphed = plan_steps(graphed_generation({8}));
  // What is left is the loop's own tensors: next_token_logits, next_tokens, input_ids and
  // the step's new-token input.
  CHECK(allocs_in_phase(graphed, "iter2/decode") < allocs_in_phase(eager, "iter2/decode"));
  CHECK(allocs_in_phase(graphed, "iter2/decode") == 4);
}

TEST_CASE("a decode step larger than every captured batch runs eagerly", "[planner][generate][cuda_graphs]") {
  PlannedTrace eager = plan_steps(graphed_generation({}));
  PlannedTrace graphed = plan_steps(graphed_generation({2}));  // 4 sequences do not fit a batch-2 graph
  CHECK(allocs_in_phase(graphed, "iter2/decode") == allocs_in_phase(eager, "iter2/decode"));
}

TEST_CASE("graphs with pools of their own reserve more than graphs sharing one", "[planner][generate][cuda_graphs]") {
  oomcast::sim::Bytes shared = peak_reserved(plan_steps(graphed_generation({8, 4, 2, 1}, true)));
  oomcast::sim::Bytes separate = peak_reserved(plan_steps(graphed_generation({8, 4, 2, 1}, false)));
  CHECK(separate > shared);
}

TEST_CASE("captured graphs keep their pools reserved beyond what the eager plan reserves",
          "[planner][generate][cuda_graphs]") {
  oomcast::sim::Bytes eager = peak_reserved(plan_steps(graphed_generation({})));
  oomcast::sim::Bytes graphed = peak_reserved(plan_steps(graphed_generation({8, 4, 2, 1}, false)));
  CHECK(graphed > eager);
}

namespace {

// llama-tiny inference, batch 4, 3 batches.
Scenario graphed_inference(std::vector<int64_t> batch_sizes) {
  Scenario s = cpu_scenario("llama-tiny", 4, 16);
  s.device.is_cpu = false;
  s.device.profile = "a100-80gb";
  s.job.job.kind = JobKind::Inference;
  s.job.job.batches = 3;
  s.job.job.compute_loss = false;
  s.job.job.held_outputs = {"logits"};
  if (!batch_sizes.empty()) s.cuda_graphs.push_back(CudaGraphConfig{"fwd", CapturedPhase::Forward, batch_sizes, true});
  return s;
}

}  // namespace

TEST_CASE("an inference batch a captured forward graph covers allocates only its inputs",
          "[planner][inference][cuda_graphs]") {
  PlannedTrace graphed = plan_steps(graphed_inference({8, 4}));
  REQUIRE(check_schedule(graphed).ok);
  CHECK(events_of(graphed, oomcast::sim::EventKind::CaptureBegin).size() == 2);
  PlannedTrace eager = plan_steps(graphed_inference({}));
  CHECK(allocs_in_phase(graphed, "iter1/forward") == 1);  // input_ids only
  CHECK(allocs_in_phase(eager, "iter1/forward") > 1);
}
