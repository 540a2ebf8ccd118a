// The per-model_type readers of Hugging Face config.json files (hf_readers_*.cc) and their
// table. Each reader fills the family, dimensions and options of one family from the keys
// that model_type's HF configuration class defines.
#pragma once

#include <cstdint>
#include <vector>

#include "scenario/hf_config_fields.h"
#include "scenario/scenario.h"

namespace oomcast::scenario::hf {

using Reader = void (*)(HfConfigFields& fields, ModelConfig& model);

struct ModelTypeReader {
  const char* model_type;
  Reader read;
};

const std::vector<ModelTypeReader>& model_type_readers();

// hf_readers_gpt.cc: learned positions or partial rotary, LayerNorm, GELU.
void read_gpt2(HfConfigFields& fields, ModelConfig& model);
void read_gpt_neox(HfConfigFields& fields, ModelConfig& model);
void read_phi(HfConfigFields& fields, ModelConfig& model);
void read_falcon(HfConfigFields& fields, ModelConfig& model);

// hf_readers_llama.cc: what differs between the Llama-style configuration classes.
struct DecoderDefaults {
  int64_t max_positions = 2048;
  int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads unless the config sets head_dim
  bool tied = false;
  bool qkv_bias = false;
  bool gelu = false;     // GELU-tanh MLP (Gemma) instead of SiLU
};
// The keys every Llama-style config shares, into the llama family.
void read_llama_decoder(HfConfigFields& fields, ModelConfig& model, const DecoderDefaults& defaults);
void read_llama(HfConfigFields& fields, ModelConfig& model);
void read_mistral(HfConfigFields& fields, ModelConfig& model);
void read_qwen2(HfConfigFields& fields, ModelConfig& model);
void read_qwen3(HfConfigFields& fields, ModelConfig& model);
void read_gemma(HfConfigFields& fields, ModelConfig& model);
void read_gemma2(HfConfigFields& fields, ModelConfig& model);
void read_phi3(HfConfigFields& fields, ModelConfig& model);
// hf_readers_moe.cc
void read_mixtral(HfConfigFields& fields, ModelConfig& model);
void read_qwen2_moe(HfConfigFields& fields, ModelConfig& model);
void read_qwen3_moe(HfConfigFields& fields, ModelConfig& model);
// hf_readers_encoder.cc
void read_bert(HfConfigFields& fields, ModelConfig& model);
void read_vit(HfConfigFields& fields, ModelConfig& model);

}  // namespace oomcast::scenario::hf
