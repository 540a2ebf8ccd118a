// Captured CUDA graphs in a plan (the scenario's `cuda_graphs`): for each batch size,
// largest first, a warm-up step, then `with torch.cuda.graph(g, pool=...)` around one step
// on the capture stream, so the step's allocations live in the graph's private pool and its
// outputs stay there as the graph's static outputs. A step that a captured graph covers then
// replays it and allocates nothing inside the model.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "planner/layer_graph.h"
#include "planner/schedule_writer.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// The side stream torch.cuda.graph captures on (its default_capture_stream).
inline constexpr sim::StreamId kGraphCaptureStream = 0x6ca9;

// The scenario's graph entry for `phase`, or nullptr.
const scenario::CudaGraphConfig* captured_graph_config(const scenario::Scenario& scenario, scenario::CapturedPhase phase);

// The captured batch size a step of `batch` sequences replays: the smallest captured size
// that holds it (vLLM pads the batch up to it), or 0 when none does (the step runs eagerly).
int64_t replayed_batch_size(const scenario::CudaGraphConfig& graph, int64_t batch);

// What the captures left behind: the graphs (by trace name) and the slots of their static
// inputs and outputs, all kept until release_captured_graphs.
struct CapturedGraphs {
  std::vector<std::string> graph_names;
  std::vector<uint32_t> held_slots;
};

// One step of the captured phase at `batch`, written through the writer on its current
// stream. Returns the slots the step leaves live (its outputs).
using StepWriter = std::function<std::vector<uint32_t>(int64_t batch)>;

// Emits, for each batch size largest first: `warm_up` eagerly on the default stream (its
// outputs freed), then sync, empty_cache (torch.cuda.graph's __enter__) and the capture of
// `capture` on kGraphCaptureStream, into one shared pool or a pool per graph. `inputs`
// allocates the graph's static input buffers before its capture and returns their slots.
CapturedGraphs capture_graphs(const scenario::CudaGraphConfig& graph, ScheduleWriter& writer, const StepWriter& inputs,
                              const StepWriter& warm_up, const StepWriter& capture);

// A captured step's static input buffers: one `static.<name>` Input allocation per input of
// `graph`, made before its capture. Returns their slots.
std::vector<uint32_t> allocate_static_inputs(const LayerGraph& graph, ScheduleWriter& writer);

// The graphs are destroyed (`del graph` at the end of the job): their pools lose their
// users and their static buffers are freed.
void release_captured_graphs(const CapturedGraphs& graphs, ScheduleWriter& writer);

}  // namespace oomcast::planner
