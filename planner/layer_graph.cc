// LayerGraph helpers and the Boost.Graph DAG that gives execution order and last uses.
#include "planner/layer_graph.h"

#include <boost/graph/adjacency_list.hpp>
#include <functional>
#include <queue>
#include <stdexcept>

namespace oomcast::planner {

namespace {

// Edge property: which tensor flows along the edge.
struct TensorEdge {
  TensorId tensor = kNoTensor;
};
using OpDag = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS,
                                    boost::no_property, TensorEdge>;

}  // namespace

uint64_t LayerGraph::parameter_count() const {
  uint64_t total = 0;
  // From the shapes: a quantized weight's storage holds fewer elements than the weight has.
  for (size_t p = 0; p < parameters.size(); ++p) {
    if (p >= parameter_shapes.size()) {
      total += tensors[parameters[p]].numel;
      continue;
    }
    uint64_t numel = 1;
    for (int64_t dim : parameter_shapes[p]) numel *= static_cast<uint64_t>(dim);
    total += numel;
  }
  return total;
}

ExecutionOrder compute_execution_order(const LayerGraph& graph) {
  const size_t num_ops = graph.ops.size();
  // The producer of each tensor; parameters, buffers and inputs have none.
  std::vector<int64_t> producer(graph.tensors.size(), -1);
  for (size_t op = 0; op < num_ops; ++op) {
    for (TensorId out : graph.ops[op].outputs) producer[out] = static_cast<int64_t>(op);
  }

  OpDag dag(num_ops);
  for (size_t op = 0; op < num_ops; ++op) {
    for (TensorId in : graph.ops[op].inputs) {
      if (producer[in] >= 0) boost::add_edge(static_cast<size_t>(producer[in]), op, TensorEdge{in}, dag);
    }
  }

  // Kahn's algorithm with the smallest creation index first: any topological order is a
  // valid execution, and this one is the order the Python program ran the ops in.
  std::vector<size_t> pending_inputs(num_ops);
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t op = 0; op < num_ops; ++op) {
    pending_inputs[op] = boost::in_degree(op, dag);
    if (pending_inputs[op] == 0) ready.push(op);
  }
  ExecutionOrder result;
  result.order.reserve(num_ops);
  result.position.assign(num_ops, -1);
  while (!ready.empty()) {
    size_t op = ready.top();
    ready.pop();
    result.position[op] = static_cast<int32_t>(result.order.size());
    result.order.push_back(static_cast<uint32_t>(op));
    for (auto [edge, end] = boost::out_edges(op, dag); edge != end; ++edge) {
      size_t consumer = boost::target(*edge, dag);
      if (--pending_inputs[consumer] == 0) ready.push(consumer);
    }
  }
  if (result.order.size() != num_ops) throw std::logic_error("layer graph has a cycle");

  // Last forward use of each tensor: the latest consumer along the graph's edges. Tensors
  // with no producer (parameters, inputs) are consumed through edge-less inputs, so they
  // are read from the op input lists.
  result.last_use.assign(graph.tensors.size(), -1);
  for (size_t op = 0; op < num_ops; ++op) {
    for (auto [edge, end] = boost::in_edges(op, dag); edge != end; ++edge) {
      TensorId tensor = dag[*edge].tensor;
      result.last_use[tensor] = std::max(result.last_use[tensor], result.position[op]);
    }
    for (TensorId in : graph.ops[op].inputs) {
      if (producer[in] < 0) result.last_use[in] = std::max(result.last_use[in], result.position[op]);
    }
  }
  return result;
}

std::vector<uint8_t> inputs_saved_by_graph(const LayerGraph& graph) {
  std::vector<uint8_t> saved_input(graph.inputs.size(), 0);
  for (const OpNode& op : graph.ops) {
    if (!op.records_grad_node) continue;
    for (TensorId saved : op.saved) {
      for (size_t i = 0; i < graph.inputs.size(); ++i) {
        if (graph.tensors[saved].storage == graph.tensors[graph.inputs[i]].storage) saved_input[i] = 1;
      }
    }
  }
  return saved_input;
}

}  // namespace oomcast::planner
