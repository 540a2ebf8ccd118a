// config.json readers for the mixture-of-experts decoders: Mixtral, Qwen2-MoE (Qwen1.5-MoE)
// and Qwen3-MoE, the llama family with its MLP replaced by routed experts.
#include "scenario/hf_readers.h"

namespace oomcast::scenario::hf {

namespace {

void read_routing(HfConfigFields& fields, ModelConfig& model, const char* experts_key, bool normalize_default) {
  model.dims["experts"] = fields.required_int(experts_key);
  model.dims["experts_per_token"] = fields.optional_int("num_experts_per_tok", 2);
  if (model.dims["experts_per_token"] > model.dims["experts"]) {
    fields.fail("num_experts_per_tok", "num_experts_per_tok (" + std::to_string(model.dims["experts_per_token"]) +
                                           ") must not exceed " + experts_key + " (" +
                                           std::to_string(model.dims["experts"]) + ")");
  }
  model.options["normalize_top_k"] = fields.optional_bool("norm_topk_prob", normalize_default) ? "true" : "false";
  if (fields.optional_bool("output_router_logits", false)) model.options["router_logits_output"] = "true";
  fields.optional_number("router_aux_loss_coef", 0.0);  // a scalar weight of the auxiliary loss
  if (fields.optional_number("router_jitter_noise", 0.0) > 0.0) {
    fields.note_unmodelled("router_jitter_noise", "the training-time jitter's uniform noise tensor is not planned");
  }
}

// Qwen-MoE: layer i has the sparse block when it is not in mlp_only_layers and
// (i + 1) % decoder_sparse_step == 0; the others a dense MLP of intermediate_size.
void read_sparse_layers(HfConfigFields& fields, ModelConfig& model) {
  model.dims["decoder_sparse_step"] = fields.optional_int("decoder_sparse_step", 1);
  // Indices past the last layer select nothing, as in HF.
  model.mlp_only_layers = fields.optional_int_list("mlp_only_layers");
}

}  // namespace

void read_mixtral(HfConfigFields& fields, ModelConfig& model) {
  read_llama_decoder(fields, model, {32768});
  // MixtralSparseMoeBlock always renormalises the top-k weights.
  read_routing(fields, model, "num_local_experts", true);
  model.options["normalize_top_k"] = "true";
  model.options["mixtral_expert_names"] = "true";
}

void read_qwen2_moe(HfConfigFields& fields, ModelConfig& model) {
  DecoderDefaults defaults{32768};
  defaults.qkv_bias = true;
  read_llama_decoder(fields, model, defaults);
  read_routing(fields, model, "num_experts", false);
  model.dims["expert_ffn_hidden"] = fields.required_int("moe_intermediate_size");
  if (fields.has("shared_expert_intermediate_size")) {
    model.dims["shared_expert_ffn"] = fields.optional_int("shared_expert_intermediate_size", 0);
  }
  read_sparse_layers(fields, model);
}

void read_qwen3_moe(HfConfigFields& fields, ModelConfig& model) {
  DecoderDefaults defaults{32768};
  defaults.head_dim = 128;
  read_llama_decoder(fields, model, defaults);
  model.options["qk_norm"] = "true";
  read_routing(fields, model, "num_experts", false);
  model.dims["expert_ffn_hidden"] = fields.required_int("moe_intermediate_size");
  read_sparse_layers(fields, model);
}

}  // namespace oomcast::scenario::hf
