// JobConfig: what kind of job runs around the model (training, inference, repeated forwards),
// which parameters train (all, none, patterns, LoRA adapters), how the base weights are
// stored (16-bit, LLM.int8, 4-bit NF4/FP4) and how the model is loaded onto the device.
// Read by scenario/job_config_loader.cc; docs/scenario-format.md documents the keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oomcast::scenario {

enum class JobKind { Train, Inference, Forward, Generate };

enum class KvCacheKind { Dynamic, Static };

// `job: {kind: generate, ...}`: model.generate() with a KV cache.
struct GenerateConfig {
  int64_t prompt_len = 0;                  // 0: the scenario's seq_len
  int64_t new_tokens = 32;
  int64_t num_return_sequences = 1;        // sampled sequences per prompt (the batch is expanded)
  int64_t num_beams = 1;                   // beam search: the batch is expanded, the cache reordered per step
  KvCacheKind cache = KvCacheKind::Dynamic;  // torch.cat-grown (DynamicCache) or preallocated (StaticCache)
  int64_t max_cache_len = 0;               // static: 0 = prompt_len + new_tokens
  bool prefill_full_logits = true;         // false: lm_head on the last position only (logits_to_keep=1)
  bool logits_fp32 = false;                // the model returns logits.float() (older HF Llama)
};

// The job section: `job: inference` or a map.
struct JobSection {
  JobKind kind = JobKind::Train;
  int64_t batches = 0;                     // forward passes (inference, forward); 0 = iterations
  bool inference_mode = false;             // torch.inference_mode() instead of torch.no_grad()
  bool compute_loss = true;                // false: the model is called without labels (logits only)
  bool eval_mode = true;                   // model.eval() (dropout off); forward defaults to train()
  std::vector<std::string> held_outputs;   // what the loop binds until the next batch rebinds it
  GenerateConfig generate;
};

// PEFT's LoraConfig keys, as PEFT names them.
struct LoraConfig {
  bool enabled = false;
  int64_t r = 8;
  double alpha = 8.0;
  double dropout = 0.0;                    // lora_dropout: nn.Dropout on the adapter's input
  std::vector<std::string> target_modules; // names ("q_proj", "c_attn"), or "all-linear"
  std::string bias = "none";               // none | all | lora_only
  // get_peft_model(..., autocast_adapter_dtype=True), PEFT's default: adapters of a 16-bit base
  // are made fp32. false (and torchtune's bf16 recipes): adapters in the base's dtype.
  bool autocast_adapter_dtype = true;
  bool use_dora = false;                   // DoRA: a magnitude vector per adapted module
};

// PEFT's IA3Config keys: a learned vector scales the output of each target module, or the
// input of those that are also feedforward_modules.
struct Ia3Config {
  bool enabled = false;
  std::vector<std::string> target_modules;
  std::vector<std::string> feedforward_modules;  // a subset of target_modules
};

enum class TrainableKind { All, None, Patterns };

struct TrainableConfig {
  TrainableKind kind = TrainableKind::All;
  std::vector<std::string> patterns;       // Patterns: parameters that train
  std::vector<std::string> freeze;         // parameters frozen on top of the above
  LoraConfig lora;                         // adapters: the base model is frozen
  Ia3Config ia3;                           // IA3 vectors: the base model is frozen
  // PEFT's enable_input_require_grads(): the input embedding's output requires grad, so a
  // reentrant checkpoint of the first block still builds a graph. -1 = the default (on when
  // checkpointing runs with frozen parameters, as HF/PEFT do), 0 off, 1 on.
  int input_require_grads = -1;
  bool master_weights = true;              // pure_bf16: fp32 master copies in the optimizer
  // PEFT's prepare_model_for_kbit_training on a quantized model: every parameter that is not
  // quantized (embeddings, norms, lm_head) cast from 16 bits to fp32 after loading.
  bool prepare_kbit = false;
  bool any_frozen() const { return kind != TrainableKind::All || !freeze.empty() || lora.enabled || ia3.enabled; }
};

enum class WeightFormat { Default, Fp32, Fp16, Bf16, Int8, Nf4, Fp4 };

// Which library stores and runs the quantized weights: bitsandbytes (Params4bit / Int8Params,
// Hugging Face's BitsAndBytesConfig) or torchao's NF4Tensor (torchtune's QLoRA recipes).
enum class QuantLibrary { Bitsandbytes, Torchao };

// How the base weights are stored, independent of `precision` (bitsandbytes quantization or
// a 16-bit checkpoint loaded with torch_dtype).
struct WeightsConfig {
  WeightFormat format = WeightFormat::Default;   // Default: what `precision` implies
  WeightFormat compute_dtype = WeightFormat::Default;  // bnb_4bit_compute_dtype / torch_dtype of the rest
  bool double_quant = true;                // bnb_4bit_use_double_quant (QLoRA)
  int64_t block_size = 64;                 // 4-bit absmax block (bitsandbytes: 64)
  std::vector<std::string> skip_modules = {"lm_head"};  // kept unquantized (llm_int8_skip_modules)
  QuantLibrary library = QuantLibrary::Bitsandbytes;
  bool quantized() const { return format == WeightFormat::Int8 || format == WeightFormat::Nf4 || format == WeightFormat::Fp4; }
};

// OnDevice: built from its config where it runs, at its final dtype. FromPretrained: the same
// tensors, but transformers instantiates the model on the meta device (device_map /
// low_cpu_mem_usage) and loads the weights into it, so the constructor's temporaries are never
// allocated. BuiltThenCast: built in fp32 from its config, then model.to(dtype).
enum class LoadMethod { OnDevice, FromPretrained, BuiltThenCast };

struct LoadingConfig {
  LoadMethod method = LoadMethod::OnDevice;
};

struct JobConfig {
  JobSection job;
  TrainableConfig training;
  WeightsConfig weights;
  LoadingConfig loading;
};

}  // namespace oomcast::scenario
