// Parameter-use tables built once per graph. Ops run in creation order (the runner's
// execution order breaks ties by creation order), so op index order is program order.
#include "planner/parallel/parameter_groups.h"

#include <algorithm>

namespace oomcast::planner {

ParameterUses parameter_uses(const LayerGraph& graph) {
  ParameterUses uses;
  uses.params_of_op.resize(graph.ops.size());
  for (uint32_t op = 0; op < graph.ops.size(); ++op) {
    std::vector<int32_t>& params = uses.params_of_op[op];
    for (TensorId input : graph.ops[op].inputs) {
      int32_t parameter = graph.tensors[graph.tensors[input].storage].parameter;
      if (parameter >= 0 && std::find(params.begin(), params.end(), parameter) == params.end()) {
        params.push_back(parameter);
      }
    }
    if (params.empty()) continue;
    uses.ops_with_params.push_back(op);
    uint64_t numel = 0;
    for (int32_t parameter : params) numel += graph.tensors[graph.parameters[static_cast<size_t>(parameter)]].numel;
    uses.largest_module_numel = std::max(uses.largest_module_numel, numel);
  }
  return uses;
}

uint64_t UnitGroups::largest_numel() const {
  uint64_t largest = 0;
  for (uint64_t n : numel) largest = std::max(largest, n);
  return largest;
}

UnitGroups unit_groups(const LayerGraph& graph, const ParameterUses& uses, bool wrap_blocks) {
  UnitGroups groups;
  const int32_t units = wrap_blocks ? graph.num_units : 0;
  groups.root = units;
  groups.params.resize(static_cast<size_t>(units) + 1);
  groups.numel.assign(static_cast<size_t>(units) + 1, 0);
  groups.first_op.assign(static_cast<size_t>(units) + 1, -1);
  groups.last_op.assign(static_cast<size_t>(units) + 1, -1);
  groups.group_of_param.assign(graph.parameters.size(), -1);
  for (uint32_t op = 0; op < graph.ops.size(); ++op) {
    int32_t unit = wrap_blocks ? graph.ops[op].unit : -1;
    if (unit >= 0) {
      if (groups.first_op[static_cast<size_t>(unit)] < 0) groups.first_op[static_cast<size_t>(unit)] = static_cast<int32_t>(op);
      groups.last_op[static_cast<size_t>(unit)] = static_cast<int32_t>(op);
    }
    for (int32_t parameter : uses.params_of_op[op]) {
      if (groups.group_of_param[static_cast<size_t>(parameter)] >= 0) continue;
      int32_t group = unit >= 0 ? unit : groups.root;
      groups.group_of_param[static_cast<size_t>(parameter)] = group;
      groups.params[static_cast<size_t>(group)].push_back(parameter);
      groups.numel[static_cast<size_t>(group)] += graph.tensors[graph.parameters[static_cast<size_t>(parameter)]].numel;
    }
  }
  // Parameters no op reads still live in the root's flat parameter.
  for (size_t p = 0; p < graph.parameters.size(); ++p) {
    if (groups.group_of_param[p] >= 0) continue;
    groups.group_of_param[p] = groups.root;
    groups.params[static_cast<size_t>(groups.root)].push_back(static_cast<int32_t>(p));
    groups.numel[static_cast<size_t>(groups.root)] += graph.tensors[graph.parameters[p]].numel;
  }
  return groups;
}

}  // namespace oomcast::planner
