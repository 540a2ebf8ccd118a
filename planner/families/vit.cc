// ViT as torchvision's vit_b_16 lays it out: conv_proj patch embedding, class token,
// learned position embedding, pre-LN encoder blocks built on nn.MultiheadAttention
// (packed in_proj, need_weights=False so SDPA), GELU MLP, final LayerNorm, linear head.
#include <string>
#include <vector>

#include "base/input_error.h"
#include "planner/families/families.h"
#include "planner/families/multihead_attention.h"
#include "planner/ops/op_catalogue.h"
#include "planner/torch_release_facts.h"

namespace oomcast::planner::families {

using scenario::ModelConfig;
using scenario::OpKind;
using scenario::families::dim;

namespace {

struct VitLayer {
  TensorId ln_1_w, ln_1_b;
  MultiheadAttentionWeights attention;
  TensorId ln_2_w, ln_2_b, fc1_w, fc1_b, fc2_w, fc2_b;
};

}  // namespace

void build_vit(GraphBuilder& g, const ModelConfig& model) {
  const int64_t layers = dim(model, "layers");
  const int64_t hidden = dim(model, "hidden");
  const int64_t heads = dim(model, "heads");
  const int64_t ffn = dim(model, "ffn_hidden");
  const int64_t image = dim(model, "image_size");
  const int64_t patch = dim(model, "patch_size");
  const int64_t channels = dim(model, "channels");
  const int64_t classes = dim(model, "num_classes");
  const int64_t batch = g.context().batch;
  if (g.context().seq_len != image) {
    throw InputError(SourceLocation{model.source, 0, 0, -1}, "seq_len",
                     "vit takes images of exactly " + std::to_string(image) + " pixels (seq_len is the image size), got " +
                         std::to_string(g.context().seq_len));
  }
  const int64_t patches = (image / patch) * (image / patch);
  const int64_t seq = patches + 1;

  // VisionTransformer's own parameter (class_token) comes before its children's.
  TensorId class_token = g.parameter("class_token", {1, 1, hidden});
  TensorId conv_w = g.parameter("conv_proj.weight", {hidden, channels, patch, patch});
  TensorId conv_b = g.parameter("conv_proj.bias", {hidden});
  g.push_module("encoder");
  TensorId pos_embedding = g.parameter("pos_embedding", {1, seq, hidden});
  std::vector<VitLayer> blocks(static_cast<size_t>(layers));
  for (int64_t i = 0; i < layers; ++i) {
    VitLayer& b = blocks[static_cast<size_t>(i)];
    g.push_module("layers.encoder_layer_" + std::to_string(i));
    b.ln_1_w = g.parameter("ln_1.weight", {hidden});
    b.ln_1_b = g.parameter("ln_1.bias", {hidden});
    b.attention = multihead_attention_parameters(g, "self_attention", hidden);
    b.ln_2_w = g.parameter("ln_2.weight", {hidden});
    b.ln_2_b = g.parameter("ln_2.bias", {hidden});
    b.fc1_w = g.parameter("mlp.0.weight", {ffn, hidden});
    b.fc1_b = g.parameter("mlp.0.bias", {ffn});
    b.fc2_w = g.parameter("mlp.3.weight", {hidden, ffn});
    b.fc2_b = g.parameter("mlp.3.bias", {hidden});
    g.pop_module();
  }
  TensorId ln_w = g.parameter("ln.weight", {hidden});
  TensorId ln_b = g.parameter("ln.bias", {hidden});
  g.pop_module();
  TensorId head_w = g.parameter("heads.head.weight", {classes, hidden});
  TensorId head_b = g.parameter("heads.head.bias", {classes});
  // The constructor then initialises conv_proj.weight with nn.init.trunc_normal_, which from
  // torch 2.12 rejects out-of-range samples by masks: `result < lo`, `result > hi` and their `|`,
  // a byte per element each, alive together (fact trunc_normal_rejection_masks). A second pass
  // needs a sample beyond 2 * sqrt(fan_in) standard deviations: not modelled (fan_in is 3 * patch²).
  if (torch_release_facts(g.context().torch_version).trunc_normal_rejection_masks) {
    for (const char* mask : {"below_bound", "above_bound", "rejected"}) {
      g.construction_temporary(std::string("conv_proj.weight.trunc_normal_") + mask, {hidden, channels, patch, patch},
                               DType::Bool);
    }
  }

  // Images arrive in the parameters' dtype (the loop casts them for pure bf16).
  DType image_dtype = g.precision().parameter_dtype;
  TensorId images = g.input("images", static_cast<uint64_t>(batch * channels * image * image), image_dtype);
  TensorId labels = g.input("labels", static_cast<uint64_t>(batch), DType::Int64);

  int64_t height = image, width = image;
  ops::ConvShape conv{channels, hidden, patch, patch, 0};
  TensorId patches_out = ops::conv2d(g, "conv_proj", images, conv_w, conv_b, conv, &height, &width);
  TensorId flat = ops::view(g, "patch_tokens", patches_out, g.tensor(patches_out).numel);
  TensorId cls = ops::view(g, "class_token_expand", class_token, static_cast<uint64_t>(batch * hidden));
  TensorId x = ops::cat(g, "cat_class_token", cls, flat);
  // VisionTransformer.forward's local `x` holds the cat result until the encoder returns.
  g.begin_scope();
  g.hold(x);
  g.push_module("encoder");
  x = ops::add(g, "add_pos_embedding", x, pos_embedding);
  g.hold(x);  // Encoder.forward's `input = input + self.pos_embedding` lives until it returns
  x = ops::dropout(g, "dropout", x);

  ops::AttentionShape shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.seq = seq;
  shape.head_dim = hidden / heads;
  shape.causal = false;
  // nn.MultiheadAttention(batch_first=True) returns attn_output.transpose(1, 0): the residual
  // add that follows takes its first operand's (permuted) layout, so from the first block's
  // attention on the residual stream is not contiguous, and every LayerNorm copies its input.
  bool residual_permuted = false;
  for (int64_t i = 0; i < layers; ++i) {
    const VitLayer& b = blocks[static_cast<size_t>(i)];
    g.push_module("layers.encoder_layer_" + std::to_string(i));
    g.begin_unit();
    g.begin_scope();
    g.hold(x);
    TensorId ln1 = ops::layer_norm(g, "ln_1", x, b.ln_1_w, b.ln_1_b, hidden, residual_permuted);
    TensorId out = multihead_self_attention(g, "self_attention", b.attention, ln1, shape, hidden, /*batch_first=*/true);
    out = ops::dropout(g, "dropout", out);
    TensorId x_mid = ops::add(g, "attn_residual", out, x);
    residual_permuted = true;
    TensorId ln2 = ops::layer_norm(g, "ln_2", x_mid, b.ln_2_w, b.ln_2_b, hidden, residual_permuted);
    g.push_module("mlp");
    TensorId h = ops::linear(g, "0", ln2, b.fc1_w, b.fc1_b, hidden, ffn);
    h = ops::gelu(g, "1", h);
    h = ops::dropout(g, "2", h);
    h = ops::linear(g, "3", h, b.fc2_w, b.fc2_b, ffn, hidden);
    h = ops::dropout(g, "4", h);
    g.pop_module();
    x = ops::add(g, "mlp_residual", x_mid, h);
    g.end_scope();
    g.end_unit();
    g.pop_module();
  }
  x = ops::layer_norm(g, "ln", x, ln_w, ln_b, hidden, residual_permuted);
  g.pop_module();
  g.end_scope();
  // x[:, 0]: a select view; its backward zero-fills a grad of the full [b, s, h].
  TensorId first = g.view(x, "class_token_out", static_cast<uint64_t>(batch * hidden));
  OpNode& select = g.add_op(OpKind::View, "class_token_out", {x}, {first}, {GradRule::New});
  if (torch_release_facts(g.context().torch_version).select_backward_clones_zeros) {
    // torch 1.13's select_backward is zeros + select_scatter, which clones them: a second
    // full-size buffer, the zeros dying inside (op_probe.py layer_norm_select_contig:
    // bwd +zeros +grad -zeros).
    select.backward_transients.push_back(
        Transient{g.intern("class_token_out.select_backward_zeros"), g.tensor(x).bytes(), false});
  }
  g.finish_op(select);
  TensorId logits = ops::linear(g, "heads.head", first, head_w, head_b, hidden, classes);
  TensorId loss = ops::cross_entropy(g, "cross_entropy", logits, labels, classes);
  g.set_named_output("logits", logits);
  g.set_loss(loss);
}

}  // namespace oomcast::planner::families
