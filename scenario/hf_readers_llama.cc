// config.json readers for the Llama-style decoders (RMSNorm, rotary, grouped-query
// attention, gated MLP) the llama family plans: Llama, Mistral, Qwen2/Qwen3, Gemma/Gemma 2
// and Phi-3. The mixture-of-experts ones are in hf_readers_moe.cc.
#include "scenario/hf_readers.h"

namespace oomcast::scenario::hf {

void read_llama_decoder(HfConfigFields& fields, ModelConfig& model, const DecoderDefaults& defaults) {
  model.family = "llama";
  read_transformer_dims(fields, model);
  model.dims["kv_heads"] = fields.optional_int("num_key_value_heads", model.dims["heads"]);
  model.dims["vocab"] = fields.required_int("vocab_size");
  model.dims["max_positions"] = fields.optional_int("max_position_embeddings", defaults.max_positions);
  if (fields.has("head_dim") || defaults.head_dim > 0) {
    model.dims["head_dim"] = fields.optional_int("head_dim", defaults.head_dim);
  }
  read_tied_embeddings(fields, model, defaults.tied);
  // Llama and Qwen3: attention_bias puts biases on q/k/v/o; Qwen2 always has q/k/v biases.
  const bool attention_bias = fields.optional_bool("attention_bias", false);
  if (attention_bias || defaults.qkv_bias) model.options["qkv_bias"] = "true";
  if (attention_bias) model.options["o_bias"] = "true";
  if (fields.optional_bool("mlp_bias", false)) model.options["mlp_bias"] = "true";
  // The sliding window changes which scores are masked, not the size of the mask, the
  // scores or what attention saves: nothing to plan. (Qwen's use_sliding_window and
  // max_window_layers only choose the layers it applies to.)
  fields.optional_int("sliding_window", 0, 0);
  fields.optional_bool("use_sliding_window", false);
  fields.optional_int("max_window_layers", 0, 0);
  if (defaults.gelu) {
    model.options["gelu_mlp"] = "true";
    // Gemma runs GELU-tanh whatever hidden_act says when hidden_activation is absent.
    fields.read("hidden_act");
    fields.expect_string("hidden_activation", {"gelu_pytorch_tanh", "gelu"});
  } else {
    fields.expect_string("hidden_act", {"silu"});
  }
}

void read_llama(HfConfigFields& fields, ModelConfig& model) { read_llama_decoder(fields, model, {2048}); }

void read_mistral(HfConfigFields& fields, ModelConfig& model) { read_llama_decoder(fields, model, {32768}); }

void read_qwen2(HfConfigFields& fields, ModelConfig& model) {
  DecoderDefaults defaults{32768};
  defaults.qkv_bias = true;  // Qwen2Attention: q/k/v with bias=True, o_proj without
  read_llama_decoder(fields, model, defaults);
}

void read_qwen3(HfConfigFields& fields, ModelConfig& model) {
  DecoderDefaults defaults{32768};
  defaults.head_dim = 128;
  read_llama_decoder(fields, model, defaults);
  model.options["qk_norm"] = "true";
}

void read_gemma(HfConfigFields& fields, ModelConfig& model) {
  DecoderDefaults defaults{8192};
  defaults.head_dim = 256;
  defaults.tied = true;
  defaults.gelu = true;
  read_llama_decoder(fields, model, defaults);
  model.options["scale_embedding"] = "true";
  model.options["offset_norm"] = "true";
}

void read_gemma2(HfConfigFields& fields, ModelConfig& model) {
  read_gemma(fields, model);
  model.options["sandwich_norm"] = "true";
  fields.optional_number("query_pre_attn_scalar", 0.0);  // the scores' scale, not their size
  fields.read("cache_implementation");                   // generation only
  if (fields.optional_number("final_logit_softcapping", 0.0) > 0.0) model.options["final_logit_softcap"] = "true";
  // Eager attention's softcap makes three more score-sized tensors (tanh's result is saved);
  // SDPA and flash attention allocate nothing for it.
  if (fields.optional_number("attn_logit_softcapping", 0.0) > 0.0) model.options["attn_logit_softcap"] = "true";
}

void read_phi3(HfConfigFields& fields, ModelConfig& model) {
  read_llama_decoder(fields, model, {4096});
  model.options["fused_qkv"] = "true";
  model.options["fused_gate_up"] = "true";
  if (model.options.count("o_bias")) {
    // Phi3Attention has no attention_bias switch: its projections never have biases.
    model.options.erase("qkv_bias");
    model.options.erase("o_bias");
    fields.note_unmodelled("attention_bias", "Phi-3's projections have no biases; planned without");
  }
  fields.read("original_max_position_embeddings");
}

}  // namespace oomcast::scenario::hf
