// The table of model families and the dimensions each one reads.
#include "scenario/model_families.h"

#include <algorithm>

#include "base/input_error.h"
#include "scenario/graph_file.h"
#include "scenario/graph_op_table.h"

namespace oomcast::scenario::families {

const std::vector<FamilySpec>& family_specs() {
  static const std::vector<FamilySpec> specs = {
      {"gpt2",
       {{"layers", 0, "transformer blocks"},
        {"hidden", 0, "model width (n_embd)"},
        {"heads", 0, "attention heads"},
        {"vocab", 0, "vocabulary size"},
        {"max_positions", 0, "learned position table size (block_size)"},
        {"ffn_hidden", -1, "MLP width; default 4*hidden"}},
       {"tied_embeddings", "bias"},
       {"loss", "logits"}},
      {"llama",
       {{"layers", 0, "decoder layers"},
        {"hidden", 0, "model width"},
        {"heads", 0, "query heads"},
        {"kv_heads", -1, "key/value heads (GQA); default heads"},
        {"ffn_hidden", 0, "SwiGLU width (intermediate_size)"},
        {"vocab", 0, "vocabulary size"},
        {"max_positions", 4096, "max_position_embeddings"},
        {"head_dim", -1, "per-head width; default hidden / heads (Qwen3 and Gemma set it)"},
        {"experts", -2, "mixture-of-experts: experts per layer; absent = a dense MLP"},
        {"experts_per_token", 2, "mixture-of-experts: experts each token is routed to (top-k)"},
        {"expert_ffn_hidden", -1, "mixture-of-experts: each expert's MLP width; default ffn_hidden"},
        {"shared_expert_ffn", -2, "Qwen2-MoE's always-on shared expert width; absent = none"},
        {"decoder_sparse_step", 1, "mixture-of-experts: layer i is sparse when (i + 1) % step == 0, else dense"},
        {"transformers_version", 524, "the transformers release whose code runs, 100 * major + minor (524 = 5.24)"},
        {"expert_parallel", 1, "mixture-of-experts: ranks the experts are split across (set per rank by parallel.expert_parallel)"}},
       {"tied_embeddings", "qkv_bias", "o_bias", "mlp_bias", "qk_norm", "fused_qkv", "fused_gate_up", "gelu_mlp",
        "scale_embedding", "offset_norm", "sandwich_norm", "final_logit_softcap", "attn_logit_softcap", "normalize_top_k",
        "mixtral_expert_names", "router_logits_output",
        // One pipeline stage's part of the model (set per rank by parallel.pipeline_parallel).
        "pipeline_first_stage", "pipeline_last_stage"},
       {"loss", "logits"}},
      {"gpt_neox",
       {{"layers", 0, "decoder layers"},
        {"hidden", 0, "model width"},
        {"heads", 0, "query heads"},
        {"kv_heads", -1, "key/value heads (Falcon multi-query: 1); default heads"},
        {"ffn_hidden", -1, "MLP width; default 4*hidden"},
        {"vocab", 0, "vocabulary size"},
        {"max_positions", 2048, "max_position_embeddings"},
        {"rotary_dims", -1, "rotated features per head (partial rotary); default the whole head"},
        {"transformers_version", 524, "the transformers release whose code runs, 100 * major + minor (524 = 5.24)"}},
       {"tied_embeddings", "parallel_residual", "shared_norm", "fused_qkv", "bias", "lm_head_bias", "python_gelu"},
       {"loss", "logits"}},
      {"bert",
       {{"layers", 0, "encoder layers"},
        {"hidden", 0, "model width"},
        {"heads", 0, "attention heads"},
        {"ffn_hidden", 0, "intermediate size"},
        {"vocab", 0, "vocabulary size"},
        {"max_positions", 512, "position table size"},
        {"type_vocab", 2, "token type table size"},
        {"num_labels", -2, "classifier labels; absent = BertModel without a head"}},
       {"pooler"},
       {"loss", "logits"}},
      {"vit",
       {{"layers", 0, "encoder layers"},
        {"hidden", 0, "model width"},
        {"heads", 0, "attention heads"},
        {"ffn_hidden", 0, "MLP width"},
        {"image_size", 224, "input image side"},
        {"patch_size", 16, "patch side"},
        {"channels", 3, "input channels"},
        {"num_classes", 1000, "classifier outputs"}},
       {},
       {"loss", "logits"}},
      {"transformer_encoder",
       {{"layers", 0, "nn.TransformerEncoder num_layers"},
        {"hidden", 0, "d_model"},
        {"heads", 0, "nhead"},
        {"ffn_hidden", 2048, "dim_feedforward (PyTorch's default 2048)"},
        {"vocab", 0, "token embedding rows"},
        {"max_positions", 512, "learned position table length"},
        {"num_labels", 2, "outputs of the linear head"}},
       {"norm_first", "batch_first", "gelu", "final_norm", "per_token_head"},
       {"loss", "logits"}},
      {"resnet",
       {{"depth", 0, "18, 34, 50, 101 or 152"},
        {"num_classes", 1000, "classifier outputs"},
        {"image_size", 224, "default input image side"},
        {"channels", 3, "input channels"}},
       {},
       {"loss", "logits"}},
      {"mlp",
       {{"input", 0, "input features"},
        {"hidden", 0, "hidden width"},
        {"layers", 1, "hidden layers (Linear + ReLU each)"},
        {"output", 0, "output classes"}},
       {"bias"},
       {"loss", "logits"}},
  };
  return specs;
}

const FamilySpec* find_family(const std::string& name) {
  for (const auto& spec : family_specs()) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

int64_t dim(const ModelConfig& model, const std::string& name) {
  auto found = model.dims.find(name);
  if (found != model.dims.end()) return found->second;
  if (const FamilySpec* spec = find_family(model.family)) {
    for (const auto& entry : spec->dims) {
      if (name != entry.name) continue;
      if (entry.default_value > 0) return entry.default_value;
      if (entry.default_value < 0) {
        if (name == "ffn_hidden") return 4 * dim(model, "hidden");
        if (name == "kv_heads") return dim(model, "heads");
        if (name == "head_dim") return dim(model, "hidden") / dim(model, "heads");
        if (name == "rotary_dims") return dim(model, "hidden") / dim(model, "heads");
        if (name == "expert_ffn_hidden") return dim(model, "ffn_hidden");
      }
    }
  }
  throw InputError(SourceLocation{model.source, 0, 0, -1}, name,
                   "model '" + model.name + "' (family " + model.family + ") needs dimension '" + name + "'");
}

bool option_enabled(const ModelConfig& model, const std::string& name, bool default_value) {
  auto found = model.options.find(name);
  if (found == model.options.end()) return default_value;
  const std::string& value = found->second;
  if (value == "true" || value == "1" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "no") return false;
  throw InputError(SourceLocation{model.source, 0, 0, -1}, name,
                   "option '" + name + "' of model '" + model.name + "' is true or false, not '" + value + "'");
}

bool is_vision(const ModelConfig& model) {
  if (model.graph) return model.graph->image_size;
  return model.family == "vit" || model.family == "resnet";
}

namespace {

bool has_attention_op(const std::vector<graph::Statement>& statements) {
  return std::any_of(statements.begin(), statements.end(), [](const graph::Statement& statement) {
    if (statement.kind == graph::Statement::Kind::Op) return statement.op && statement.op->id == graph::CatalogueOp::Attention;
    return has_attention_op(statement.body);
  });
}

}  // namespace

bool uses_attention_setting(const ModelConfig& model) {
  if (model.graph) return has_attention_op(model.graph->forward);
  return model.family != "resnet" && model.family != "mlp";
}

int64_t default_sequence_length(const ModelConfig& model) {
  if (model.graph) return model.graph->default_size;
  if (is_vision(model)) return dim(model, "image_size");
  if (model.family == "mlp") return 1;
  return dim(model, "max_positions");
}

}  // namespace oomcast::scenario::families
