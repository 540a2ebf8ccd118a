// The layer graph a scenario's training step plans, written out as a graph file
// (docs/graph-format.md): `oomcast export-graph`. The file is concrete: it carries the sizes,
// dtypes, attention kernels, dropout and trainable subset the scenario builds the model with,
// so planning it under the same scenario (with `model:` naming the file) gives the same schedule.
#pragma once

#include <string>

#include "scenario/scenario.h"

namespace oomcast::planner {

std::string export_scenario_graph(const scenario::Scenario& scenario, const std::string& graph_name);

}  // namespace oomcast::planner
