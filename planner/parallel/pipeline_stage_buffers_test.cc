// What torch.distributed.pipelining keeps around a stage's microbatches beyond the stage
// module's own graph (pipeline_stage_buffers.h): the stage output in fwd_cache until its
// microbatch's backward, and the sends ScheduleGPipe waits on only after the last backward.
// Measured against real runs by validate/pipeline_parallel_capture.py (docs/validation.md).
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "planner/jobs/mesh_job.h"
#include "planner/jobs/training_job.h"
#include "planner/parallel/mesh_rank.h"
#include "planner/parallel/pipeline_stage_buffers.h"
#include "planner/parallel/rank_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::PipelineSchedule;
using oomcast::scenario::Scenario;

namespace {

// llama-tiny with 4 layers in 2 stages, 4 microbatches of 2 x 32 tokens (hidden 64, fp32).
Scenario two_stages(PipelineSchedule schedule, int64_t planned_stage) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  scenario.model.dims["layers"] = 4;
  scenario.parallel.world_size = 2;
  scenario.parallel.gpus_per_node = 2;
  scenario.parallel.mesh.pipeline_parallel = 2;
  scenario.parallel.mesh.pipeline_microbatches = 4;
  scenario.parallel.mesh.pipeline_schedule = schedule;
  scenario.parallel.mesh.planned_stage = planned_stage;
  return scenario;
}

// The phase (the last mark before it) in which microbatch `micro`'s tensor named `tensor` is
// freed in iteration 1, "" if never: the microbatches' forwards allocate it in their order.
std::string phase_freed(const PlannedTrace& planned, const std::string& tensor, int micro) {
  std::string phase;
  std::map<uint32_t, int> watched;  // slot -> microbatch
  int seen = 0;
  for (size_t i = 0; i < planned.trace.events.size(); ++i) {
    const auto& event = planned.trace.events[i];
    if (event.kind == oomcast::sim::EventKind::Mark) {
      phase = planned.trace.strings[event.tag];
    } else if (event.kind == oomcast::sim::EventKind::Alloc && planned.info[i].iteration == 1 &&
               planned.names[planned.info[i].tensor] == tensor) {
      watched[event.slot] = seen++;
    } else if (event.kind == oomcast::sim::EventKind::Free) {
      auto found = watched.find(event.slot);
      if (found != watched.end() && found->second == micro) return phase;
      if (found != watched.end()) watched.erase(found);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("A stage's output lives until its microbatch's backward, its sends as long as the schedule waits on them",
          "[parallel][mesh][pipeline]") {
  const Scenario first = two_stages(PipelineSchedule::GPipe, 0);
  const Scenario last = two_stages(PipelineSchedule::GPipe, 1);
  const MeshRank head = mesh_rank(first, 0);
  const MeshRank tail = mesh_rank(last, 1);
  const std::vector<std::string> caller = {"loss"};
  CHECK(stage_tensor_life(tail, "logits", caller) == StageTensorLife::ThisBackward);
  CHECK(stage_tensor_life(tail, "loss", caller) == StageTensorLife::Caller);
  CHECK(stage_tensor_life(tail, "input_grad", caller) == StageTensorLife::EndOfBackwards);
  CHECK(stage_tensor_life(head, "hidden_states", caller) == StageTensorLife::EndOfBackwards);
  const MeshRank tail_1f1b = mesh_rank(two_stages(PipelineSchedule::OneForwardOneBackward, 1), 1);
  const MeshRank head_1f1b = mesh_rank(two_stages(PipelineSchedule::OneForwardOneBackward, 0), 0);
  CHECK(stage_tensor_life(tail_1f1b, "input_grad", caller) == StageTensorLife::NextBackward);
  CHECK(stage_tensor_life(head_1f1b, "hidden_states", caller) == StageTensorLife::ThisBackward);
  // Logits the training loop asked to hold stay the loop's.
  CHECK(stage_tensor_life(tail, "logits", {"loss", "logits"}) == StageTensorLife::Caller);
}

TEST_CASE("Under GPipe the first stage's sent hidden states outlive every backward, under 1F1B only their own",
          "[parallel][mesh][pipeline]") {
  // ScheduleGPipe waits on its forward sends after the last backward; Schedule1F1B's stage
  // output dies when backward_one_chunk pops fwd_cache.
  const std::string output = "model.layers.1.mlp_residual.out";
  CHECK(phase_freed(plan_steps(two_stages(PipelineSchedule::GPipe, 0)), output, 0) == "iter1/mb3/backward");
  CHECK(phase_freed(plan_steps(two_stages(PipelineSchedule::OneForwardOneBackward, 0)), output, 0) ==
        "iter1/mb0/backward");
}

TEST_CASE("The last stage's logits live until their microbatch's backward", "[parallel][mesh][pipeline]") {
  // fwd_cache keeps the stage output beside the loss computed from it.
  for (PipelineSchedule schedule : {PipelineSchedule::GPipe, PipelineSchedule::OneForwardOneBackward}) {
    CHECK(phase_freed(plan_steps(two_stages(schedule, 1)), "lm_head.out", 1) == "iter1/mb1/backward");
  }
}

// Interleaved 1F1B, 2 ranks x 2 local stages: the first rank's stage 0 receives gradients only
// and its stage 2 activations and gradients; 3 sets of 4 microbatch buffers, not 1.
TEST_CASE("every local stage of a multi-stage schedule has its own receive buffers", "[parallel][mesh][pipeline]") {
  auto receive_buffers = [](int64_t virtual_stages) {
    Scenario scenario = two_stages(PipelineSchedule::Interleaved1F1B, 0);
    scenario.parallel.mesh.pipeline_virtual_stages = virtual_stages;
    const PlannedTrace planned = plan_mesh_job(scenario);
    int found = 0;
    for (size_t i = 0; i < planned.trace.events.size(); ++i) {
      if (planned.trace.events[i].kind != oomcast::sim::EventKind::Alloc) continue;
      const std::string& name = planned.names[planned.info[i].tensor];
      found += name.rfind("pipeline.recv_", 0) == 0;
    }
    return found;
  };
  CHECK(receive_buffers(1) == 4);
  CHECK(receive_buffers(2) == 12);
}
