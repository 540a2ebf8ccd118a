// Writes a built LayerGraph back out as a graph file (docs/graph-format.md) of generic ops only:
// every op with its concrete sizes, dtypes, views, saved tensors, gradient rules, temporaries,
// frames (scope_end ops) and checkpoint units. The export is concrete (the sizes and precision
// the graph was built with, no symbolic shapes), so it plans like the original only at those
// settings; it exists to check that generic ops carry everything the catalogue models.
#pragma once

#include <string>

#include "planner/layer_graph.h"

namespace oomcast::planner::families {

std::string export_graph_file(const LayerGraph& graph, const std::string& name);

}  // namespace oomcast::planner::families
