// A graph file's catalogue ops: checks each op's argument shapes, derives its output shapes and
// calls the op of planner/ops/op_catalogue.h exactly as a C++ family would.
#include "planner/families/graph_file_builder.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

using scenario::AttentionImpl;

namespace {

using scenario::graph::CatalogueOp;

Shape broadcast(const Shape& a, const Shape& b, bool* ok) {
  Shape out(std::max(a.size(), b.size()), 1);
  *ok = true;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1) *ok = false;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Saturates instead of overflowing (derived shapes are bounded when they are bound).
int64_t product(const Shape& shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (__builtin_mul_overflow(numel, dim, &numel)) return INT64_MAX;
  }
  return numel;
}

}  // namespace

void GraphFileBuilder::run_catalogue_op(const scenario::graph::Statement& statement, const scenario::graph::OpStatement& op,
                                        const std::string& leaf) {
  const SourceLocation& where = statement.where;
  auto need_rank = [&](const char* what, const Shape& shape, size_t rank) {
    if (shape.size() != rank) {
      fail_op(op, where, std::string(what) + " must have " + std::to_string(rank) + " dimensions, got " + shape_text(shape));
    }
  };
  auto need_last = [&](const char* what, const Shape& shape) {
    if (shape.empty()) fail_op(op, where, std::string(what) + " must have at least one dimension");
    return shape.back();
  };
  auto need_vector = [&](const char* what, const Binding* binding, int64_t size) {
    if (binding && binding->shape != Shape{size}) {
      fail_op(op, where, std::string(what) + " has shape " + shape_text(binding->shape) + ", expected [" +
                             std::to_string(size) + "]");
    }
  };
  auto same_shape_unary = [&](auto call) {
    const Binding& x = argument(op, "x");
    bind_outputs(op, {call(x.tensor)}, {x.shape});
  };
  auto batch_check = [&](const Shape& shape) {
    if (shape.size() != 4) fail_op(op, where, "x must be [batch_size, C, H, W], got " + shape_text(shape));
    if (shape[0] != g_.context().batch) {
      fail_op(op, where, "x's first dimension is " + std::to_string(shape[0]) + ", not batch_size (" +
                             std::to_string(g_.context().batch) + ")");
    }
  };

  switch (op.id) {
    case CatalogueOp::Linear: {
      const Binding& x = argument(op, "x");
      const Binding& weight = argument(op, "weight");
      const Binding* bias = lookup_optional(op, "bias");
      need_rank("weight", weight.shape, 2);
      const int64_t out_features = weight.shape[0];
      const int64_t in_features = weight.shape[1];
      if (need_last("x", x.shape) != in_features) {
        fail_op(op, where, "shape mismatch: x " + shape_text(x.shape) + " has " + std::to_string(x.shape.back()) +
                               " features, weight " + shape_text(weight.shape) + " expects " + std::to_string(in_features));
      }
      need_vector("bias", bias, out_features);
      Shape out = x.shape;
      out.back() = out_features;
      TensorId y = ops::linear(g_, leaf, x.tensor, weight.tensor, bias ? bias->tensor : kNoTensor, in_features,
                               out_features, option_flag(op, "copy_input", false));
      return bind_outputs(op, {y}, {out});
    }
    case CatalogueOp::Embedding: {
      const Binding& indices = argument(op, "indices");
      const Binding& weight = argument(op, "weight");
      need_rank("weight", weight.shape, 2);
      if (is_floating(g_.tensor(indices.tensor).dtype)) fail_op(op, where, "indices must be an integer tensor");
      Shape out = indices.shape;
      out.push_back(weight.shape[1]);
      return bind_outputs(op, {ops::embedding(g_, leaf, indices.tensor, weight.tensor, weight.shape[1])}, {out});
    }
    case CatalogueOp::LayerNorm:
    case CatalogueOp::RmsNorm: {
      const Binding& x = argument(op, "x");
      const Binding& weight = argument(op, "weight");
      const Binding* bias = lookup_optional(op, "bias");
      const int64_t hidden = need_last("x", x.shape);
      if (weight.shape != Shape{hidden}) {
        fail_op(op, where, "shape mismatch: weight " + shape_text(weight.shape) + " does not normalize x " +
                               shape_text(x.shape) + " over its last dimension " + std::to_string(hidden));
      }
      need_vector("bias", bias, hidden);
      TensorId y = op.id == CatalogueOp::LayerNorm
                       ? ops::layer_norm(g_, leaf, x.tensor, weight.tensor, bias ? bias->tensor : kNoTensor, hidden,
                                         option_flag(op, "noncontiguous_input", false))
                       : ops::rms_norm(g_, leaf, x.tensor, weight.tensor, hidden);
      return bind_outputs(op, {y}, {x.shape});
    }
    case CatalogueOp::Gelu: return same_shape_unary([&](TensorId x) { return ops::gelu(g_, leaf, x); });
    case CatalogueOp::Silu: return same_shape_unary([&](TensorId x) { return ops::silu(g_, leaf, x); });
    case CatalogueOp::Tanh: return same_shape_unary([&](TensorId x) { return ops::tanh(g_, leaf, x); });
    case CatalogueOp::Scale: return same_shape_unary([&](TensorId x) { return ops::scale(g_, leaf, x); });
    case CatalogueOp::Dropout: return same_shape_unary([&](TensorId x) { return ops::dropout(g_, leaf, x); });
    case CatalogueOp::Softmax: return same_shape_unary([&](TensorId x) { return ops::softmax(g_, leaf, x); });
    case CatalogueOp::Copy: return same_shape_unary([&](TensorId x) { return ops::copy(g_, leaf, x); });
    case CatalogueOp::Relu: {
      bool in_place = option_flag(op, "in_place", false);
      return same_shape_unary([&](TensorId x) { return ops::relu(g_, leaf, x, in_place); });
    }
    case CatalogueOp::Cast: {
      DType dtype = dtype_of(op.option("dtype")->dtype, DType::Float32);
      return same_shape_unary([&](TensorId x) { return g_.cast(x, dtype, leaf); });
    }
    case CatalogueOp::Rotary: {
      const Binding& x = argument(op, "x");
      const Binding& cos = argument(op, "cos");
      const Binding& sin = argument(op, "sin");
      return bind_outputs(op, {ops::rotary(g_, leaf, x.tensor, cos.tensor, sin.tensor)}, {x.shape});
    }
    case CatalogueOp::Add:
    case CatalogueOp::Mul: {
      const Binding& a = argument(op, "a");
      const Binding& b = argument(op, "b");
      bool ok = false;
      Shape out = broadcast(a.shape, b.shape, &ok);
      if (!ok || product(out) != std::max(product(a.shape), product(b.shape))) {
        fail_op(op, where, "shape mismatch: " + shape_text(a.shape) + " and " + shape_text(b.shape) +
                               (ok ? " broadcast to a shape larger than both (write it as a generic op)" : " do not broadcast"));
      }
      TensorId y = op.id == CatalogueOp::Add ? ops::add(g_, leaf, a.tensor, b.tensor, option_flag(op, "in_place", false))
                                             : ops::mul(g_, leaf, a.tensor, b.tensor);
      return bind_outputs(op, {y}, {out});
    }
    case CatalogueOp::Constant: {
      Shape shape = eval_shape(op.option("shape")->shape, where);
      uint64_t numel = checked_numel(shape, where);
      const Binding* from = lookup_optional(op, "from");
      DType dtype = dtype_of(op.option("dtype")->dtype, DType::Float32);
      return bind_outputs(op, {ops::constant(g_, leaf, numel, dtype, from ? from->tensor : kNoTensor)}, {shape});
    }
    case CatalogueOp::View:
    case CatalogueOp::ExpandCopy: {
      const Binding& x = argument(op, "x");
      Shape shape = eval_shape(op.option("shape")->shape, where);
      uint64_t numel = checked_numel(shape, where);
      if (op.id == CatalogueOp::View && static_cast<int64_t>(numel) != product(x.shape)) {
        fail_op(op, where, "shape mismatch: a view of " + shape_text(x.shape) + " cannot have shape " + shape_text(shape));
      }
      TensorId y = op.id == CatalogueOp::View ? ops::view(g_, leaf, x.tensor, numel)
                                              : ops::expand_copy(g_, leaf, x.tensor, numel);
      return bind_outputs(op, {y}, {shape});
    }
    case CatalogueOp::Split: {
      const Binding& x = argument(op, "x");
      int64_t pieces = option_integer(op, "pieces", 1);
      int64_t dim = option_integer(op, "dim", -1);
      auto rank = static_cast<int64_t>(x.shape.size());
      if (dim < 0) dim += rank;
      if (dim < 0 || dim >= rank) fail_op(op, where, "dim is outside x's " + std::to_string(rank) + " dimensions");
      if (pieces < 1 || pieces > 4096 || x.shape[dim] % pieces != 0) {
        fail_op(op, where, "shape mismatch: dimension " + std::to_string(dim) + " of " + shape_text(x.shape) +
                               " does not split into " + std::to_string(pieces) + " equal pieces");
      }
      if (op.outputs.size() != static_cast<size_t>(pieces)) {
        fail_op(op, where, "'out' names " + std::to_string(op.outputs.size()) + " pieces, pieces is " + std::to_string(pieces));
      }
      Shape piece = x.shape;
      piece[dim] /= pieces;
      std::vector<TensorId> outputs = ops::split(g_, leaf, x.tensor, static_cast<int>(pieces));
      return bind_outputs(op, outputs, std::vector<Shape>(outputs.size(), piece));
    }
    case CatalogueOp::Cat: {
      const Binding& a = argument(op, "a");
      const Binding& b = argument(op, "b");
      int64_t dim = option_integer(op, "dim", 0);
      auto rank = static_cast<int64_t>(a.shape.size());
      if (dim < 0) dim += rank;
      bool ok = a.shape.size() == b.shape.size() && dim >= 0 && dim < rank;
      for (int64_t i = 0; ok && i < rank; ++i) ok = i == dim || a.shape[i] == b.shape[i];
      if (!ok) fail_op(op, where, "shape mismatch: " + shape_text(a.shape) + " and " + shape_text(b.shape) + " do not cat");
      Shape out = a.shape;
      out[dim] += b.shape[dim];
      return bind_outputs(op, {ops::cat(g_, leaf, a.tensor, b.tensor)}, {out});
    }
    case CatalogueOp::Attention: {
      const Binding& q = argument(op, "q");
      const Binding& k = argument(op, "k");
      const Binding& v = argument(op, "v");
      const Binding* mask = lookup_optional(op, "mask");
      ops::AttentionShape shape;
      int64_t heads = option_integer(op, "heads", 0);
      if (q.shape.size() == 4) {
        shape.batch = q.shape[0];
        shape.heads = q.shape[1];
        shape.seq = q.shape[2];
        shape.head_dim = q.shape[3];
        if (heads != 0 && heads != shape.heads) fail_op(op, where, "heads is " + std::to_string(heads) + " but q is " + shape_text(q.shape));
      } else if (q.shape.size() == 3) {
        if (heads < 1 || q.shape[2] % heads != 0) {
          fail_op(op, where, "q " + shape_text(q.shape) + " is [batch, seq, heads*head_dim]: give 'heads' dividing " +
                                 std::to_string(q.shape[2]));
        }
        shape.batch = q.shape[0];
        shape.heads = heads;
        shape.seq = q.shape[1];
        shape.head_dim = q.shape[2] / heads;
      } else {
        fail_op(op, where, "q must be [batch, heads, seq, head_dim] or [batch, seq, hidden], got " + shape_text(q.shape));
      }
      if (option_flag(op, "enable_gqa", false)) {
        // SDPA's enable_gqa: k and v keep their kv_heads; q's heads are a multiple of them.
        if (q.shape.size() != 4 || k.shape != v.shape || k.shape.size() != 4 || k.shape[0] != q.shape[0] ||
            k.shape[2] != q.shape[2] || k.shape[3] != q.shape[3] || k.shape[1] < 1 || q.shape[1] % k.shape[1] != 0) {
          fail_op(op, where, "enable_gqa: k and v must be [batch, kv_heads, seq, head_dim] with kv_heads dividing q's " +
                                 std::string("heads; q ") + shape_text(q.shape) + ", k " + shape_text(k.shape) + ", v " +
                                 shape_text(v.shape));
        }
        // torch 2.5+ runs enable_gqa in the flash kernels (CUDA and CPU) with k and v as they
        // are (the fused op sizes everything by q and references k, v); the math backend repeats
        // k and v to q's heads (modelled); CUDA's memory-efficient kernel falls back to math,
        // not modelled.
        const AttentionImpl asked = g_.context().attention;
        if (asked != AttentionImpl::Flash && asked != AttentionImpl::SdpaMath) {
          fail_op(op, where, "enable_gqa (grouped k/v heads) is modelled for the flash kernel and the math "
                             "backend: use attention: flash or sdpa_math");
        }
        shape.kv_heads = k.shape[1];
      } else if (product(k.shape) != product(q.shape) || product(v.shape) != product(q.shape)) {
        fail_op(op, where, "shape mismatch: q " + shape_text(q.shape) + ", k " + shape_text(k.shape) + ", v " +
                               shape_text(v.shape) + " (repeat grouped k/v heads with expand_copy first)");
      }
      shape.causal = option_flag(op, "causal", true);
      shape.q_contiguous = option_flag(op, "q_contiguous", false);
      shape.k_contiguous = option_flag(op, "k_contiguous", false);
      shape.v_contiguous = option_flag(op, "v_contiguous", false);
      shape.causal_mask_buffer = mask ? mask->tensor : kNoTensor;
      if (const Binding* attn_mask = lookup_optional(op, "attn_mask")) {
        // SDPA's attn_mask: broadcastable to [b, heads, s, s] (sdp_utils_cpp.cpp check_attn_mask_shape)
        const Shape target{shape.batch, shape.heads, shape.seq, shape.seq};
        const Shape& m = attn_mask->shape;
        bool broadcasts = m.size() <= 4;
        for (size_t i = 0; broadcasts && i < m.size(); ++i) {
          const int64_t want = target[4 - m.size() + i];
          broadcasts = m[i] == 1 || m[i] == want;
        }
        if (!broadcasts) fail_op(op, where, "attn_mask " + shape_text(m) + " does not broadcast to " + shape_text(target));
        if (shape.causal && option_flag(op, "causal", false)) fail_op(op, where, "attn_mask and causal: true together");
        shape.causal = false;
        shape.sdpa_mask = attn_mask->tensor;
        shape.sdpa_mask_last = m.empty() ? 1 : m.back();
      }
      shape.heads_first = option_flag(op, "heads_first", false);
      if (const scenario::graph::Option* dropout = op.option("dropout")) shape.dropout = dropout->real;
      TensorId y = ops::attention(g_, leaf, q.tensor, k.tensor, v.tensor, shape);
      if (shape.heads_first) return bind_outputs(op, {y}, {Shape{shape.batch, shape.heads, shape.seq, shape.head_dim}});
      return bind_outputs(op, {y}, {Shape{shape.batch, shape.seq, shape.heads * shape.head_dim}});
    }
    case CatalogueOp::BatchedMatmul: {
      const Binding& a = argument(op, "a");
      const Binding& b = argument(op, "b");
      if (a.shape.size() < 2 || a.shape.size() != b.shape.size() || a.shape.back() != b.shape[b.shape.size() - 2] ||
          !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin())) {
        fail_op(op, where, "shape mismatch: " + shape_text(a.shape) + " @ " + shape_text(b.shape));
      }
      Shape out = a.shape;
      out.back() = b.shape.back();
      TensorId y = ops::batched_matmul(g_, leaf, a.tensor, b.tensor, checked_numel(out, where),
                                       option_flag(op, "copy_a", false), option_flag(op, "copy_b", false),
                                       static_cast<uint64_t>(a.shape.back()));
      return bind_outputs(op, {y}, {out});
    }
    case CatalogueOp::CrossEntropy: {
      const Binding& logits = argument(op, "logits");
      const Binding& targets = argument(op, "targets");
      int64_t classes = need_last("logits", logits.shape);
      if (classes == 0 || product(targets.shape) * classes != product(logits.shape)) {
        fail_op(op, where, "shape mismatch: targets " + shape_text(targets.shape) + " for logits " + shape_text(logits.shape));
      }
      return bind_outputs(op, {ops::cross_entropy(g_, leaf, logits.tensor, targets.tensor, classes)}, {Shape{}});
    }
    case CatalogueOp::Conv2d: {
      const Binding& x = argument(op, "x");
      const Binding& weight = argument(op, "weight");
      const Binding* bias = lookup_optional(op, "bias");
      batch_check(x.shape);
      need_rank("weight", weight.shape, 4);
      if (weight.shape[1] != x.shape[1] || weight.shape[2] != weight.shape[3]) {
        fail_op(op, where, "shape mismatch: weight " + shape_text(weight.shape) + " for x " + shape_text(x.shape) +
                               " (square kernels, no groups; write others as generic ops)");
      }
      need_vector("bias", bias, weight.shape[0]);
      ops::ConvShape conv{x.shape[1], weight.shape[0], weight.shape[2], option_integer(op, "stride", 1),
                          option_integer(op, "padding", 0)};
      if (conv.stride < 1 || conv.padding < 0) fail_op(op, where, "stride must be >= 1 and padding >= 0");
      int64_t height = x.shape[2];
      int64_t width = x.shape[3];
      if (height + 2 * conv.padding < conv.kernel || width + 2 * conv.padding < conv.kernel) {
        fail_op(op, where, "the kernel is larger than the padded input " + shape_text(x.shape));
      }
      TensorId y = ops::conv2d(g_, leaf, x.tensor, weight.tensor, bias ? bias->tensor : kNoTensor, conv, &height, &width);
      return bind_outputs(op, {y}, {Shape{x.shape[0], conv.out_channels, height, width}});
    }
    case CatalogueOp::BatchNorm: {
      const Binding& x = argument(op, "x");
      if (x.shape.size() < 2) fail_op(op, where, "x must be [batch, C, ...], got " + shape_text(x.shape));
      const int64_t channels = x.shape[1];
      const Binding& weight = argument(op, "weight");
      const Binding& bias = argument(op, "bias");
      const Binding& mean = argument(op, "running_mean");
      const Binding& var = argument(op, "running_var");
      for (const Binding* b : {&weight, &bias, &mean, &var}) need_vector("a batch norm parameter or statistic", b, channels);
      TensorId y = ops::batch_norm(g_, leaf, x.tensor, weight.tensor, bias.tensor, mean.tensor, var.tensor, channels);
      return bind_outputs(op, {y}, {x.shape});
    }
    case CatalogueOp::MaxPool2d: {
      const Binding& x = argument(op, "x");
      batch_check(x.shape);
      if (option_integer(op, "kernel", 3) != 3 || option_integer(op, "stride", 2) != 2 ||
          option_integer(op, "padding", 1) != 1) {
        fail_op(op, where, "the catalogue's max_pool2d is kernel 3, stride 2, padding 1; write others as generic ops");
      }
      int64_t height = x.shape[2];
      int64_t width = x.shape[3];
      TensorId y = ops::max_pool2d(g_, leaf, x.tensor, x.shape[1], &height, &width);
      return bind_outputs(op, {y}, {Shape{x.shape[0], x.shape[1], height, width}});
    }
    case CatalogueOp::AdaptiveAvgPool2d: {
      const Binding& x = argument(op, "x");
      batch_check(x.shape);
      return bind_outputs(op, {ops::adaptive_avg_pool2d(g_, leaf, x.tensor, x.shape[1])}, {Shape{x.shape[0], x.shape[1]}});
    }
    case CatalogueOp::Generic: break;
  }
}

}  // namespace oomcast::planner::families
