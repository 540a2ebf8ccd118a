// F.scaled_dot_product_attention with an attn_mask, as the capture writes it (the graph file's
// `attention` op with `attn_mask:`): which kernel runs it on each device kind and what that
// kernel keeps (the CPU flash kernel and CUDA's memory-efficient one take the mask; CUDA's
// flash kernel refuses it), and a result left in SDPA's own [b, heads, s, d] (`heads_first`).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "planner/jobs/training_job.h"
#include "scenario/scenario_loader.h"

using namespace oomcast::planner;
using oomcast::scenario::OpKind;
using oomcast::scenario::Scenario;
using oomcast::scenario::load_scenario_text;

namespace {

constexpr uint64_t kBatch = 2, kHeads = 4, kSeq = 20;

// One block: q, k, v as head-split views of a linear's output, one SDPA call with `mask_line`'s
// mask (a bool [s, s] built in forward, or a float [1, heads, s, s] buffer), the result summed.
std::string masked_graph(const std::string& mask, bool heads_first) {
  std::string text = R"(oomcast_graph: 1
name: masked_sdpa
torch_version: "2.13"
sizes: {seq_len: {default: 20}}
parameters:
  - {name: embed.weight, shape: [16, 32]}
  - {name: qkv.weight, shape: [96, 32]}
  - {name: head.weight, shape: [16, 32]}
buffers:
  - {name: bias, shape: [1, 4, 20, 20], dtype: param}
inputs:
  - {name: ids, shape: [batch_size, seq_len], dtype: int64}
  - {name: target, shape: [batch_size, seq_len], dtype: int64}
forward:
  - {op: generic, name: ones, aten: ones, inputs: [], outputs: [{name: ones, shape: [seq_len, seq_len], dtype: bool}], grads: []}
  - {op: generic, name: tril, aten: tril, inputs: [ones], outputs: [{name: causal, shape: [seq_len, seq_len], dtype: bool}], grads: [none]}
  - {op: embedding, name: embed, indices: ids, weight: embed.weight, out: x}
  - {op: linear, name: qkv, x: x, weight: qkv.weight, out: qkv}
  - {op: split, name: split, x: qkv, pieces: 3, dim: 2, out: [q0, k0, v0]}
  - {op: generic, name: q_view, aten: view, inputs: [q0], outputs: [{name: q1, shape: [batch_size, seq_len, 4, 8], view_of: q0}], grads: [pass]}
  - {op: generic, name: q_t, aten: transpose.int, inputs: [q1], outputs: [{name: q, shape: [batch_size, 4, seq_len, 8], view_of: q1}], grads: [pass]}
  - {op: generic, name: k_view, aten: view, inputs: [k0], outputs: [{name: k1, shape: [batch_size, seq_len, 4, 8], view_of: k0}], grads: [pass]}
  - {op: generic, name: k_t, aten: transpose.int, inputs: [k1], outputs: [{name: k, shape: [batch_size, 4, seq_len, 8], view_of: k1}], grads: [pass]}
  - {op: generic, name: v_view, aten: view, inputs: [v0], outputs: [{name: v1, shape: [batch_size, seq_len, 4, 8], view_of: v0}], grads: [pass]}
  - {op: generic, name: v_t, aten: transpose.int, inputs: [v1], outputs: [{name: v, shape: [batch_size, 4, seq_len, 8], view_of: v1}], grads: [pass]}
)";
  if (heads_first) {
    text += "  - {op: attention, name: attention, q: q, k: k, v: v, causal: false, attn_mask: " + mask +
            ", heads_first: true, out: y4}\n"
            "  - {op: generic, name: y_t, aten: transpose.int, inputs: [y4], outputs: [{name: y5, shape: [batch_size, seq_len, 4, 8], view_of: y4}], grads: [pass]}\n"
            "  - {op: copy, name: y_copy, x: y5, out: y6}\n"
            "  - {op: generic, name: y_view, aten: view, inputs: [y6], outputs: [{name: y, shape: [batch_size, seq_len, 32], view_of: y6}], grads: [pass]}\n";
  } else {
    text += "  - {op: attention, name: attention, q: q, k: k, v: v, causal: false, attn_mask: " + mask + ", out: y}\n";
  }
  text += R"(  - {op: linear, name: head, x: y, weight: head.weight, out: logits}
  - {op: generic, name: flat, aten: view, inputs: [logits], outputs: [{name: flat_logits, shape: ["batch_size*seq_len", 16], view_of: logits}], grads: [pass]}
  - {op: generic, name: flat_t, aten: view, inputs: [target], outputs: [{name: flat_target, shape: ["batch_size*seq_len"], view_of: target}], grads: [none]}
  - {op: cross_entropy, name: loss, logits: flat_logits, targets: flat_target, out: loss}
outputs: {loss: loss, logits: logits}
)";
  return text;
}

Scenario masked_scenario(const std::string& mask, bool heads_first, const std::string& settings) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("masked_sdpa_" + mask + (heads_first ? "_hf" : "") + ".graph.yaml")).string();
  std::ofstream(path) << masked_graph(mask, heads_first);
  return load_scenario_text("model: " + path + "\nbatch_size: 2\nseq_len: 20\niterations: 1\n" + settings, "s.yaml");
}

const OpNode& attention_op(const LayerGraph& graph) {
  auto found = std::find_if(graph.ops.begin(), graph.ops.end(), [](const OpNode& op) { return op.kind == OpKind::Attention; });
  REQUIRE(found != graph.ops.end());
  return *found;
}

bool has_tensor_of_numel(const LayerGraph& graph, uint64_t numel) {
  return std::any_of(graph.tensors.begin(), graph.tensors.end(), [&](const TensorDesc& t) { return t.numel == numel; });
}

bool saves_numel(const LayerGraph& graph, const OpNode& op, uint64_t numel, DType dtype) {
  return std::any_of(op.saved.begin(), op.saved.end(), [&](TensorId t) {
    return graph.tensors[t].numel == numel && graph.tensors[t].dtype == dtype;
  });
}

const uint64_t kScores = kBatch * kHeads * kSeq * kSeq;

}  // namespace

TEST_CASE("a masked SDPA call on the CPU runs the flash kernel, which saves the mask converted to q's dtype and no scores",
          "[graph_file][attention]") {
  LayerGraph graph = build_training_graph(masked_scenario("causal", false, "device: cpu\n"));
  const OpNode& op = attention_op(graph);
  CHECK(saves_numel(graph, op, kSeq * kSeq, DType::Float32));  // where(mask, 0, -inf), one per call
  CHECK(saves_numel(graph, op, kBatch * kHeads * kSeq, DType::Float32));  // logsumexp
  CHECK_FALSE(has_tensor_of_numel(graph, kScores));
}

TEST_CASE("a float attn_mask reaches the CPU flash kernel as it is and is saved", "[graph_file][attention]") {
  LayerGraph graph = build_training_graph(masked_scenario("bias", false, "device: cpu\n"));
  const OpNode& op = attention_op(graph);
  REQUIRE(op.inputs.size() == 4);
  CHECK(graph.tensors[op.inputs[3]].role == TensorRole::Buffer);
  CHECK(std::find(op.saved.begin(), op.saved.end(), op.inputs[3]) != op.saved.end());
}

TEST_CASE("CUDA's flash kernel refuses a mask: the call runs the memory-efficient kernel with the mask padded to 16 columns",
          "[graph_file][attention]") {
  LayerGraph graph = build_training_graph(
      masked_scenario("causal", false, "device: a100-80gb\nprecision: amp_bf16\nattention: flash\n"));
  const OpNode& op = attention_op(graph);
  // the memory-efficient kernel's philox seed and offset, no flash rng_state
  CHECK(op.outputs.size() == 4);
  CHECK(saves_numel(graph, op, kSeq * 32, DType::BFloat16));  // 20 columns padded to 32
  CHECK_FALSE(has_tensor_of_numel(graph, kScores));
}

TEST_CASE("a masked call under the math backend adds the mask into the scores without another score-sized tensor",
          "[graph_file][attention]") {
  LayerGraph graph = build_training_graph(masked_scenario("causal", false, "device: cpu\nattention: sdpa_math\n"));
  size_t score_sized = 0;
  for (const TensorDesc& t : graph.tensors) score_sized += t.numel == kScores ? 1 : 0;
  // fp32: the scores (bmm, the mask added in place) and the softmax result, as without a mask
  CHECK(score_sized == 2);
}

TEST_CASE("an attention op with heads_first gives SDPA's [b, heads, s, d] result without the transpose copy",
          "[graph_file][attention]") {
  LayerGraph folded = build_training_graph(masked_scenario("causal", false, "device: cpu\nattention: sdpa_math\n"));
  LayerGraph heads_first = build_training_graph(masked_scenario("causal", true, "device: cpu\nattention: sdpa_math\n"));
  auto copies = [](const LayerGraph& graph) {
    return std::count_if(graph.ops.begin(), graph.ops.end(), [&](const OpNode& op) {
      return graph.names[op.name].find("transpose_contiguous") != std::string::npos;
    });
  };
  CHECK(copies(folded) == 1);
  CHECK(copies(heads_first) == 0);  // the graph's own y_copy follows instead
}
