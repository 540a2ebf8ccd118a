// Which CPU kernel torch 2.13 picks, and what it allocates, where the choice is not CUDA's:
// SDPA with dropout (math, not flash), fp32 1x1 convolutions (the native kernel, not oneDNN) and
// oneDNN's bf16 backward-weights scratch; and a generic div's backward temporaries. Each number
// was measured with validate/capture.py's allocation hook on torch 2.13 CPU, one thread (the
// comments say the probe).
#include <catch2/catch.hpp>

#include <string>

#include "planner/ops/generic_backward_temporaries.h"
#include "planner/ops/op_catalogue.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::OpKind;
using oomcast::scenario::Precision;

namespace {

BuildContext cpu_context(Precision precision, int64_t batch) {
  BuildContext context;
  context.precision = precision_rules(precision);
  context.precision.autocast_device = AutocastDevice::Cpu;
  context.precision.torch_version = 213;
  context.cpu_kernels = true;
  context.torch_version = 213;
  context.training = true;
  context.batch = batch;
  context.attention = AttentionImpl::Flash;  // the CPU default without the scenario's dropout
  return context;
}

bool ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool has_tensor_named(const LayerGraph& graph, const std::string& suffix) {
  for (const TensorDesc& t : graph.tensors) {
    if (ends_with(graph.names[t.name], suffix)) return true;
  }
  return false;
}

// Granite's attention (tiny.json): q [3, 4, 32, 16], k and v [3, 1, 32, 16], enable_gqa, causal.
LayerGraph granite_attention(GraphBuilder& g, double dropout) {
  ops::AttentionShape shape;
  shape.batch = 3;
  shape.heads = 4;
  shape.seq = 32;
  shape.head_dim = 16;
  shape.kv_heads = 1;
  shape.q_contiguous = shape.k_contiguous = shape.v_contiguous = true;
  shape.dropout = dropout;
  TensorId q = g.input("q", 3 * 4 * 32 * 16, DType::Float32);
  TensorId k = g.input("k", 3 * 1 * 32 * 16, DType::Float32);
  TensorId v = g.input("v", 3 * 1 * 32 * 16, DType::Float32);
  for (TensorId t : {q, k, v}) g.mutable_tensor(t).requires_grad = true;
  ops::attention(g, "attn", q, k, v, shape);
  return g.finish();
}

const OpNode* conv_op(const LayerGraph& graph) {
  for (const OpNode& op : graph.ops) {
    if (op.kind == OpKind::Conv) return &op;
  }
  return nullptr;
}

uint64_t transient_bytes(const LayerGraph& graph, const std::vector<Transient>& transients, const std::string& leaf) {
  uint64_t bytes = 0;
  for (const Transient& t : transients) {
    if (ends_with(graph.names[t.name], leaf)) bytes += t.bytes;
  }
  return bytes;
}

}  // namespace

TEST_CASE("an SDPA call with dropout runs the math backend on the CPU, its k and v repeated to q's heads",
          "[planner][ops][cpu_kernels]") {
  // torch._fused_sdp_choice under 2.13 CPU: flash (1) for this call, math (0) with dropout_p 0.1;
  // the math backend's trace: k and v unsqueeze/expand/clone to [3, 4, 32, 16], the scores,
  // softmax, the dropout's noise (saved by its mul).
  GraphBuilder with_dropout(cpu_context(Precision::Fp32, 3));
  const LayerGraph math = granite_attention(with_dropout, 0.1);
  CHECK(has_tensor_named(math, "attn.dropout.noise"));
  CHECK(has_tensor_named(math, "attn.k_repeat"));
  CHECK(has_tensor_named(math, "attn.v_repeat"));
  bool attention_op = false;
  for (const OpNode& op : math.ops) attention_op = attention_op || op.kind == OpKind::Attention;
  CHECK_FALSE(attention_op);
}

TEST_CASE("an SDPA call without dropout stays the CPU flash kernel whatever its scale", "[planner][ops][cpu_kernels]") {
  // Gemma 3 calls SDPA with scale query_pre_attn_scalar**-0.5: the CPU flash kernel takes it.
  GraphBuilder g(cpu_context(Precision::Fp32, 3));
  const LayerGraph flash = granite_attention(g, 0.0);
  bool attention_op = false;
  for (const OpNode& op : flash.ops) attention_op = attention_op || op.kind == OpKind::Attention;
  CHECK(attention_op);
  CHECK_FALSE(has_tensor_named(flash, "attn.k_repeat"));
}

TEST_CASE("a call's own dropout applies only in training", "[planner][ops][cpu_kernels]") {
  BuildContext context = cpu_context(Precision::Fp32, 3);
  context.training = false;
  GraphBuilder g(context);
  const LayerGraph eval = granite_attention(g, 0.1);
  bool attention_op = false;
  for (const OpNode& op : eval.ops) attention_op = attention_op || op.kind == OpKind::Attention;
  CHECK(attention_op);
}

TEST_CASE("an fp32 1x1 convolution with a batch under 16 allocates only its output on the CPU",
          "[planner][ops][cpu_kernels]") {
  // Probe: Conv2d(32, 16, 1) on [4, 32, 40, 40]: forward +409600 (the output) only; backward the
  // grads only. ATen's use_mkldnn keeps a 1x1 stride-1 fp32 conv on the native kernel when
  // single-threaded with a batch under 16.
  GraphBuilder g(cpu_context(Precision::Fp32, 4));
  TensorId x = g.input("x", 4 * 32 * 40 * 40, DType::Float32);
  g.mutable_tensor(x).requires_grad = true;
  int64_t height = 40, width = 40;
  ops::conv2d(g, "skip", x, g.parameter("skip.weight", {16, 32, 1, 1}), g.parameter("skip.bias", {16}),
              ops::ConvShape{32, 16, 1, 1, 0}, &height, &width);
  const LayerGraph graph = g.finish();
  const OpNode* conv = conv_op(graph);
  REQUIRE(conv != nullptr);
  CHECK(conv->forward_transients.empty());
  CHECK(conv->backward_transients.empty());
}

TEST_CASE("the same 1x1 convolution at batch 16 goes through oneDNN's reorders", "[planner][ops][cpu_kernels]") {
  // Probe: batch 16: +3276800 (input reorder) +2048 (weight) +1638400 (output buffer) ...
  GraphBuilder g(cpu_context(Precision::Fp32, 16));
  TensorId x = g.input("x", 16 * 32 * 40 * 40, DType::Float32);
  g.mutable_tensor(x).requires_grad = true;
  int64_t height = 40, width = 40;
  ops::conv2d(g, "skip", x, g.parameter("skip.weight", {16, 32, 1, 1}), g.parameter("skip.bias", {16}),
              ops::ConvShape{32, 16, 1, 1, 0}, &height, &width);
  const LayerGraph graph = g.finish();
  const OpNode* conv = conv_op(graph);
  REQUIRE(conv != nullptr);
  CHECK(transient_bytes(graph, conv->forward_transients, "mkldnn_input") == 3276800);
}

TEST_CASE("a bf16 3x3 convolution's weight gradient takes oneDNN's scratch on the CPU", "[planner][ops][cpu_kernels]") {
  // Probe (bf16 autocast, with bias): Conv2d(64, 64, 3, padding=1) scratch 174,724 B at 8x8 and
  // 426,628 B at 32x32, batch-independent; Conv2d(128, 128, 3, stride=2, padding=1) from 8x8:
  // 627,588 B; without a bias 256 B less.
  struct Case {
    int64_t channels, size, stride;
    bool bias;
    uint64_t scratch;
  };
  // The planned transient carries the grad_input already made beside it (2 x C x H x W bf16).
  for (const Case& c : {Case{64, 8, 1, true, 174724 + 2 * 64 * 8 * 8 * 2}, Case{64, 32, 1, true, 426628 + 2 * 64 * 32 * 32 * 2},
                        Case{128, 8, 2, true, 627588 + 2 * 128 * 8 * 8 * 2}, Case{64, 8, 1, false, 174468 + 2 * 64 * 8 * 8 * 2}}) {
    INFO(c.channels << " channels at " << c.size << ", stride " << c.stride << (c.bias ? "" : ", no bias"));
    GraphBuilder g(cpu_context(Precision::AmpBf16, 2));
    TensorId x = g.input("x", static_cast<uint64_t>(2 * c.channels * c.size * c.size), DType::Float32);
    g.mutable_tensor(x).requires_grad = true;
    int64_t height = c.size, width = c.size;
    const TensorId bias = c.bias ? g.parameter("conv.bias", {c.channels}) : kNoTensor;
    ops::conv2d(g, "conv", x, g.parameter("conv.weight", {c.channels, c.channels, 3, 3}), bias,
                ops::ConvShape{c.channels, c.channels, 3, c.stride, 1}, &height, &width);
    const LayerGraph graph = g.finish();
    const OpNode* conv = conv_op(graph);
    REQUIRE(conv != nullptr);
    CHECK(transient_bytes(graph, conv->backward_transients, "weight_grad_scratch") == c.scratch);
  }
}

TEST_CASE("a generic div whose divisor needs a gradient makes four output-sized temporaries in its backward",
          "[planner][ops][generic]") {
  // Probe: (a / b).backward() with a [8, 64] and b [8, 1] both requiring grad: +2048 four times,
  // three freed, then a's gradient and b's reduced one; a divisor without grad: the gradient only.
  GraphBuilder g(cpu_context(Precision::Fp32, 8));
  TensorId a = g.input("a", 8 * 64, DType::Float32);
  TensorId b = g.input("b", 8, DType::Float32);
  TensorId out = g.activation("div.out", 8 * 64, DType::Float32);
  const auto both = ops::generic_backward_temporaries(g, "div", "div", {a, b}, {out}, {GradRule::New, GradRule::New});
  CHECK(both.size() == 4);
  for (const Transient& t : both) CHECK(t.bytes == 2048);
  CHECK(ops::generic_backward_temporaries(g, "div", "div", {a, b}, {out}, {GradRule::New, GradRule::None}).empty());
  CHECK(ops::generic_backward_temporaries(g, "mul", "mul", {a, b}, {out}, {GradRule::New, GradRule::New}).empty());
}
