// The table of graph-file ops: argument and option names of each catalogue op.
#include "scenario/graph_op_table.h"

namespace oomcast::scenario::graph {

const std::vector<CatalogueOpSpec>& catalogue_op_specs() {
  using T = OptionType;
  static const std::vector<CatalogueOpSpec> specs = {
      {"linear", CatalogueOp::Linear, {{"x", false}, {"weight", false}, {"bias", true}}, {{"copy_input", T::Flag, false}}, false},
      {"embedding", CatalogueOp::Embedding, {{"indices", false}, {"weight", false}}, {}, false},
      {"layer_norm", CatalogueOp::LayerNorm, {{"x", false}, {"weight", false}, {"bias", true}},
       {{"noncontiguous_input", T::Flag, false}}, false},
      {"rms_norm", CatalogueOp::RmsNorm, {{"x", false}, {"weight", false}}, {}, false},
      {"gelu", CatalogueOp::Gelu, {{"x", false}}, {}, false},
      {"silu", CatalogueOp::Silu, {{"x", false}}, {}, false},
      {"tanh", CatalogueOp::Tanh, {{"x", false}}, {}, false},
      {"relu", CatalogueOp::Relu, {{"x", false}}, {{"in_place", T::Flag, false}}, false},
      {"add", CatalogueOp::Add, {{"a", false}, {"b", false}}, {{"in_place", T::Flag, false}}, false},
      {"mul", CatalogueOp::Mul, {{"a", false}, {"b", false}}, {}, false},
      {"scale", CatalogueOp::Scale, {{"x", false}}, {}, false},
      {"dropout", CatalogueOp::Dropout, {{"x", false}}, {{"p", T::Real, false}}, false},
      {"softmax", CatalogueOp::Softmax, {{"x", false}}, {}, false},
      {"cast", CatalogueOp::Cast, {{"x", false}}, {{"dtype", T::DType, true}}, false},
      {"constant", CatalogueOp::Constant, {{"from", true}}, {{"shape", T::Shape, true}, {"dtype", T::DType, true}}, false},
      {"view", CatalogueOp::View, {{"x", false}}, {{"shape", T::Shape, true}}, false},
      {"split", CatalogueOp::Split, {{"x", false}}, {{"pieces", T::Integer, true}, {"dim", T::Integer, false}}, true},
      {"copy", CatalogueOp::Copy, {{"x", false}}, {}, false},
      {"expand_copy", CatalogueOp::ExpandCopy, {{"x", false}}, {{"shape", T::Shape, true}}, false},
      {"cat", CatalogueOp::Cat, {{"a", false}, {"b", false}}, {{"dim", T::Integer, false}}, false},
      {"attention", CatalogueOp::Attention, {{"q", false}, {"k", false}, {"v", false}, {"mask", true}, {"attn_mask", true}},
       {{"heads", T::Integer, false}, {"causal", T::Flag, false}, {"enable_gqa", T::Flag, false}, {"q_contiguous", T::Flag, false},
        {"k_contiguous", T::Flag, false}, {"v_contiguous", T::Flag, false}, {"heads_first", T::Flag, false},
        {"dropout", T::Real, false}},
       false},
      {"batched_matmul", CatalogueOp::BatchedMatmul, {{"a", false}, {"b", false}},
       {{"copy_a", T::Flag, false}, {"copy_b", T::Flag, false}}, false},
      {"rotary", CatalogueOp::Rotary, {{"x", false}, {"cos", false}, {"sin", false}}, {}, false},
      {"cross_entropy", CatalogueOp::CrossEntropy, {{"logits", false}, {"targets", false}}, {}, false},
      {"conv2d", CatalogueOp::Conv2d, {{"x", false}, {"weight", false}, {"bias", true}},
       {{"stride", T::Integer, false}, {"padding", T::Integer, false}}, false},
      {"batch_norm", CatalogueOp::BatchNorm,
       {{"x", false}, {"weight", false}, {"bias", false}, {"running_mean", false}, {"running_var", false}}, {}, false},
      {"max_pool2d", CatalogueOp::MaxPool2d, {{"x", false}},
       {{"kernel", T::Integer, false}, {"stride", T::Integer, false}, {"padding", T::Integer, false}}, false},
      {"adaptive_avg_pool2d", CatalogueOp::AdaptiveAvgPool2d, {{"x", false}}, {}, false},
      {"generic", CatalogueOp::Generic, {}, {}, true},
  };
  return specs;
}

const CatalogueOpSpec* find_catalogue_op(const std::string& name) {
  for (const auto& spec : catalogue_op_specs()) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

}  // namespace oomcast::scenario::graph
