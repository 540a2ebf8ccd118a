// Which saved tensors are offloaded (planner/activation_offload.h).
//
// torch.autograd.graph.save_on_cpu (torch 2.13 torch/autograd/graph.py): its pack hook copies
// every tensor autograd saves to the host, parameters included; its unpack hook copies it back
// with .to(device). torchtune's OffloadActivations (torchtune/training/_activation_offloading.py,
// pack_tensor) copies a tensor of at least min_offload_size bytes (element_size * nelement)
// that is not an nn.Parameter or nn.Buffer object. A linear's weight is saved as weight.t() (a
// view, so not a Parameter object: offloaded); a norm's or a convolution's weight is saved as
// the Parameter itself (kept). torchtune's recipes run the output head under NoOpManager
// (get_act_offloading_ctx_manager) and the loss outside the context: nothing from the head on
// is offloaded.
#include "planner/activation_offload.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <string>

namespace oomcast::planner {

namespace {

// The execution position of the output head's first op (the op that makes the "logits"
// output, or the first op named lm_head...); INT32_MAX when the graph has neither.
int32_t output_head_position(const LayerGraph& graph, const ExecutionOrder& order) {
  int32_t head = std::numeric_limits<int32_t>::max();
  for (uint32_t op = 0; op < graph.ops.size(); ++op) {
    const std::string& name = graph.names[graph.ops[op].name];
    if (name == "lm_head" || name.rfind("lm_head.", 0) == 0) head = std::min(head, order.position[op]);
  }
  if (head != std::numeric_limits<int32_t>::max()) return head;
  auto logits = graph.named_outputs.find("logits");
  if (logits == graph.named_outputs.end()) return head;
  for (uint32_t op = 0; op < graph.ops.size(); ++op) {
    for (TensorId out : graph.ops[op].outputs) {
      if (out == logits->second) head = std::min(head, order.position[op]);
    }
  }
  return head;
}

// torchtune's pack_tensor test of "a Parameter or Buffer object": what the op hands to
// autograd is the module's tensor itself, not a view of it.
bool saved_as_module_tensor(const LayerGraph& graph, const OpNode& op, TensorId saved) {
  const TensorRole role = graph.tensors[saved].role;
  if (role != TensorRole::Parameter && role != TensorRole::Buffer) return false;
  return op.kind != scenario::OpKind::Linear;  // F.linear saves weight.t()
}

}  // namespace

uint64_t plan_activation_offload(const LayerGraph& graph, const ExecutionOrder& order,
                                 const scenario::ActivationOffloadConfig& config, CheckpointPlan* plan) {
  plan->saved_offloaded.clear();
  if (!config.enabled) return 0;
  const bool torchtune = config.method == scenario::OffloadMethod::Torchtune;
  const int32_t head = torchtune ? output_head_position(graph, order) : std::numeric_limits<int32_t>::max();
  uint64_t host_bytes = 0;
  plan->saved_offloaded.resize(graph.ops.size());
  for (uint32_t op_index = 0; op_index < graph.ops.size(); ++op_index) {
    const OpNode& op = graph.ops[op_index];
    std::vector<uint8_t>& offloaded = plan->saved_offloaded[op_index];
    offloaded.assign(op.saved.size(), 0);
    if (!op.records_grad_node || order.position[op_index] >= head) continue;
    for (size_t i = 0; i < op.saved.size(); ++i) {
      if (!plan->saved_dropped.empty() && plan->saved_dropped[op_index][i]) continue;
      const uint64_t bytes = graph.tensors[op.saved[i]].bytes();
      if (bytes == 0 || bytes < static_cast<uint64_t>(config.min_offload_bytes)) continue;
      if (torchtune && saved_as_module_tensor(graph, op, op.saved[i])) continue;
      offloaded[i] = 1;
      // The host caching allocator (ATen CachingHostAllocator) rounds a pinned block up to a power of two.
      host_bytes += config.pin_memory ? std::bit_ceil(bytes) : bytes;
    }
  }
  return host_bytes;
}

}  // namespace oomcast::planner
