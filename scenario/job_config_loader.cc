// The `job`, `training`, `weights` and `loading` sections (docs/scenario-format.md#job).
#include "scenario/job_config_loader.h"

#include <algorithm>
#include <filesystem>

#include "base/input_error.h"
#include "scenario/hf_config.h"
#include "scenario/model_families.h"
#include "scenario/peft_adapter_config.h"

namespace oomcast::scenario {

namespace {

constexpr int64_t kMaxBatches = 100000;

const std::vector<std::string> kJobKinds = {"train", "inference", "forward", "generate"};
const std::vector<std::string> kWeightFormats = {"fp32", "fp16", "bf16", "int8", "nf4", "fp4"};

JobKind job_kind_of(const std::string& name) {
  if (name == "inference") return JobKind::Inference;
  if (name == "forward") return JobKind::Forward;
  if (name == "generate") return JobKind::Generate;
  return JobKind::Train;
}

WeightFormat weight_format_of(const std::string& name) {
  if (name == "fp32") return WeightFormat::Fp32;
  if (name == "fp16") return WeightFormat::Fp16;
  if (name == "bf16") return WeightFormat::Bf16;
  if (name == "int8") return WeightFormat::Int8;
  if (name == "nf4") return WeightFormat::Nf4;
  if (name == "fp4") return WeightFormat::Fp4;
  return WeightFormat::Default;
}

std::vector<std::string> string_list(const YamlNode& node) {
  std::vector<std::string> items = node.as_string_list();
  for (const std::string& item : items) {
    if (item.empty()) node.fail("'" + node.path() + "' has an empty name");
  }
  return items;
}

JobSection read_job(const YamlNode& node, const Scenario& scenario) {
  JobSection job;
  if (node.is_missing()) return job;
  if (node.is_scalar()) {
    job.kind = job_kind_of(node.as_choice(kJobKinds));
  } else {
    node.reject_unknown_keys({"kind", "batches", "grad_mode", "outputs", "held_outputs", "model_mode", "prompt_len",
                              "new_tokens", "num_return_sequences", "num_beams", "cache", "max_cache_len",
                              "prefill_logits", "logits_fp32"});
    job.kind = job_kind_of(node.choice_or("kind", "train", kJobKinds));
    const std::vector<std::string> generate_keys = {"prompt_len", "new_tokens", "num_return_sequences", "num_beams",
                                                    "cache", "max_cache_len", "prefill_logits", "logits_fp32"};
    for (const std::string& key : generate_keys) {
      YamlNode value = node.child(key);
      if (!value.is_missing() && job.kind != JobKind::Generate) value.fail("'job." + key + "' applies only to kind generate");
    }
    if (job.kind == JobKind::Generate) {
      for (const char* key : {"batches", "grad_mode", "outputs", "held_outputs", "model_mode"}) {
        YamlNode value = node.child(key);
        if (!value.is_missing()) value.fail("'job." + std::string(key) + "' does not apply to kind generate");
      }
      GenerateConfig& generate = job.generate;
      generate.prompt_len = node.integer_or("prompt_len", 0, 1, 1 << 24);
      generate.new_tokens = node.integer_or("new_tokens", 32, 1, 1 << 20);
      generate.num_return_sequences = node.integer_or("num_return_sequences", 1, 1, 4096);
      generate.num_beams = node.integer_or("num_beams", 1, 1, 256);
      if (generate.num_beams > 1 && generate.num_return_sequences > generate.num_beams) {
        node.child("num_return_sequences").fail("'job.num_return_sequences' cannot exceed 'job.num_beams' in beam search");
      }
      generate.cache = node.choice_or("cache", "dynamic", {"dynamic", "static"}) == "static" ? KvCacheKind::Static : KvCacheKind::Dynamic;
      generate.max_cache_len = node.integer_or("max_cache_len", 0, 1, 1 << 24);
      if (generate.max_cache_len > 0 && generate.cache != KvCacheKind::Static) {
        node.child("max_cache_len").fail("'job.max_cache_len' applies to cache static");
      }
      // transformers >= 4.45 generate() passes logits_to_keep=1 (first named num_logits_to_keep) to
      // every model whose forward takes it (transformers 5.24 generation/utils.py, "set it to 1 to
      // avoid computing the whole logit matrix"): the prefill computes the last position only.
      generate.prefill_full_logits = node.choice_or("prefill_logits", "last", {"full", "last"}) == "full";
      generate.logits_fp32 = node.bool_or("logits_fp32", false);
    }
    if (job.kind == JobKind::Train) {
      for (const char* key : {"batches", "grad_mode", "outputs", "held_outputs", "model_mode"}) {
        YamlNode value = node.child(key);
        if (!value.is_missing()) value.fail("'job." + std::string(key) + "' applies only to kind inference or forward");
      }
    }
    job.batches = node.integer_or("batches", 0, 1, kMaxBatches);
    YamlNode grad_mode = node.child("grad_mode");
    if (!grad_mode.is_missing()) {
      if (job.kind != JobKind::Inference) grad_mode.fail("'job.grad_mode' applies only to kind inference (forward keeps grad on)");
      job.inference_mode = grad_mode.as_choice({"no_grad", "inference_mode"}) == "inference_mode";
    }
    job.compute_loss = node.choice_or("outputs", "loss", {"loss", "logits"}) == "loss";
    YamlNode held = node.child("held_outputs");
    if (!held.is_missing()) {
      for (const YamlNode& item : held.is_scalar() ? std::vector<YamlNode>{held} : held.items()) {
        std::string name = item.as_choice({"loss", "logits"});
        if (name == "loss" && !job.compute_loss) item.fail("'job.held_outputs' lists loss, but 'job.outputs' is logits (no labels, no loss)");
        job.held_outputs.push_back(name);
      }
    }
    YamlNode mode = node.child("model_mode");
    job.eval_mode = mode.is_missing() ? job.kind == JobKind::Inference : mode.as_choice({"eval", "train"}) == "eval";
  }
  if (job.kind == JobKind::Generate) {
    job.eval_mode = true;
    job.compute_loss = false;
    if (job.generate.prompt_len == 0) job.generate.prompt_len = scenario.seq_len;
    if (job.generate.cache == KvCacheKind::Static && job.generate.max_cache_len == 0) {
      job.generate.max_cache_len = job.generate.prompt_len + job.generate.new_tokens;
    }
    if (job.generate.cache == KvCacheKind::Static &&
        job.generate.max_cache_len < job.generate.prompt_len + job.generate.new_tokens) {
      node.child("max_cache_len").fail("'job.max_cache_len' is shorter than prompt_len + new_tokens");
    }
    if (families::is_vision(scenario.model) || scenario.model.family == "mlp" || scenario.model.family == "bert") {
      node.fail("job generate needs a decoder (gpt2 or llama family), not " + scenario.model.family);
    }
  } else if (job.kind != JobKind::Train) {
    if (node.is_scalar()) job.eval_mode = job.kind == JobKind::Inference;
    if (job.held_outputs.empty() && (node.is_scalar() || node.child("held_outputs").is_missing())) {
      job.held_outputs.push_back(job.compute_loss ? "loss" : "logits");
    }
    if (job.batches == 0) job.batches = scenario.iterations;
  }
  return job;
}

LoraConfig read_lora(const YamlNode& node) {
  LoraConfig lora;
  lora.enabled = true;
  node.require_map();
  node.reject_unknown_keys({"r", "alpha", "lora_alpha", "dropout", "lora_dropout", "target_modules", "bias",
                            "autocast_adapter_dtype", "use_dora"});
  lora.r = node.integer_or("r", 8, 1, 1 << 16);
  if (!node.child("alpha").is_missing() && !node.child("lora_alpha").is_missing()) {
    node.child("lora_alpha").fail("give 'alpha' or 'lora_alpha', not both");
  }
  lora.alpha = node.number_or(node.child("lora_alpha").is_missing() ? "alpha" : "lora_alpha", 8.0, 0.0, 1e9);
  if (!node.child("dropout").is_missing() && !node.child("lora_dropout").is_missing()) {
    node.child("lora_dropout").fail("give 'dropout' or 'lora_dropout', not both");
  }
  lora.dropout = node.number_or(node.child("lora_dropout").is_missing() ? "dropout" : "lora_dropout", 0.0, 0.0, 0.999999);
  YamlNode targets = node.child("target_modules");
  if (targets.is_missing()) {
    node.fail("'training.trainable.lora' needs 'target_modules' (module names such as q_proj, v_proj, c_attn, or all-linear)");
  }
  lora.target_modules = string_list(targets);
  lora.bias = node.choice_or("bias", "none", {"none", "all", "lora_only"});
  YamlNode autocast = node.child("autocast_adapter_dtype");
  if (!autocast.is_missing()) lora.autocast_adapter_dtype = autocast.as_bool();
  YamlNode dora = node.child("use_dora");
  if (!dora.is_missing() && dora.as_bool()) {
    lora.use_dora = true;
    // PEFT's DoRA with lora_dropout runs F.linear(dropout(x), W) again for the base part.
    if (lora.dropout > 0.0) dora.fail("'use_dora' with lora_dropout above 0 is not modelled (use lora_dropout: 0)");
  }
  return lora;
}

// PEFT's IA3Config: target_modules and feedforward_modules (a subset of them, as PEFT checks).
Ia3Config read_ia3(const YamlNode& node) {
  Ia3Config ia3;
  ia3.enabled = true;
  node.require_map();
  node.reject_unknown_keys({"target_modules", "feedforward_modules"});
  YamlNode targets = node.child("target_modules");
  if (targets.is_missing()) node.fail("'training.trainable.ia3' needs 'target_modules' (k_proj, v_proj, down_proj, ...)");
  ia3.target_modules = string_list(targets);
  YamlNode feedforward = node.child("feedforward_modules");
  if (!feedforward.is_missing()) ia3.feedforward_modules = string_list(feedforward);
  for (const std::string& module : ia3.feedforward_modules) {
    if (std::find(ia3.target_modules.begin(), ia3.target_modules.end(), module) == ia3.target_modules.end()) {
      feedforward.fail("'feedforward_modules' " + module + " is not in target_modules (PEFT requires a subset)");
    }
  }
  return ia3;
}

// training.master_weights false acts on the engines that step the model's own 16-bit tensors
// (none, DDP, FSDP and FSDP2 without MixedPrecision); the others always keep fp32 copies.
void check_master_weights_engine(const YamlNode& root, const Scenario& scenario) {
  YamlNode master = root.child("training").child("master_weights");
  const ParallelConfig& parallel = scenario.parallel;
  if (parallel.engine == ParallelEngine::DeepSpeed) {
    // DeepSpeed 0.19.8 builds fp32 partitions for every bf16/fp16 group it steps
    // (runtime/zero/stage_1_and_2.py single_partition_of_fp32_groups, stage3.py
    // fp32_partitioned_groups_flat) unless its own bf16 section sets bf16_master_weights_and_grads
    // (runtime/precision_config.py, ZeRO-Offload only), which is not modelled.
    master.fail("'training.master_weights' false is not modelled under DeepSpeed: its ZeRO optimizers keep fp32 "
                "master partitions (bf16_master_weights_and_grads, ZeRO-Offload only, is not modelled)");
  }
  const bool fsdp_mixed = (parallel.engine == ParallelEngine::Fsdp && parallel.fsdp.mixed_precision) ||
                          (parallel.engine == ParallelEngine::Fsdp2 && parallel.fsdp2.mixed_precision);
  if (fsdp_mixed) {
    master.fail("'training.master_weights' false contradicts FSDP mixed_precision, whose fp32 shards are the master "
                "weights: leave mixed_precision off to train bf16 shards with bf16 optimizer states");
  }
}

// optimizer.in_backward as torchtune runs it (recipes/full_finetune_single_device.py, 0.6):
// no gradient accumulation (the step would run on every micro-batch) and one process.
void check_optimizer_in_backward(const YamlNode& root, const Scenario& scenario, bool training_job) {
  YamlNode in_backward = root.child("optimizer").child("in_backward");
  if (!training_job) in_backward.fail("'optimizer.in_backward' applies to job train");
  if (scenario.grad_accum_steps > 1) {
    in_backward.fail("'optimizer.in_backward' steps in every backward: it cannot accumulate gradients "
                     "(grad_accum_steps " + std::to_string(scenario.grad_accum_steps) + ")");
  }
  if (scenario.parallel.engine != ParallelEngine::None) {
    in_backward.fail("'optimizer.in_backward' with a 'parallel' engine is not modelled");
  }
  if (Precision::AmpFp16 == scenario.precision) {
    in_backward.fail("'optimizer.in_backward' with amp_fp16 is not modelled (GradScaler.unscale_ needs every grad)");
  }
}

// `warnings` receives those of a PEFT adapter_config.json the section names.
TrainableConfig read_training(const YamlNode& node, const Scenario& scenario, std::vector<std::string>& warnings) {
  TrainableConfig config;
  if (node.is_missing()) return config;
  // PEFT users write the adapter where they think of it; say where it goes.
  if (!node.child("lora").is_missing()) {
    node.child("lora").fail("'training.lora': LoRA goes under 'training.trainable', as in training: {trainable: {lora: {r: 16, ...}}}");
  }
  node.reject_unknown_keys({"trainable", "freeze", "input_require_grads", "master_weights", "prepare_model_for_kbit_training"});
  YamlNode trainable = node.child("trainable");
  if (trainable.is_scalar()) {
    std::string word = trainable.as_string();
    std::string base_dir = std::filesystem::path(scenario.source_path).parent_path().string();
    if (base_dir.empty()) base_dir = ".";
    if (word != "all" && word != "none" && names_peft_adapter_config(word, base_dir)) {
      // A PEFT adapter_config.json, read as it is (peft_adapter_config.h).
      std::filesystem::path file(word);
      if (file.is_relative()) file = std::filesystem::path(base_dir) / file;
      PeftAdapter adapter;
      try {
        adapter = read_peft_adapter_config(file.string());
      } catch (const InputError& error) {
        if (!error.where().file.empty()) throw;  // the error is inside the adapter config
        trainable.fail(error.message());
      }
      config.kind = TrainableKind::None;  // the base model is frozen; the adapters train
      config.lora = adapter.lora;
      config.ia3 = adapter.ia3;
      warnings.insert(warnings.end(), adapter.warnings.begin(), adapter.warnings.end());
    } else if (word == "all") {
      config.kind = TrainableKind::All;
    } else if (word == "none") {
      config.kind = TrainableKind::None;
    } else {
      config.kind = TrainableKind::Patterns;  // one pattern
      config.patterns = {word};
    }
  } else if (trainable.is_sequence()) {
    config.kind = TrainableKind::Patterns;
    config.patterns = string_list(trainable);
  } else if (trainable.is_map()) {
    // PEFT's other methods (peft 0.21.2 PeftType names, lower case) are refused by name.
    for (const char* method : {"dora", "prompt_tuning", "prefix_tuning", "p_tuning", "vera", "oft", "boft",
                               "loha", "lokr", "adalora", "trainable_tokens"}) {
      YamlNode given = trainable.child(method);
      if (!given.is_missing()) {
        given.fail(std::string("PEFT method '") + method + "' is not modelled yet (LoRA and IA3 are)");
      }
    }
    trainable.reject_unknown_keys({"lora", "ia3"});
    config.kind = TrainableKind::None;  // the base model is frozen; the adapters train
    if (!trainable.child("lora").is_missing() && !trainable.child("ia3").is_missing()) {
      trainable.child("ia3").fail("'training.trainable' takes one PEFT method: lora or ia3");
    }
    if (!trainable.child("lora").is_missing()) config.lora = read_lora(trainable.child("lora"));
    if (!trainable.child("ia3").is_missing()) config.ia3 = read_ia3(trainable.child("ia3"));
  }
  YamlNode freeze = node.child("freeze");
  if (!freeze.is_missing()) config.freeze = string_list(freeze);
  YamlNode input_grads = node.child("input_require_grads");
  if (!input_grads.is_missing()) config.input_require_grads = input_grads.as_bool() ? 1 : 0;
  YamlNode prepare = node.child("prepare_model_for_kbit_training");
  if (!prepare.is_missing()) config.prepare_kbit = prepare.as_bool();
  YamlNode master = node.child("master_weights");
  if (!master.is_missing()) {
    config.master_weights = master.as_bool();
    if (!config.master_weights && scenario.precision != Precision::PureBf16) {
      master.fail("'training.master_weights' applies to precision pure_bf16 (the other precisions keep fp32 weights)");
    }
  }
  return config;
}

WeightsConfig read_weights(const YamlNode& node) {
  WeightsConfig config;
  if (node.is_missing()) return config;
  if (node.is_scalar()) {
    config.format = weight_format_of(node.as_choice(kWeightFormats));
  } else {
    node.reject_unknown_keys({"format", "compute_dtype", "double_quant", "block_size", "skip_modules", "library"});
    YamlNode format = node.child("format");
    if (format.is_missing()) node.fail("'weights' needs 'format' (" + std::string("fp32, fp16, bf16, int8, nf4 or fp4") + ")");
    config.format = weight_format_of(format.as_choice(kWeightFormats));
    YamlNode compute = node.child("compute_dtype");
    if (!compute.is_missing()) config.compute_dtype = weight_format_of(compute.as_choice({"fp32", "fp16", "bf16"}));
    YamlNode double_quant = node.child("double_quant");
    if (!double_quant.is_missing()) {
      if (config.format != WeightFormat::Nf4 && config.format != WeightFormat::Fp4) {
        double_quant.fail("'weights.double_quant' applies to the 4-bit formats nf4 and fp4");
      }
      config.double_quant = double_quant.as_bool();
    }
    YamlNode block = node.child("block_size");
    if (!block.is_missing()) {
      if (config.format != WeightFormat::Nf4 && config.format != WeightFormat::Fp4) {
        block.fail("'weights.block_size' applies to the 4-bit formats nf4 and fp4");
      }
      config.block_size = block.as_integer(16, 4096);
    }
    YamlNode skip = node.child("skip_modules");
    if (!skip.is_missing()) config.skip_modules = string_list(skip);
    YamlNode library = node.child("library");
    if (!library.is_missing() && library.as_choice({"bitsandbytes", "torchao"}) == "torchao") {
      // torchao's to_nf4 (torchtune's QLoRA): NF4 only, and it always quantizes the block scalers.
      if (config.format != WeightFormat::Nf4) library.fail("'weights.library' torchao stores nf4 only");
      if (!double_quant.is_missing() && !config.double_quant) {
        double_quant.fail("torchao's NF4Tensor always quantizes its scalers: 'double_quant' must be true");
      }
      config.library = QuantLibrary::Torchao;
    }
  }
  return config;
}

LoadingConfig read_loading(const YamlNode& node) {
  LoadingConfig config;
  if (node.is_missing()) return config;
  std::string method;
  if (node.is_scalar()) {
    method = node.as_choice({"on_device", "from_pretrained", "fp32_then_cast"});
  } else {
    node.reject_unknown_keys({"method"});
    method = node.choice_or("method", "on_device", {"on_device", "from_pretrained", "fp32_then_cast"});
  }
  config.method = method == "fp32_then_cast"    ? LoadMethod::BuiltThenCast
                  : method == "from_pretrained" ? LoadMethod::FromPretrained
                                                : LoadMethod::OnDevice;
  return config;
}

}  // namespace

const std::vector<std::string>& job_section_keys() {
  static const std::vector<std::string> keys = {"job", "training", "weights", "loading"};
  return keys;
}

void read_job_sections(const YamlNode& root, Scenario& scenario) {
  JobConfig& config = scenario.job;
  config.job = read_job(root.child("job"), scenario);
  config.training = read_training(root.child("training"), scenario, scenario.model.warnings);
  config.weights = read_weights(root.child("weights"));
  const std::string& model_file = scenario.model.source;
  if (root.child("weights").is_missing() && model_file.size() > 5 &&
      model_file.compare(model_file.size() - 5, 5, ".json") == 0) {
    // A pre-quantized checkpoint's config.json says how its weights are stored.
    if (std::optional<WeightsConfig> stored = checkpoint_weights(model_file)) config.weights = *stored;
  }
  config.loading = read_loading(root.child("loading"));
  const bool training_job = config.job.kind == JobKind::Train;
  if (!training_job) {
    YamlNode training = root.child("training");
    if (!training.is_missing() && !training.child("trainable").is_missing() && config.job.kind != JobKind::Forward) {
      training.child("trainable").fail("'training.trainable' does not apply to job " + std::string(job_kind_name(config.job.kind)) + " (nothing trains under no_grad)");
    }
    if (scenario.grad_accum_steps != 1) root.child("grad_accum_steps").fail("'grad_accum_steps' applies to job train");
  }
  if (training_job && config.training.kind == TrainableKind::None && !config.training.lora.enabled &&
      !config.training.ia3.enabled) {
    root.child("training").child("trainable").fail(
        "'training.trainable' none leaves nothing to train; use job: inference or job: forward for forward passes");
  }
  if (config.loading.method == LoadMethod::BuiltThenCast) {
    bool half = scenario.precision == Precision::PureBf16 || config.weights.format == WeightFormat::Fp16 ||
                config.weights.format == WeightFormat::Bf16;
    if (!half) {
      root.child("loading").fail("'loading' fp32_then_cast needs 16-bit parameters (precision pure_bf16, or weights fp16/bf16)");
    }
    if (config.weights.quantized()) root.child("loading").fail("'loading' fp32_then_cast does not apply to quantized weights");
  }
  if (config.weights.quantized() && scenario.device.is_cpu && config.weights.library != QuantLibrary::Torchao) {
    root.child("weights").fail("'weights' " + std::string(weight_format_name(config.weights.format)) +
                               " is a bitsandbytes CUDA format; the cpu device cannot run it");
  }
  if (scenario.parallel.engine != ParallelEngine::None && !training_job) {
    root.child("parallel").fail("'parallel' with job " + std::string(job_kind_name(config.job.kind)) + " is not modelled");
  }
  if (config.training.prepare_kbit &&
      (!config.weights.quantized() || config.weights.library == QuantLibrary::Torchao || scenario.precision == Precision::PureBf16)) {
    // PEFT casts the 16-bit parameters of a bitsandbytes-loaded model (Params4bit / Int8Params
    // stay); it skips torchao-quantized models.
    root.child("training").child("prepare_model_for_kbit_training").fail(
        "'prepare_model_for_kbit_training' applies to bitsandbytes-quantized 'weights' (int8, nf4, fp4) with fp32 or amp precision");
  }
  if (config.weights.library == QuantLibrary::Torchao && config.loading.method != LoadMethod::OnDevice) {
    // torchtune builds the model on the device and loads its checkpoint into it (on_device).
    root.child("loading").fail("'weights.library' torchao is torchtune's QLoRA, which builds the model on the device: 'loading' must be on_device");
  }
  if (config.weights.quantized() && config.training.lora.use_dora) {
    // QDoRA dequantizes the whole 4-bit weight per forward (dequantize_module_weight): not planned.
    root.child("training").child("trainable").child("lora").child("use_dora").fail(
        "'use_dora' on quantized 'weights' (QDoRA) is not modelled yet");
  }
  if (config.weights.quantized() && scenario.parallel.engine != ParallelEngine::None) {
    root.child("weights").fail("quantized 'weights' with a 'parallel' engine is not modelled");
  }
  if (!config.training.master_weights) check_master_weights_engine(root, scenario);
  if (scenario.optimizer.in_backward) check_optimizer_in_backward(root, scenario, training_job);
}

const char* job_kind_name(JobKind kind) {
  switch (kind) {
    case JobKind::Train: return "train";
    case JobKind::Inference: return "inference";
    case JobKind::Forward: return "forward";
    case JobKind::Generate: return "generate";
  }
  return "?";
}

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::Default: return "default";
    case WeightFormat::Fp32: return "fp32";
    case WeightFormat::Fp16: return "fp16";
    case WeightFormat::Bf16: return "bf16";
    case WeightFormat::Int8: return "int8";
    case WeightFormat::Nf4: return "nf4";
    case WeightFormat::Fp4: return "fp4";
  }
  return "?";
}

}  // namespace oomcast::scenario
