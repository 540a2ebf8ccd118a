// The forward-only loop:
//   model = build(...).to(device); model.eval()            # setup
//   with torch.no_grad():                                  # inference (grad on for forward)
//       for batch in batches:                              # iter{b}/forward
//           out = model(x[, y])                            # logits, or (logits, loss)
// `out` is rebound after the next forward returns, so one batch's held outputs (and, with
// grad on, the graph they keep) coexist with the next forward. Captured forward graphs
// (`cuda_graphs` with phase forward, inference only) are captured after setup, one per batch
// size; a batch that one of them covers replays it: the forward allocates nothing and its
// outputs are the graph's static outputs (overwritten by the next replay, so nothing is held).
#include "planner/jobs/forward_job.h"

#include <string>
#include <vector>

#include "base/input_error.h"
#include "planner/checkpointing.h"
#include "planner/cuda_graph_capture.h"
#include "planner/families/families.h"
#include "planner/graph_prune.h"
#include "planner/graph_runner.h"
#include "planner/model_setup.h"
#include "planner/schedule_writer.h"
#include "planner/timing/step_time.h"

namespace oomcast::planner {

using scenario::CapturedPhase;
using scenario::CheckpointConfig;
using scenario::CudaGraphConfig;
using scenario::JobKind;
using scenario::JobSection;
using scenario::Scenario;

namespace {

LayerGraph forward_graph(const Scenario& s, int64_t batch, int64_t seq_len) {
  Scenario sized = s;
  sized.batch_size = batch;
  const JobSection& job = s.job.job;
  GraphBuilder builder(scenario_build_context(sized, seq_len, /*training=*/!job.eval_mode, job.kind == JobKind::Forward));
  families::build_forward(builder, s.model);
  LayerGraph graph = builder.finish();
  if (!job.compute_loss) drop_loss(graph);
  return graph;
}

// One forward per captured batch size (torch.compile(mode="reduce-overhead") records each
// input shape once). The graph's static inputs are allocated before its capture.
CapturedGraphs capture_forward_graphs(const Scenario& s, const CudaGraphConfig& graphs, int64_t seq_len,
                                      ModelState* model, ScheduleWriter* writer) {
  auto step = [&](int64_t batch) {
    LayerGraph graph = forward_graph(s, batch, seq_len);
    ExecutionOrder order = compute_execution_order(graph);
    CheckpointPlan checkpoints = plan_checkpointing(graph, order, CheckpointConfig{});
    GraphRunner runner(graph, std::move(order), checkpoints, model, writer, s.job.job.held_outputs);
    runner.forward();
    return runner.take_step_outputs();
  };
  auto inputs = [&](int64_t batch) { return allocate_static_inputs(forward_graph(s, batch, seq_len), *writer); };
  return capture_graphs(graphs, *writer, inputs, step, step);
}

}  // namespace

PlannedTrace plan_forward_job(const Scenario& s) {
  const JobSection& job = s.job.job;
  if (s.batch_size <= 0) throw InputError(SourceLocation{}, "batch_size", "batch_size must be positive");
  if (job.batches <= 0) throw InputError(SourceLocation{}, "job.batches", "job.batches must be positive");
  const bool grad_enabled = job.kind == JobKind::Forward;
  const int64_t seq_len = s.seq_len > 0 ? s.seq_len : scenario::families::default_sequence_length(s.model);
  GraphBuilder builder(scenario_build_context(s, seq_len, /*training=*/!job.eval_mode, grad_enabled));
  families::build_forward(builder, s.model);
  LayerGraph graph = builder.finish();
  if (!job.compute_loss) drop_loss(graph);

  PlannedTrace out;
  out.parameter_count = graph.parameter_count();
  ScheduleWriter writer(&out);
  writer.reserve(graph.ops.size() * 3 * static_cast<size_t>(job.batches) + graph.parameters.size() * 4);
  writer.set_iteration(0);
  writer.begin_phase("setup");
  allocate_model(s, graph, &writer, /*parameters=*/true);

  ModelState model;
  model.grad_slot.assign(graph.parameters.size(), -1);
  model.gpu_workspaces = !s.device.is_cpu && s.device.cublas_workspace_bytes > 0 && s.device.cublas_workspaces > 0;
  model.workspace_bytes = s.device.cublas_workspace_bytes;
  // No backward, so no autograd thread and no second cuBLAS handle.
  model.workspace_count = s.device.cublas_workspaces > 0 ? 1 : 0;
  ExecutionOrder order = compute_execution_order(graph);
  out.step_time = estimate_forward_time(s, graph);
  CheckpointPlan checkpoints = plan_checkpointing(graph, order, CheckpointConfig{});
  GraphRunner runner(graph, std::move(order), checkpoints, &model, &writer, job.held_outputs);

  const CudaGraphConfig* forward_graphs = captured_graph_config(s, CapturedPhase::Forward);
  const bool replays = forward_graphs && replayed_batch_size(*forward_graphs, s.batch_size) > 0;
  CapturedGraphs captured;
  if (forward_graphs) {
    writer.set_slot_prefix("capture/");
    writer.begin_phase("capture/forward_graphs");
    captured = capture_forward_graphs(s, *forward_graphs, seq_len, &model, &writer);
  }

  std::vector<uint32_t> inputs;
  std::vector<uint32_t> previous;  // the last batch's outputs (and, under grad mode, its graph)
  for (int64_t batch = 0; batch < job.batches; ++batch) {
    writer.set_iteration(static_cast<int32_t>(batch));
    writer.set_slot_prefix("i" + std::to_string(batch) + "/");
    writer.begin_phase("iter" + std::to_string(batch) + "/forward");
    // x, y = next(batches): the new batch exists before the old names are rebound.
    std::vector<uint32_t> fresh;
    for (TensorId input : graph.inputs) {
      fresh.push_back(writer.alloc(writer.intern(graph.names[graph.tensors[input].name]), graph.tensors[input].bytes(),
                                   TensorCategory::Input));
    }
    for (uint32_t slot : inputs) writer.free(slot);
    inputs = std::move(fresh);
    if (replays) continue;  // the graph copies the batch into its static inputs and replays
    runner.forward();
    std::vector<uint32_t> current = runner.take_step_outputs();
    for (uint32_t slot : previous) writer.free(slot);
    previous = std::move(current);
    if (job.held_outputs.empty()) {
      for (uint32_t slot : previous) writer.free(slot);
      previous.clear();
    }
  }
  writer.begin_phase("end");
  release_captured_graphs(captured, writer);
  return out;
}

}  // namespace oomcast::planner
