// Tests for what autograd saves where PyTorch releases differ, and for the additive attention
// mask of Hugging Face's eager BERT (the rules scripts/memory_published.py checks against
// published V100 measurements).
#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/families/families.h"
#include "planner/ops/op_catalogue.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::OpKind;
using oomcast::scenario::Precision;

namespace {

BuildContext context_for(Precision precision, AttentionImpl attention, int torch_version) {
  BuildContext context;
  context.precision = precision_rules(precision);
  context.attention = attention;
  context.batch = 2;
  context.seq_len = 16;
  context.torch_version = torch_version;
  return context;
}

bool saves(const OpNode& op, TensorId tensor) {
  return std::find(op.saved.begin(), op.saved.end(), tensor) != op.saved.end();
}

// softmax of a tensor that requires grad (scaled by a parameter first); returns its input.
TensorId softmax_of_trainable_input(GraphBuilder& g) {
  TensorId scale = g.parameter("scale", {100});
  TensorId scaled = ops::mul(g, "scale", g.input("x", 100, DType::Float32), scale);
  ops::softmax(g, "softmax", scaled);
  return scaled;
}

const OpNode& last_op_of_kind(const LayerGraph& graph, OpKind kind) {
  auto found = std::find_if(graph.ops.rbegin(), graph.ops.rend(), [&](const OpNode& op) { return op.kind == kind; });
  REQUIRE(found != graph.ops.rend());
  return *found;
}

LayerGraph tiny_bert(Precision precision, AttentionImpl attention) {
  GraphBuilder g(context_for(precision, attention, 206));
  families::build_bert(g, oomcast::scenario::testing::inline_model("bert", {{"layers", 1}, {"hidden", 32}, {"heads", 2}, {"ffn_hidden", 64},
                                                         {"vocab", 64}, {"max_positions", 16}, {"type_vocab", 2},
                                                         {"num_labels", 2}}));
  return g.finish();
}

}  // namespace

TEST_CASE("before torch 1.11 softmax saves its input as well as its result", "[planner][ops][torch_version]") {
  GraphBuilder g(context_for(Precision::Fp32, AttentionImpl::Eager, 110));
  TensorId input = softmax_of_trainable_input(g);
  LayerGraph graph = g.finish();
  const OpNode& softmax = last_op_of_kind(graph, OpKind::Softmax);
  CHECK(saves(softmax, input));
  CHECK(saves(softmax, softmax.outputs.front()));
}

TEST_CASE("from torch 1.11 softmax saves only its result", "[planner][ops][torch_version]") {
  GraphBuilder g(context_for(Precision::Fp32, AttentionImpl::Eager, 111));
  TensorId input = softmax_of_trainable_input(g);
  LayerGraph graph = g.finish();
  const OpNode& softmax = last_op_of_kind(graph, OpKind::Softmax);
  CHECK_FALSE(saves(softmax, input));
  CHECK(softmax.saved.size() == 1);
}

TEST_CASE("before torch 1.11 the cross-entropy's log_softmax keeps the logits alive", "[planner][ops][torch_version]") {
  GraphBuilder g(context_for(Precision::Fp32, AttentionImpl::Eager, 110));
  TensorId scale = g.parameter("scale", {40});
  TensorId logits = ops::mul(g, "scale", g.input("x", 40, DType::Float32), scale);
  ops::cross_entropy(g, "loss", logits, g.input("targets", 4, DType::Int64), 10);
  LayerGraph graph = g.finish();
  CHECK(saves(last_op_of_kind(graph, OpKind::LogSoftmax), logits));
}

TEST_CASE("BERT's eager attention under fp16 autocast runs its softmax on fp32 scores", "[planner][ops][bert]") {
  // fp16 scores + the fp32 extended attention mask promote to fp32 (HF get_extended_attention_mask
  // builds the mask in the parameters' dtype).
  LayerGraph graph = tiny_bert(Precision::AmpFp16, AttentionImpl::Eager);
  const OpNode& softmax = last_op_of_kind(graph, OpKind::Softmax);
  CHECK(graph.tensors[softmax.inputs.front()].dtype == DType::Float32);
}

TEST_CASE("BERT's eager attention in fp32 adds the mask without changing what is saved", "[planner][ops][bert]") {
  LayerGraph graph = tiny_bert(Precision::Fp32, AttentionImpl::Eager);
  const OpNode& softmax = last_op_of_kind(graph, OpKind::Softmax);
  CHECK(graph.tensors[softmax.inputs.front()].dtype == DType::Float32);
  CHECK(softmax.saved.size() == 1);
}
