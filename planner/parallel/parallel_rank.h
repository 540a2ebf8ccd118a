// ParallelRank: one rank of a data-parallel job, driving the per-rank parts of the schedule
// (where parameters, gradients and optimizer states live, gathers, buckets, reduce-scatters)
// through the graph runner's hooks. One subclass per engine: ddp_rank.cc, fsdp_rank.cc,
// fsdp2_rank.cc, deepspeed_rank.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "planner/graph_runner.h"
#include "planner/layer_graph.h"
#include "planner/parallel/parallel_summary.h"
#include "planner/parallel/parameter_groups.h"
#include "planner/parallel/runner_hooks.h"
#include "scenario/scenario.h"
#include "planner/schedule_writer.h"

namespace oomcast::planner {

class ParallelRank : public RunnerHooks {
 public:
  ParallelRank(const scenario::Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer, ModelState* model);

  // model.to(device) and the engine's wrapping: what the rank keeps of the parameters.
  virtual void allocate_parameters() = 0;
  // The optimizer (and, for DeepSpeed, its eagerly created states).
  virtual void construct_optimizer() = 0;
  virtual void begin_forward(bool /*training*/) {}
  virtual void end_forward() {}
  virtual void begin_backward(bool /*last_micro_batch*/) {}
  virtual void end_backward(bool /*last_micro_batch*/) {}
  virtual void optimizer_step() = 0;
  // optimizer.zero_grad(): what the engine frees besides the parameters' .grad.
  virtual void zero_grad(bool /*set_to_none*/) {}

  void before_forward_op(uint32_t) override {}
  void after_forward_op(uint32_t) override {}
  void before_backward_op(uint32_t, bool) override {}
  void after_backward_op(uint32_t) override {}
  void parameter_grad_ready(int32_t) override {}

 protected:
  uint64_t param_numel(int32_t parameter) const;
  DType param_dtype(int32_t parameter) const;
  const std::string& param_name(int32_t parameter) const;
  uint32_t intern(const std::string& text) { return writer_->intern(text); }
  // Frees a parameter's .grad (the engine copied it elsewhere) and forgets it.
  void drop_grad(int32_t parameter);
  uint64_t world() const { return static_cast<uint64_t>(scenario_.parallel.world_size); }

  const scenario::Scenario& scenario_;
  const LayerGraph& graph_;
  ScheduleWriter* writer_;
  ModelState* model_;
  ParameterUses uses_;
};

// nullptr when the scenario has no parallel engine.
std::unique_ptr<ParallelRank> make_parallel_rank(const scenario::Scenario& scenario, const LayerGraph& graph,
                                                 ScheduleWriter* writer, ModelState* model);

// The engine factories (one per file).
std::unique_ptr<ParallelRank> make_ddp_rank(const scenario::Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer,
                                            ModelState* model);
std::unique_ptr<ParallelRank> make_fsdp_rank(const scenario::Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer,
                                             ModelState* model);
std::unique_ptr<ParallelRank> make_fsdp2_rank(const scenario::Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer,
                                              ModelState* model);
std::unique_ptr<ParallelRank> make_deepspeed_rank(const scenario::Scenario& scenario, const LayerGraph& graph,
                                                  ScheduleWriter* writer, ModelState* model);

// Everything the report shows about the rank besides the schedule, except the offload cost:
// that is the step-time model's (timing/offload_cost.h), and the training job adds it.
ParallelSummary summarize_parallel(const scenario::Scenario& scenario, const LayerGraph& graph);

}  // namespace oomcast::planner
