// Reads the scenario's `cuda_graphs` list (scenario/cuda_graphs_config.h).
#pragma once

#include "scenario/scenario.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

// cuda_graphs: [{name, phase: decode | forward, batch_sizes: [...], share_pool: true}].
// Needs the job section already read: `decode` graphs belong to a generate job with a static
// cache (a captured graph has fixed shapes), `forward` graphs to an inference job; nothing
// is captured on the cpu.
void read_cuda_graphs_section(const YamlNode& node, Scenario& scenario);

}  // namespace oomcast::scenario
