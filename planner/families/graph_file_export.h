// Writes a built LayerGraph back out as a graph file (docs/graph-format.md) of generic ops only:
// every op with its concrete sizes, dtypes, views, saved tensors, gradient rules, temporaries,
// frames (scope_end ops) and checkpoint units. The export is concrete (the sizes and precision
// the graph was built with, no symbolic shapes), so it plans like the original only at those
// settings; it exists to check that generic ops carry everything the catalogue models.
#pragma once

#include <cstdint>
#include <string>

#include "planner/layer_graph.h"

namespace oomcast::planner::families {

// The scenario size the graph was built at, declared under `sizes:` (default and max) so that a
// scenario giving it (`seq_len:`, or `image_size:` for a vision model) accepts the file. A
// scenario asking for another size still plans the exported shapes: the file says what it was
// built for in its header.
struct ExportedSize {
  std::string key;        // "seq_len" or "image_size"; empty: no sizes section
  int64_t value = 0;
  std::string built_for;  // one line for the header, e.g. "batch_size 4, seq_len 1024, amp_bf16"
};

std::string export_graph_file(const LayerGraph& graph, const std::string& name, const ExportedSize& size = {});

}  // namespace oomcast::planner::families
