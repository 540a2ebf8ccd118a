// Which parameters each op reads, grouped the way engines gather them: per module (DeepSpeed
// ZeRO-3 fetches each submodule's own parameters) or per wrapped unit (FSDP's auto-wrap on
// decoder/encoder blocks, with the root holding everything outside a block).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/layer_graph.h"

namespace oomcast::planner {

struct ParameterUses {
  std::vector<std::vector<int32_t>> params_of_op;   // per op: distinct parameters it reads
  std::vector<uint32_t> ops_with_params;             // ops that read parameters, in program order
  uint64_t largest_module_numel = 0;                 // the most parameter elements one op reads
};

ParameterUses parameter_uses(const LayerGraph& graph);

// FSDP units: unit u (0..num_units-1) is block u; the last group is the root (parameters no
// block uses). A parameter belongs to the unit of the first op that reads it.
struct UnitGroups {
  std::vector<std::vector<int32_t>> params;   // per group
  std::vector<uint64_t> numel;                // per group
  std::vector<int32_t> group_of_param;
  std::vector<int32_t> first_op;              // per group: first op of the unit (forward), -1 for the root
  std::vector<int32_t> last_op;               // per group: last op of the unit
  int32_t root = 0;                           // index of the root group
  uint64_t largest_numel() const;
};

// `wrap_blocks` false puts every parameter in the root (no auto-wrap policy).
UnitGroups unit_groups(const LayerGraph& graph, const ParameterUses& uses, bool wrap_blocks);

}  // namespace oomcast::planner
