// Emits the captures of a scenario's CUDA graphs (planner/cuda_graph_capture.h). The order
// and the pool sharing follow vLLM's capture loop: batch sizes largest first into one global
// pool, so every smaller graph reuses the memory the larger ones freed during capture.
#include "planner/cuda_graph_capture.h"

namespace oomcast::planner {

using scenario::CapturedPhase;
using scenario::CudaGraphConfig;
using scenario::Scenario;

const CudaGraphConfig* captured_graph_config(const Scenario& scenario, CapturedPhase phase) {
  for (const CudaGraphConfig& graph : scenario.cuda_graphs)
    if (graph.phase == phase) return &graph;
  return nullptr;
}

int64_t replayed_batch_size(const CudaGraphConfig& graph, int64_t batch) {
  int64_t chosen = 0;
  for (int64_t size : graph.batch_sizes)
    if (size >= batch && (chosen == 0 || size < chosen)) chosen = size;
  return chosen;
}

CapturedGraphs capture_graphs(const CudaGraphConfig& graph, ScheduleWriter& writer, const StepWriter& inputs,
                              const StepWriter& warm_up, const StepWriter& capture) {
  CapturedGraphs captured;
  const sim::StreamId stream = writer.stream();
  for (int64_t batch : graph.batch_sizes) {
    std::vector<uint32_t> static_inputs = inputs(batch);
    captured.held_slots.insert(captured.held_slots.end(), static_inputs.begin(), static_inputs.end());
    for (uint32_t slot : warm_up(batch)) writer.free(slot);
    std::string name = graph.name + "_b" + std::to_string(batch);
    // torch.cuda.graph.__enter__: synchronize, gc.collect, empty_cache, then capture.
    writer.sync_device();
    writer.empty_cache();
    const std::string pool = graph.share_pool && !captured.graph_names.empty() ? captured.graph_names.front() : "";
    writer.capture_begin(name, kGraphCaptureStream, pool);
    writer.set_stream(kGraphCaptureStream);
    std::vector<uint32_t> outputs = capture(batch);
    writer.set_stream(stream);
    writer.capture_end(name);
    captured.held_slots.insert(captured.held_slots.end(), outputs.begin(), outputs.end());
    captured.graph_names.push_back(std::move(name));
  }
  return captured;
}

void release_captured_graphs(const CapturedGraphs& graphs, ScheduleWriter& writer) {
  for (const std::string& name : graphs.graph_names) writer.graph_release(name);
  for (uint32_t slot : graphs.held_slots) writer.free(slot);
}

std::vector<uint32_t> allocate_static_inputs(const LayerGraph& graph, ScheduleWriter& writer) {
  std::vector<uint32_t> slots;
  for (TensorId input : graph.inputs) {
    const auto& tensor = graph.tensors[input];
    slots.push_back(writer.alloc(writer.intern("static." + graph.names[tensor.name]), tensor.bytes(), TensorCategory::Input));
  }
  return slots;
}

}  // namespace oomcast::planner
