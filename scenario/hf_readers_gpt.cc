// config.json readers for GPT-2 style models (learned positions, LayerNorm, GELU MLP).
#include "scenario/hf_readers.h"

namespace oomcast::scenario::hf {

void read_gpt2(HfConfigFields& fields, ModelConfig& model) {
  model.family = "gpt2";
  model.dims["layers"] = fields.required_int("n_layer");
  model.dims["hidden"] = fields.required_int("n_embd");
  model.dims["heads"] = fields.required_int("n_head");
  model.dims["vocab"] = fields.required_int("vocab_size");
  model.dims["max_positions"] = fields.required_int("n_positions");
  model.dims["ffn_hidden"] = fields.optional_int("n_inner", 4 * model.dims["hidden"]);
  read_tied_embeddings(fields, model, true);
  // HF's gelu_new is Python (pow, tanh, muls) and saves more than nn.GELU, which the family
  // plans (nanoGPT's layout).
  fields.expect_string("activation_function", {"gelu"});
  if (fields.optional_bool("add_cross_attention", false)) {
    fields.note_unmodelled("add_cross_attention", "the cross-attention blocks are not planned");
  }
  fields.read("scale_attn_by_inverse_layer_idx");  // a scalar divide on the same scores
}

}  // namespace oomcast::scenario::hf

namespace oomcast::scenario::hf {

namespace {

// int(head_dim * fraction), as GPT-NeoX (rotary_pct) and Phi (partial_rotary_factor) compute
// the rotated width.
int64_t rotary_dims(HfConfigFields& fields, const ModelConfig& model, const std::string& key, double fallback) {
  const double fraction = fields.optional_number(key, fallback);
  if (fraction <= 0.0 || fraction > 1.0) fields.fail(key, "config.json key '" + key + "' must be in (0, 1]");
  const int64_t head_dim = model.dims.at("hidden") / model.dims.at("heads");
  return static_cast<int64_t>(static_cast<double>(head_dim) * fraction);
}

}  // namespace

void read_gpt_neox(HfConfigFields& fields, ModelConfig& model) {
  model.family = "gpt_neox";
  read_transformer_dims(fields, model);
  model.dims["vocab"] = fields.required_int("vocab_size");
  model.dims["max_positions"] = fields.optional_int("max_position_embeddings", 2048);
  read_tied_embeddings(fields, model, false);
  if (model.dims["hidden"] % model.dims["heads"] != 0) return;  // refused by the shape check
  model.dims["rotary_dims"] = rotary_dims(fields, model, "rotary_pct", 0.25);
  model.options["parallel_residual"] = fields.optional_bool("use_parallel_residual", true) ? "true" : "false";
  model.options["bias"] = fields.optional_bool("attention_bias", true) ? "true" : "false";
  fields.expect_string("hidden_act", {"gelu"});
}

void read_phi(HfConfigFields& fields, ModelConfig& model) {
  model.family = "gpt_neox";
  read_transformer_dims(fields, model);
  model.dims["kv_heads"] = fields.optional_int("num_key_value_heads", model.dims["heads"]);
  model.dims["vocab"] = fields.required_int("vocab_size");
  model.dims["max_positions"] = fields.optional_int("max_position_embeddings", 2048);
  read_tied_embeddings(fields, model, false);
  if (model.dims["hidden"] % model.dims["heads"] != 0) return;
  model.dims["rotary_dims"] = rotary_dims(fields, model, "partial_rotary_factor", 0.5);
  // PhiDecoderLayer: one input_layernorm feeds attention and MLP in parallel; separate
  // q/k/v with biases, dense with bias, fc1/fc2 with biases, lm_head with a bias.
  model.options["parallel_residual"] = "true";
  model.options["shared_norm"] = "true";
  model.options["fused_qkv"] = "false";
  model.options["lm_head_bias"] = "true";
  const std::string act = fields.optional_string("hidden_act", "gelu_new");
  if (act == "gelu_new") {
    model.options["python_gelu"] = "true";
  } else if (act != "gelu") {
    fields.note_unmodelled("hidden_act", "\"" + act + "\" is planned as gelu");
  }
  if (fields.optional_bool("qk_layernorm", false)) {
    fields.note_unmodelled("qk_layernorm", "the LayerNorms on q and k are not planned");
  }
}

void read_falcon(HfConfigFields& fields, ModelConfig& model) {
  model.family = "gpt_neox";
  model.dims["layers"] = fields.required_int_of({"num_hidden_layers", "n_layer"});
  model.dims["hidden"] = fields.required_int("hidden_size");
  model.dims["heads"] = fields.required_int_of({"num_attention_heads", "n_head"});
  model.dims["vocab"] = fields.required_int("vocab_size");
  model.dims["max_positions"] = fields.optional_int("max_position_embeddings", 2048);
  model.dims["ffn_hidden"] = fields.optional_int("ffn_hidden_size", 4 * model.dims["hidden"]);
  read_tied_embeddings(fields, model, true);
  const bool new_architecture = fields.optional_bool("new_decoder_architecture", false);
  const bool multi_query = fields.optional_bool("multi_query", true);
  int64_t kv_heads = model.dims["heads"];
  if (new_architecture) {
    kv_heads = fields.optional_int("num_kv_heads", model.dims["heads"]);
  } else if (multi_query) {
    kv_heads = 1;
    fields.read("num_kv_heads");
  }
  model.dims["kv_heads"] = kv_heads;
  const bool parallel = new_architecture || fields.optional_bool("parallel_attn", true);
  fields.read("parallel_attn");
  model.options["parallel_residual"] = parallel ? "true" : "false";
  // Falcon-7B: one input_layernorm for both branches; the new architecture has ln_attn and
  // ln_mlp unless num_ln_in_parallel_attn is 1.
  const int64_t parallel_norms = fields.optional_int("num_ln_in_parallel_attn", new_architecture ? 2 : 1);
  model.options["shared_norm"] = parallel && parallel_norms == 1 ? "true" : "false";
  model.options["bias"] = fields.optional_bool("bias", false) ? "true" : "false";
  if (fields.optional_bool("alibi", false)) {
    fields.note_unmodelled("alibi", "planned with rotary embeddings; ALiBi's bias tensor is not planned");
  }
  if (fields.optional_bool("apply_residual_connection_post_layernorm", false)) {
    fields.note_unmodelled("apply_residual_connection_post_layernorm", "planned with the residual before the norm");
  }
  fields.read("rotary");
}

}  // namespace oomcast::scenario::hf
