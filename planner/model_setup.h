// The setup phase: how the model's parameters and buffers get onto the device (built there
// at their dtype, or built in fp32 and then converted with .to(dtype) / .half()), and the
// graph-building context a scenario implies.
#pragma once

#include "planner/layer_graph.h"
#include "planner/ops/graph_builder.h"
#include "planner/schedule_writer.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// What the scenario's forward looks like to the families: precision (with the job's weight
// format), attention, dropout, sizes, the job's trainable subset and adapters.
BuildContext scenario_build_context(const scenario::Scenario& scenario, int64_t seq_len, bool training, bool grad_enabled);

// Allocates every parameter (unless `parameters` is false: a data-parallel engine places
// them) and then every buffer, as the scenario's loading method does it.
void allocate_model(const scenario::Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer, bool parameters);

}  // namespace oomcast::planner
