// plan_steps(): the training loop around the graph runner. Setup (parameters, buffers,
// master weights), then per iteration: micro-batches of inputs, forward, backward; the
// optimizer step; zero_grad; evaluation passes; caller-held outputs freed on rebinding.
#include "planner/activation_offload.h"
#include "planner/jobs/training_job.h"

#include <algorithm>
#include <memory>
#include <string>

#include "base/edit_distance.h"
#include "base/input_error.h"
#include "base/progress.h"
#include "planner/checkpointing.h"
#include "planner/families/families.h"
#include "planner/jobs/forward_job.h"
#include "planner/jobs/generate_job.h"
#include "planner/jobs/mesh_job.h"
#include "planner/graph_runner.h"
#include "planner/model_setup.h"
#include "planner/ops/graph_builder.h"
#include "planner/optimizer_in_backward.h"
#include "planner/optimizers.h"
#include "planner/parallel/mesh_rank.h"
#include "planner/parallel/parallel_rank.h"
#include "planner/parallel/pipeline_stage_buffers.h"
#include "planner/schedule_size.h"
#include "planner/schedule_writer.h"
#include "planner/timing/offload_cost.h"
#include "planner/timing/step_time.h"
#include "planner/trainable_check.h"
#include "planner/trainable_policy.h"
#include "sim/work_counters.h"

namespace oomcast::planner {

using scenario::CheckpointConfig;
using scenario::EvalConfig;
using scenario::JobKind;
using scenario::Scenario;

namespace {

void check_positive(int64_t value, const char* key) {
  if (value <= 0) throw InputError(SourceLocation{}, key, std::string(key) + " must be positive");
}

LayerGraph build_graph(const Scenario& scenario, int64_t seq_len, bool training, bool grad_enabled) {
  GraphBuilder builder(scenario_build_context(scenario, seq_len, training, grad_enabled));
  families::build_forward(builder, scenario.model);
  return builder.finish();
}

// The training loop's state between phases.
class LoopPlanner {
 public:
  // `rank`: one rank of a tensor/pipeline/context/expert-parallel job (its scenario is
  // rank_scenario's), or nullptr.
  LoopPlanner(const Scenario& scenario, PlannedTrace* out, const MeshRank* rank = nullptr)
      : scenario_(scenario), out_(out), writer_(out), rank_(rank) {}

  void run();

 private:
  std::string phase_label(int64_t iteration, int64_t micro_batch, const char* phase) const;
  void load_inputs(const LayerGraph& graph, std::vector<uint32_t>* slots);
  void zero_grad();
  void evaluate(GraphRunner& runner, const LayerGraph& graph);

  const Scenario& scenario_;
  PlannedTrace* out_;
  ScheduleWriter writer_;
  ModelState model_;
  // Eval losses appended to a list that lives for the whole run (without .item()): each one,
  // and under grad mode its whole graph, is never freed.
  std::vector<uint32_t> eval_losses_kept_;
  std::unique_ptr<ParallelRank> parallel_;  // one rank of a data-parallel job (planner/parallel/)
  const MeshRank* rank_;
};

// The forwards and backwards of one optimizer step: a pipeline stage's schedule, or each
// micro-batch's forward then backward.
std::vector<PipelineStep> step_order(const Scenario& s, const MeshRank* rank) {
  if (rank && rank->mesh.pipeline_parallel > 1) return rank->steps;
  std::vector<PipelineStep> steps;
  for (int64_t micro = 0; micro < s.grad_accum_steps; ++micro) {
    steps.push_back({true, micro});
    steps.push_back({false, micro});
  }
  return steps;
}

std::string LoopPlanner::phase_label(int64_t iteration, int64_t micro_batch, const char* phase) const {
  std::string label = "iter" + std::to_string(iteration) + "/";
  if (scenario_.grad_accum_steps > 1 && micro_batch >= 0) label += "mb" + std::to_string(micro_batch) + "/";
  return label + phase;
}

void LoopPlanner::load_inputs(const LayerGraph& graph, std::vector<uint32_t>* slots) {
  // X, Y = get_batch(): the new batch exists before the old one's names are rebound.
  std::vector<uint32_t> fresh;
  for (TensorId input : graph.inputs) {
    fresh.push_back(writer_.alloc(writer_.intern(graph.names[graph.tensors[input].name]), graph.tensors[input].bytes(),
                                  TensorCategory::Input));
  }
  for (uint32_t slot : *slots) writer_.free(slot);
  *slots = std::move(fresh);
}

void LoopPlanner::zero_grad() {
  if (parallel_) parallel_->zero_grad(scenario_.loop.zero_grad_set_to_none);
  if (!scenario_.loop.zero_grad_set_to_none) return;  // .grad.zero_() in place: no event
  for (int64_t& slot : model_.grad_slot) {
    if (slot >= 0) writer_.free(static_cast<uint32_t>(slot));
    slot = -1;
  }
}

void LoopPlanner::evaluate(GraphRunner& runner, const LayerGraph& graph) {
  const EvalConfig& eval = scenario_.eval;
  // Inputs the eval graph saved (conv's images, nll_loss's targets, embedding's ids): a kept
  // graph holds them after the loop rebinds its names.
  const std::vector<uint8_t> input_saved = inputs_saved_by_graph(graph);
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> previous;  // the last batch's outputs (and graph): die on rebinding
  for (int64_t batch = 0; batch < eval.batches; ++batch) {
    writer_.set_slot_prefix("i" + std::to_string(writer_.iteration()) + ".e" + std::to_string(batch) + "/");
    load_inputs(graph, &inputs);
    runner.forward();
    // `logits, loss = model(X, Y)`: outputs the loop does not bind die now; under grad mode
    // what the graph saved lives as long as the loss does.
    std::vector<uint32_t> current;
    bool loss_kept = false;
    for (const auto& [name, slot] : runner.finish_step()) {
      loss_kept = loss_kept || (name == "loss" && eval.accumulate_loss_without_item);
      (name == "loss" && eval.accumulate_loss_without_item ? eval_losses_kept_ : current).push_back(slot);
    }
    for (uint32_t slot : runner.take_all_live()) (loss_kept ? eval_losses_kept_ : current).push_back(slot);
    if (loss_kept) {
      std::vector<uint32_t> unsaved;
      for (size_t i = 0; i < inputs.size(); ++i) (input_saved[i] ? eval_losses_kept_ : unsaved).push_back(inputs[i]);
      inputs = std::move(unsaved);
    }
    for (uint32_t slot : previous) writer_.free(slot);
    previous = std::move(current);
  }
  for (uint32_t slot : previous) writer_.free(slot);
  for (uint32_t slot : inputs) writer_.free(slot);
}

void LoopPlanner::run() {
  const Scenario& s = scenario_;
  check_positive(s.batch_size, "batch_size");
  check_positive(s.iterations, "iterations");
  check_positive(s.grad_accum_steps, "grad_accum_steps");
  if (s.dropout < 0.0 || s.dropout >= 1.0) throw InputError(SourceLocation{}, "dropout", "dropout must be in [0, 1)");
  const int64_t seq_len = s.seq_len > 0 ? s.seq_len : scenario::families::default_sequence_length(s.model);
  const PrecisionRules rules = job_precision_rules(s);

  // A graph file's least work is known from its statements: a schedule beyond the limit is
  // refused before the graph is built (the check after it counts the ops the build made).
  const families::LeastWork least =
      families::least_graph_file_work(s.model, scenario_build_context(s, seq_len, /*training=*/true, /*grad_enabled=*/true));
  if (least.ops > 0) check_schedule_size(static_cast<size_t>(least.ops), static_cast<size_t>(least.parameters), s);
  LayerGraph graph = build_graph(s, seq_len, /*training=*/true, /*grad_enabled=*/true);
  if (rank_) apply_mesh_to_graph(graph, *rank_);
  out_->parameter_count = graph.parameter_count();
  out_->parallel = summarize_parallel(s, graph);
  // The offload traffic is the step-time model's (timing/), so the job adds it to the summary.
  out_->parallel.offload = estimate_offload_cost(s, out_->parallel.sizes.parameters);
  out_->parallel.offloads = out_->parallel.offload.host_to_device_bytes + out_->parallel.offload.device_to_host_bytes > 0;
  const scenario::families::FamilySpec* spec = scenario::families::find_family(s.model.family);
  std::vector<std::string> outputs;  // a graph file's are the ones it names
  if (spec) outputs = spec->outputs;
  for (const auto& [name, tensor] : graph.named_outputs) {
    if (!spec) outputs.push_back(name);
  }
  for (const std::string& name : s.loop.caller_held_outputs) {
    if (std::find(outputs.begin(), outputs.end(), name) == outputs.end()) {
      throw InputError(SourceLocation{}, "training_loop.caller_held_outputs",
                       "unknown output '" + name + "' (the model returns: loss, logits)" + did_you_mean(name, outputs));
    }
  }
  ExecutionOrder order = compute_execution_order(graph);
  CheckpointPlan checkpoints = plan_checkpointing(graph, order, s.checkpointing);
  out_->activation_offload_host_bytes = plan_activation_offload(graph, order, s.activation_offloading, &checkpoints);
  out_->step_time = estimate_training_step_time(s, graph, order, checkpoints, out_->parallel);

  check_something_trains(s, graph);  // refuses LoRA targets that match nothing, a job with nothing to train
  check_schedule_size(graph.ops.size(), graph.parameters.size(), s);  // refuses a schedule beyond reason
  writer_.reserve(static_cast<size_t>(estimated_schedule_events(graph.ops.size(), graph.parameters.size(), s, s.iterations)));
  // model.to(device): every parameter, then every buffer, its own allocation.
  writer_.set_iteration(0);
  writer_.begin_phase("setup");
  std::vector<OptimizerParameter> optimizer_params;
  parallel_ = make_parallel_rank(s, graph, &writer_, &model_);
  if (parallel_) parallel_->allocate_parameters();
  allocate_model(s, graph, &writer_, /*parameters=*/!parallel_);
  // Only trainable parameters get optimizer state (frozen ones never have a .grad).
  std::vector<size_t> optimized;
  for (size_t p = 0; p < graph.parameters.size() && !parallel_; ++p) {
    const TensorDesc& desc = graph.tensors[graph.parameters[p]];
    if (!desc.requires_grad) continue;
    DType step_dtype = rules.fp32_master_weights ? DType::Float32 : desc.dtype;
    optimizer_params.push_back(
        OptimizerParameter{writer_.intern(graph.names[desc.name]), desc.numel, step_dtype, graph.parameter_shapes[p]});
    optimized.push_back(p);
  }
  model_.grad_slot.assign(graph.parameters.size(), -1);
  model_.gpu_workspaces = !s.device.is_cpu && s.device.cublas_workspace_bytes > 0 && s.device.cublas_workspaces > 0;
  model_.workspace_bytes = s.device.cublas_workspace_bytes;
  model_.workspace_count = s.device.cublas_workspaces;
  // optimizer.in_backward: one optimizer per trainable parameter, stepped from its grad hook.
  std::unique_ptr<OptimizerInBackward> in_backward;
  if (s.optimizer.in_backward && !parallel_) {
    std::vector<std::unique_ptr<OptimizerModel>> per_parameter(graph.parameters.size());
    for (size_t i = 0; i < optimized.size(); ++i) {
      auto own = std::make_unique<OptimizerModel>(s.optimizer, rules, std::vector<OptimizerParameter>{optimizer_params[i]},
                                                  &writer_);
      own->set_torch_version(s.allocator.torch_version);
      own->construct();
      per_parameter[optimized[i]] = std::move(own);
    }
    optimizer_params.clear();
    optimized.clear();
    in_backward = std::make_unique<OptimizerInBackward>(std::move(per_parameter), &model_, &writer_);
  }
  OptimizerModel optimizer(s.optimizer, rules, std::move(optimizer_params), &writer_);
  optimizer.set_torch_version(s.allocator.torch_version);
  if (parallel_) {
    model_.hooks = parallel_.get();
    parallel_->construct_optimizer();
  } else if (in_backward) {
    model_.hooks = in_backward.get();
  } else {
    optimizer.construct();
  }
  RunnerHooks* const training_hooks = model_.hooks;

  // One runner per microbatch in flight (a pipeline stage holds several forwards' graphs).
  const std::vector<PipelineStep> steps = step_order(s, rank_);
  const size_t in_flight = rank_ && rank_->mesh.pipeline_parallel > 1 ? static_cast<size_t>(rank_->in_flight) : 1;
  // A pipeline stage keeps each microbatch's output (the last stage's logits) in its fwd_cache
  // until that microbatch's backward (pipeline_stage_buffers.h).
  const bool pipelined = rank_ && rank_->mesh.pipeline_parallel > 1;
  const std::vector<std::string> held_outputs = pipelined ? pipeline_held_outputs(*rank_, s.loop.caller_held_outputs)
                                                          : s.loop.caller_held_outputs;
  std::vector<std::unique_ptr<GraphRunner>> runners;
  for (size_t i = 0; i < in_flight; ++i) {
    runners.push_back(std::make_unique<GraphRunner>(graph, order, checkpoints, &model_, &writer_, held_outputs));
  }
  LayerGraph eval_graph;
  CheckpointPlan eval_checkpoints;
  std::unique_ptr<GraphRunner> eval_runner;
  if (s.eval.enabled) {
    check_positive(s.eval.batches, "eval.batches");
    eval_graph = build_graph(s, seq_len, /*training=*/false, /*grad_enabled=*/!s.eval.no_grad);
    ExecutionOrder eval_order = compute_execution_order(eval_graph);
    eval_checkpoints = plan_checkpointing(eval_graph, eval_order, CheckpointConfig{});
    // The eval loop binds the outputs the training loop binds, and always the loss.
    std::vector<std::string> eval_held = s.loop.caller_held_outputs;
    if (std::find(eval_held.begin(), eval_held.end(), "loss") == eval_held.end()) eval_held.emplace_back("loss");
    eval_runner = std::make_unique<GraphRunner>(eval_graph, std::move(eval_order), eval_checkpoints, &model_, &writer_,
                                                eval_held);
  }

  if (pipelined && !rank_->last_stage()) {
    for (auto& runner : runners) runner->set_output_grad_received(true);
  }
  if (pipelined && !rank_->first_stage()) {
    for (auto& runner : runners) runner->set_input_grad_sent(true);
  }
  std::vector<std::vector<uint32_t>> inputs(in_flight);
  std::vector<std::pair<std::string, uint32_t>> held;
  bool scaler_created = false;
  for (int64_t iteration = 0; iteration < s.iterations; ++iteration) {
    report_progress("planning iterations", static_cast<uint64_t>(iteration), static_cast<uint64_t>(s.iterations));
    writer_.set_iteration(static_cast<int32_t>(iteration));
    if (s.loop.zero_grad_before_forward) {
      writer_.begin_phase(phase_label(iteration, -1, "zero_grad"));
      zero_grad();
    }
    // A pipeline stage's step() gets the whole batch and splits it into views; its receive
    // buffers are made at the first step and kept (pipeline_stage_buffers.cc).
    std::vector<uint32_t> whole_batch;
    if (pipelined) whole_batch = allocate_pipeline_batch(graph, *rank_, &writer_, iteration == 0);
    std::vector<uint32_t> sends_until_next_backward;  // stage_tensor_life's NextBackward
    std::vector<uint32_t> sends_until_end;            // and EndOfBackwards
    for (const PipelineStep& step : steps) {
      const int64_t micro = step.micro_batch;
      GraphRunner& runner = *runners[static_cast<size_t>(micro) % in_flight];
      writer_.set_slot_prefix("i" + std::to_string(iteration) + ".m" + std::to_string(micro) + "/");
      if (step.forward) {
        writer_.begin_phase(phase_label(iteration, micro, "forward"));
        if (!pipelined) load_inputs(graph, &inputs[static_cast<size_t>(micro) % in_flight]);
        if (parallel_) parallel_->begin_forward(/*training=*/true);
        // `logits, loss = model(X, Y)` rebinds the caller's names: last step's outputs die now
        // (a loss appended to a list without .item() never does). `out = model(X)` then
        // `loss = criterion(out, Y)` rebinds `out` as the model returns, before the loss runs.
        auto rebind = [&](bool loss) {
          for (const auto& [name, slot] : held) {
            if ((name == "loss") != loss) continue;
            if (!(name == "loss" && s.loop.keep_losses_across_iterations)) writer_.free(slot);
          }
        };
        if (s.loop.loss_outside_model) {
          runner.forward([&] { rebind(/*loss=*/false); });
        } else {
          runner.forward();
        }
        if (parallel_) parallel_->end_forward();
        if (!s.loop.loss_outside_model) rebind(/*loss=*/false);
        rebind(/*loss=*/true);
        held.clear();
        continue;
      }
      uint32_t scaled_loss = UINT32_MAX;
      if (rules.grad_scaler) {
        if (!scaler_created) {
          // GradScaler creates _scale and _growth_tracker on the device at the first scale().
          scaler_created = true;
          writer_.alloc(writer_.intern("grad_scaler._scale"), 4, TensorCategory::Buffer);
          writer_.alloc(writer_.intern("grad_scaler._growth_tracker"), 4, TensorCategory::Buffer);
        }
        scaled_loss = writer_.alloc(writer_.intern("grad_scaler.scaled_loss"), 4, TensorCategory::Activation);
      }
      writer_.begin_phase(phase_label(iteration, micro, "backward"));
      const bool last_micro_batch = micro + 1 == s.grad_accum_steps;
      if (parallel_) parallel_->begin_backward(last_micro_batch);
      runner.backward();
      if (parallel_) parallel_->end_backward(last_micro_batch);
      if (scaled_loss != UINT32_MAX) writer_.free(scaled_loss);
      std::vector<uint32_t> sent_now;
      for (const auto& entry : runner.finish_step()) {
        switch (pipelined ? stage_tensor_life(*rank_, entry.first, s.loop.caller_held_outputs) : StageTensorLife::Caller) {
          case StageTensorLife::Caller: held.push_back(entry); break;
          case StageTensorLife::ThisBackward: writer_.free(entry.second); break;
          case StageTensorLife::NextBackward: sent_now.push_back(entry.second); break;
          case StageTensorLife::EndOfBackwards: sends_until_end.push_back(entry.second); break;
        }
      }
      for (uint32_t slot : sends_until_next_backward) writer_.free(slot);
      sends_until_next_backward = std::move(sent_now);
    }
    for (uint32_t slot : sends_until_next_backward) writer_.free(slot);
    for (uint32_t slot : sends_until_end) writer_.free(slot);
    for (uint32_t slot : whole_batch) writer_.free(slot);
    writer_.begin_phase(phase_label(iteration, -1, "optimizer"));
    std::vector<uint32_t> scaler_temporaries;
    if (rules.grad_scaler) {
      // unscale_: inv_scale and found_inf, one element each, until update().
      scaler_temporaries.push_back(writer_.alloc(writer_.intern("grad_scaler.inv_scale"), 4, TensorCategory::Temporary));
      scaler_temporaries.push_back(writer_.alloc(writer_.intern("grad_scaler.found_inf"), 4, TensorCategory::Temporary));
    }
    std::vector<uint8_t> has_grad(optimized.size());
    for (size_t i = 0; i < has_grad.size(); ++i) has_grad[i] = model_.grad_slot[optimized[i]] >= 0 ? 1 : 0;
    if (parallel_) {
      parallel_->optimizer_step();
    } else {
      optimizer.step(has_grad);
    }
    for (uint32_t slot : scaler_temporaries) writer_.free(slot);
    if (!s.loop.zero_grad_before_forward) {
      writer_.begin_phase(phase_label(iteration, -1, "zero_grad"));
      zero_grad();
    }
    if (eval_runner) {
      writer_.begin_phase(phase_label(iteration, -1, "eval"));
      // The eval graph's ops are not the training graph's: the engine gathers its working set
      // up front (ParallelRank::begin_forward) instead of per op.
      model_.hooks = nullptr;
      if (parallel_) parallel_->begin_forward(/*training=*/false);
      evaluate(*eval_runner, eval_graph);
      if (parallel_) parallel_->end_forward();
      model_.hooks = training_hooks;
    }
  }
  writer_.begin_phase("end");
  end_progress("planning iterations");
}

}  // namespace

LayerGraph build_training_graph(const Scenario& scenario) {
  const int64_t seq_len = scenario.seq_len > 0 ? scenario.seq_len : scenario::families::default_sequence_length(scenario.model);
  return build_graph(scenario, seq_len, /*training=*/true, /*grad_enabled=*/true);
}

PlannedTrace plan_training_rank(const Scenario& rank_scenario, const MeshRank& rank) {
  PlannedTrace out;
  {
    LoopPlanner planner(rank_scenario, &out, &rank);
    planner.run();
  }
  return out;
}

PlannedTrace plan_steps(const Scenario& scenario) {
  sim::count_plan();
  if (scenario.parallel.mesh.model_parallel()) return plan_mesh_job(scenario);
  if (scenario.job.job.kind == JobKind::Generate) return plan_generate_job(scenario);
  if (scenario.job.job.kind != JobKind::Train) return plan_forward_job(scenario);
  PlannedTrace out;
  {
    LoopPlanner planner(scenario, &out);
    planner.run();
  }
  return out;
}

}  // namespace oomcast::planner
