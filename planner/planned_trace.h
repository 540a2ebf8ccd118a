// PlannedTrace: the planner's output, a sim::Trace plus what each event means to the planner
// (iteration, phase, op, tensor, category). Its own header so that the writers of the
// schedule (schedule_writer, parallel ranks) need not include the jobs (planner/jobs/) that drive them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/parallel/parallel_summary.h"
#include "planner/step_time_result.h"
#include "sim/trace.h"

namespace oomcast::planner {

enum class TensorCategory : uint8_t {
  Parameter, Gradient, OptimizerState, Activation, Temporary, Workspace, Input, Buffer, Communication
};
const char* category_name(TensorCategory category);

// What one trace event means to the planner (parallel to Trace::events).
struct EventInfo {
  int32_t iteration = 0;
  uint32_t phase = 0;        // index into PlannedTrace::names
  uint32_t op = 0;           // index into PlannedTrace::names
  uint32_t tensor = 0;       // index into PlannedTrace::names
  TensorCategory category = TensorCategory::Activation;
};

struct PlannedTrace {
  sim::Trace trace;
  std::vector<EventInfo> info;      // info[i] describes trace.events[i]
  std::vector<std::string> names;   // names[0] == ""
  uint64_t parameter_count = 0;
  ParallelSummary parallel;         // data-parallel facts beyond the schedule (host RAM, offload)
  StepTime step_time;               // how long the step takes on the device (timing/step_time.h)
  // activation_offloading: host memory holding one forward's offloaded tensors (pinned blocks
  // rounded up to a power of two by the host caching allocator); 0 when off.
  uint64_t activation_offload_host_bytes = 0;
};

}  // namespace oomcast::planner
