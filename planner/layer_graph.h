// LayerGraph: a model's forward pass as a DAG of ops over tensors with concrete sizes and
// dtypes (shapes resolved from the scenario), plus what each op saves for backward and how
// its backward allocates. ExecutionOrder derives the run order and last uses from the graph.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "planner/precision.h"
#include "scenario/op_kind.h"

namespace oomcast::planner {

using TensorId = uint32_t;
constexpr TensorId kNoTensor = UINT32_MAX;

enum class TensorRole : uint8_t { Activation, Parameter, Buffer, Input, AutocastWeight };

struct TensorDesc {
  uint32_t name = 0;             // index into LayerGraph::names
  uint64_t numel = 0;
  DType dtype = DType::Float32;
  TensorRole role = TensorRole::Activation;
  TensorId storage = kNoTensor;  // the tensor that owns the storage: itself, or a view's base
  bool requires_grad = false;
  int32_t parameter = -1;        // index into LayerGraph::parameters for parameters
  uint64_t bytes() const { return numel * dtype_bytes(dtype); }
  bool owns_storage(TensorId self) const { return storage == self; }
};

// How a backward node produces the gradient of one of its inputs.
enum class GradRule : uint8_t {
  None,         // no gradient flows to this input (indices, masks, running stats)
  New,          // a fresh tensor the size of the input (mm, gelu_backward, casts, split cat)
  PassThrough,  // the gradient of output 0 itself (add, views): no allocation
};

// A kernel-internal tensor: allocated while the op runs and freed before it returns.
struct Transient {
  uint32_t name = 0;
  uint64_t bytes = 0;
  bool after_outputs = false;  // allocated after the op's outputs (else before them)
  // Allocated before the outputs and freed before they are made (oneDNN's reorders of the input
  // and weight); the others live until the op returns.
  bool dies_before_outputs = false;
};

// One step of a backward written out in order (a compiled graph's backward: its buffers, the
// saved tensors it drops as it goes, the gradients it returns), run in place of the grad rules.
struct BackwardStep {
  enum class Kind : uint8_t {
    Alloc,              // buffer `index` of `bytes` (named `name`)
    Free,               // buffer `index`
    ReleaseSaved,       // saved[index] dropped
    ReleaseGradOutput,  // the incoming gradient dropped
    Grad,               // the gradient of inputs[index], allocated now, delivered when the node returns
  };
  Kind kind = Kind::Alloc;
  uint32_t index = 0;
  uint32_t name = 0;
  uint64_t bytes = 0;
};

struct OpNode {
  scenario::OpKind kind = scenario::OpKind::View;
  uint32_t name = 0;                       // module path plus op, e.g. "h.3.attn.c_attn"
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  std::vector<TensorId> saved;             // what autograd keeps (guards already applied)
  std::vector<GradRule> input_grads;       // parallel to inputs
  std::vector<Transient> forward_transients;
  std::vector<Transient> backward_transients;
  std::vector<BackwardStep> backward_program;  // when non-empty: the backward, instead of input_grads
  int32_t unit = -1;                       // checkpoint unit (a block), -1 outside any
  bool records_grad_node = false;          // grad mode on and some input requires grad
  bool uses_cublas = false;                // a cuBLAS GEMM (creates the workspace on first use)
  // Floating-point operations of the forward kernel when the op is a matmul-class op (linear,
  // bmm, conv, fused attention); 0 for ops bound by the bytes they move (planner/timing/op_cost.h).
  double forward_flops = 0.0;
};

// A tensor the model's constructor allocates and drops before it returns, such as the template
// layer nn.TransformerEncoder deep-copies num_layers times, or the untied lm_head weight that
// weight tying replaces. Built where the model is built: after the first `after_parameters`
// parameters, freed once all of them exist.
struct ConstructionTemporary {
  uint32_t name = 0;
  uint64_t numel = 0;
  std::optional<DType> dtype;  // nullopt: the dtype the parameters are built in
  size_t after_parameters = 0;
};

struct LayerGraph {
  std::vector<std::string> names;          // names[0] == ""
  std::vector<TensorDesc> tensors;
  std::vector<OpNode> ops;                 // creation order (= autograd sequence numbers)
  std::vector<TensorId> parameters;        // model.parameters() order; tied weights once
  std::vector<std::vector<int64_t>> parameter_shapes;
  std::vector<TensorId> buffers;           // persistent buffers (BN running stats, masks)
  std::vector<ConstructionTemporary> construction_temporaries;
  // Index in `parameters` of the first LoRA adapter weight (added after the model is built);
  // parameters.size() or more when there is none.
  size_t first_adapter_parameter = SIZE_MAX;
  std::vector<TensorId> inputs;            // the batch tensors of one micro-batch
  std::map<std::string, TensorId> named_outputs;  // "loss", "logits", ...
  TensorId loss = kNoTensor;
  int32_t num_units = 0;
  // Per unit: how the model's own code checkpoints it (torch.utils.checkpoint called inside
  // forward, a graph file's `checkpoint:`), whatever the scenario's checkpointing says.
  enum class ModelCheckpoint : uint8_t { None, NonReentrant, Reentrant };
  std::vector<ModelCheckpoint> unit_model_checkpoint;
  // Per block unit that attends with a KV cache: the K and V its DynamicCache.update appends
  // (key_cache.append(key_states) keeps these tensors, views included, so their storages).
  struct CachedKeyValue {
    int32_t unit = -1;
    TensorId key = kNoTensor;
    TensorId value = kNoTensor;
  };
  std::vector<CachedKeyValue> kv_cache_entries;

  uint64_t parameter_count() const;
  // Whether parameter `parameter` (an index into `parameters`) is trained (requires_grad).
  bool parameter_requires_grad(int32_t parameter) const {
    return tensors[parameters[static_cast<size_t>(parameter)]].requires_grad;
  }
};

// The order the forward runs in and when each tensor's last forward use happens.
struct ExecutionOrder {
  std::vector<uint32_t> order;        // op indices, a topological order of the graph
  std::vector<int32_t> position;      // op index -> position in `order`
  std::vector<int32_t> last_use;      // tensor -> position of its last consumer; -1 if none
};

// Builds the Boost.Graph DAG (an edge producer -> consumer per tensor use) and orders it
// topologically, breaking ties by creation order so the result is the program order.
// Throws std::logic_error if the graph has a cycle (a family bug, not bad input).
ExecutionOrder compute_execution_order(const LayerGraph& graph);

// Per graph input: whether an op's grad node saved it (linear's input, conv's images,
// nll_loss's targets, embedding's ids). A graph the caller keeps alive keeps these alive too.
std::vector<uint8_t> inputs_saved_by_graph(const LayerGraph& graph);

}  // namespace oomcast::planner
