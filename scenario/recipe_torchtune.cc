// torchtune recipe configs (the YAML files `tune run RECIPE --config FILE` takes) as scenarios.
// Names, defaults and behaviour are torchtune 0.6's: recipes/full_finetune_*.py and
// lora_finetune_*.py, torchtune/models/*/_model_builders.py (lora_rank 8, lora_alpha 16,
// lora_dropout 0.0), training/activations.py (non-reentrant checkpoint_wrapper per layer),
// and the bf16 recipes' whole-model bf16 training with no fp32 master copy.
#include <filesystem>
#include <map>
#include <sstream>

#include "base/input_error.h"
#include "scenario/recipe_readers.h"

namespace oomcast::scenario {

namespace {

// Model builders with an oomcast preset of the same shapes (llama3_1_8b differs from
// llama3_8b only in rope scaling and max_seq_len, neither of which allocates).
const std::map<std::string, std::string> kBuilderPresets = {
    {"llama2_7b", "llama-2-7b"},  {"llama2_13b", "llama-2-13b"}, {"llama2_70b", "llama-2-70b"},
    {"llama3_8b", "llama-3-8b"},  {"llama3_1_8b", "llama-3-8b"}, {"mistral_7b", "mistral-7b"}};

// torchtune's module names -> the Hugging Face names the scenario's LoRA targets use.
const std::map<std::string, std::string> kAttentionModules = {
    {"q_proj", "q_proj"}, {"k_proj", "k_proj"}, {"v_proj", "v_proj"}, {"output_proj", "o_proj"}};

const std::vector<std::string> kNoMemoryEffect = {
    "output_dir", "seed", "shuffle", "epochs", "max_steps_per_epoch", "log_every_n_steps", "log_peak_memory_stats",
    "metric_logger", "profiler", "checkpointer", "resume_from_checkpoint", "save_adapter_weights_only", "dataset",
    "dataset_val", "lr_scheduler", "clip_grad_norm", "log_level", "run_val_every_n_steps", "save_every_n_steps",
    "device", "enable_async_checkpointing", "low_cpu_ram", "batch_size_val", "tensor_parallel_plan",
    "cp_rotate_method", "data_parallel_shard_dim", "cudnn_deterministic_mode", "tokenizer._component_",
    "tokenizer.path", "tokenizer.prompt_template", "tokenizer.merges_file", "optimizer.lr", "optimizer.weight_decay",
    "optimizer.betas", "optimizer.eps"};

std::string builder_of(const std::string& component) {
  const size_t dot = component.rfind('.');
  return dot == std::string::npos ? component : component.substr(dot + 1);
}

struct LaunchLine {
  std::string recipe;   // "lora_finetune_distributed", or "" when the file has no usage line
  int64_t processes = 0;
};

// The usage comment torchtune's configs open with: "tune run --nnodes 1 --nproc_per_node 2
// lora_finetune_distributed --config llama3_1/8B_lora". The recipe is not a key of the file.
LaunchLine launch_line(const std::string& text) {
  LaunchLine line;
  const size_t at = text.find("tune run ");
  if (at == std::string::npos) return line;
  std::istringstream tokens(text.substr(at + 9, text.find('\n', at) - at - 9));
  std::string token;
  int64_t nodes = 1;
  while (tokens >> token) {
    if (!token.starts_with("--")) {
      line.recipe = token;
      break;
    }
    std::string value;
    if (token.find('=') != std::string::npos) {
      value = token.substr(token.find('=') + 1);
      token = token.substr(0, token.find('='));
    } else {
      tokens >> value;
    }
    try {
      if (token == "--nproc_per_node") line.processes = std::stoll(value);
      if (token == "--nnodes") nodes = std::stoll(value);
    } catch (const std::exception&) {
      // "--nproc_per_node gpu" and the like: no count stated.
    }
  }
  line.processes *= nodes;
  return line;
}

std::vector<std::string> every_key(const YamlNode& root) {
  std::vector<std::string> keys;
  for (const auto& key : root.keys()) {
    const YamlNode value = root.child(key);
    if (value.is_map() && (key == "tokenizer" || key == "optimizer" || key == "model" || key == "loss")) {
      for (const auto& inner : value.keys()) keys.push_back(key + "." + inner);
    } else {
      keys.push_back(key);
    }
  }
  return keys;
}

void read_model(const YamlNode& root, const OverriddenKeys& overridden, RecipeKeyLedger& ledger,
                RecipeTranslation& translation, bool checkpointing) {
  YAML::Node& scenario = translation.scenario;
  const YamlNode model = root.child("model");
  const YamlNode component = model.child("_component_");
  const std::string builder = builder_of(component.as_string());
  const bool qlora = builder.starts_with("qlora_");
  const bool lora = qlora || builder.starts_with("lora_");
  const std::string base = builder.substr(qlora ? 6 : lora ? 5 : 0);
  if (!overridden.sets("model")) {
    auto preset = kBuilderPresets.find(base);
    if (preset == kBuilderPresets.end()) {
      std::string known;
      for (const auto& [name, ignored] : kBuilderPresets) known += (known.empty() ? "" : ", ") + name;
      component.fail("'model._component_' " + builder + " has no oomcast preset (known: " + known +
                     "): give the model with --set model=ORG/NAME (a Hub id in your cache) or a config.json");
    }
    scenario["model"] = preset->second;
    translation.origins["model"] = {component.location(), component.path()};
  }
  ledger.use("model._component_");
  const YamlNode dora = model.child("use_dora");
  if (given(dora) && dora.as_bool()) dora.fail("'use_dora' (DoRA) is not modelled yet");
  if (!lora) return;
  YAML::Node adapter(YAML::NodeType::Map);
  adapter["r"] = integer_or_null(model, "lora_rank", 8, 1, 1 << 16);
  adapter["alpha"] = decimal_or_null(model, "lora_alpha", 16.0, 0.0, 1e9);
  adapter["dropout"] = decimal_or_null(model, "lora_dropout", 0.0, 0.0, 0.999999);
  std::vector<std::string> targets;
  const YamlNode attention = model.child("lora_attn_modules");
  if (!given(attention)) model.fail("a LoRA builder needs 'lora_attn_modules' (q_proj, k_proj, v_proj, output_proj)");
  for (const YamlNode& item : attention.is_scalar() ? std::vector<YamlNode>{attention} : attention.items()) {
    const std::string name = item.as_choice({"q_proj", "k_proj", "v_proj", "output_proj"});
    targets.push_back(kAttentionModules.at(name));
  }
  if (flag_or(model, "apply_lora_to_mlp", false)) targets.insert(targets.end(), {"gate_proj", "up_proj", "down_proj"});
  if (flag_or(model, "apply_lora_to_output", false)) targets.push_back("lm_head");
  adapter["target_modules"] = targets;
  // torchtune builds the adapters in the model's dtype (no fp32 upcast as PEFT does).
  adapter["autocast_adapter_dtype"] = false;
  scenario["training"]["trainable"]["lora"] = adapter;
  // Its checkpoint is non-reentrant, so it never needs enable_input_require_grads.
  if (checkpointing) scenario["training"]["input_require_grads"] = false;
  for (const char* key : {"lora_rank", "lora_alpha", "lora_dropout", "lora_attn_modules", "apply_lora_to_mlp",
                          "apply_lora_to_output", "use_dora", "quantize_base"}) {
    if (given(model.child(key))) ledger.use(std::string("model.") + key);
  }
  const bool quantized = qlora || flag_or(model, "quantize_base", false);
  // torchao's NF4Tensor: 4-bit blocks of 64, absmax scales quantized per 256 blocks, bf16 compute.
  if (quantized) scenario["weights"] = YAML::Load("{format: nf4, compute_dtype: bf16, double_quant: true}");
}

void read_optimizer(const YamlNode& root, RecipeKeyLedger& ledger, YAML::Node& scenario) {
  const YamlNode optimizer = root.child("optimizer");
  if (!given(optimizer)) return;
  const YamlNode component = optimizer.child("_component_");
  const std::string name = component.as_string();
  YAML::Node mapped(YAML::NodeType::Map);
  if (name == "torch.optim.AdamW" || name == "torch.optim.Adam") {
    mapped["type"] = name == "torch.optim.Adam" ? "adam" : "adamw";
    if (flag_or(optimizer, "fused", false)) mapped["impl"] = "fused";
    if (given(optimizer.child("foreach")) && !optimizer.child("foreach").as_bool()) mapped["impl"] = "single_tensor";
    if (flag_or(optimizer, "amsgrad", false)) mapped["amsgrad"] = true;
  } else if (name == "torch.optim.SGD") {
    mapped["type"] = "sgd";
    if (given(optimizer.child("momentum"))) mapped["momentum"] = decimal_or_null(optimizer, "momentum", 0.0, 0.0, 0.999999);
  } else if (name == "bitsandbytes.optim.PagedAdamW8bit" || name == "bitsandbytes.optim.AdamW8bit" ||
             name == "torchao.optim.AdamW8bit") {
    mapped["type"] = "adamw8bit";
  } else {
    component.fail("'optimizer._component_' " + name + " is not modelled (torch.optim.AdamW, Adam, SGD, "
                   "bitsandbytes.optim.PagedAdamW8bit / AdamW8bit, torchao.optim.AdamW8bit are)");
  }
  for (const char* key : {"_component_", "fused", "foreach", "amsgrad", "momentum"}) {
    if (given(optimizer.child(key))) ledger.use(std::string("optimizer.") + key);
  }
  scenario["optimizer"] = mapped;
}

}  // namespace

void read_torchtune_recipe(const YamlNode& root, const std::string& text, const OverriddenKeys& overridden,
                           RecipeTranslation& translation) {
  RecipeKeyLedger ledger(translation, "torchtune");
  YAML::Node& scenario = translation.scenario;
  const LaunchLine launch = launch_line(text);
  const bool checkpointing = flag_or(root, "enable_activation_checkpointing", false);
  read_model(root, overridden, ledger, translation, checkpointing);

  scenario["batch_size"] = root.child("batch_size").as_integer(1, int64_t{1} << 24);
  ledger.use("batch_size");
  const YamlNode max_seq_len = root.child("tokenizer").child("max_seq_len");
  if (given(max_seq_len)) {
    scenario["seq_len"] = max_seq_len.as_integer(1, int64_t{1} << 24);
    ledger.use("tokenizer.max_seq_len");
  } else if (!overridden.sets("seq_len")) {
    (!given(max_seq_len) ? root.child("tokenizer") : max_seq_len)
        .fail("'tokenizer.max_seq_len' is not set: samples are as long as the dataset's longest; "
              "give the length to plan with --set seq_len=N");
  }
  if (given(root.child("gradient_accumulation_steps"))) {
    scenario["grad_accum_steps"] = root.child("gradient_accumulation_steps").as_integer(1, int64_t{1} << 20);
    ledger.use("gradient_accumulation_steps");
  }

  const std::string dtype = choice_or_null(root, "dtype", "bf16", {"bf16", "fp32", "fp16"});
  if (dtype == "fp16") root.child("dtype").fail("'dtype' fp16: torchtune's recipes refuse fp16 (use bf16 or fp32)");
  ledger.use("dtype");
  if (dtype == "bf16") {
    if (scenario["weights"]) {
      scenario["precision"] = "fp32";  // quantized base: activations follow its bf16 compute dtype
      scenario["attention"] = "flash";  // SDPA on bf16 activations (fp32 precision would pick mem_efficient)
    } else {
      scenario["precision"] = "pure_bf16";
      scenario["training"]["master_weights"] = false;
    }
  }
  if (checkpointing) scenario["checkpointing"] = YAML::Load("{mode: full, reentrant: false}");
  ledger.use("enable_activation_checkpointing");
  if (flag_or(root, "enable_activation_offloading", false)) {
    ledger.unmodelled("enable_activation_offloading",
                      "true is not modelled: saved activations are planned on the GPU (an upper bound)");
  }
  ledger.use("enable_activation_offloading");
  if (flag_or(root, "compile", false)) {
    ledger.unmodelled("compile", "true is not modelled for a built-in model: the eager step is planned "
                                 "(a compiled step usually needs less)");
  }
  ledger.use("compile");
  read_optimizer(root, ledger, scenario);
  if (flag_or(root, "optimizer_in_bwd", false)) scenario["optimizer"]["in_backward"] = true;
  ledger.use("optimizer_in_bwd");

  const YamlNode loss = root.child("loss").child("_component_");
  if (given(loss)) {
    const std::string name = builder_of(loss.as_string());
    if (name == "CEWithChunkedOutputLoss" || name == "LinearCrossEntropyLoss") {
      scenario["loss"]["chunks"] = integer_or_null(root.child("loss"), "num_output_chunks", 8, 1, 1024);
      ledger.use("loss._component_");
      ledger.use("loss.num_output_chunks");
    } else if (name == "CrossEntropyLoss") {
      ledger.use("loss._component_");
    } else {
      loss.fail("'loss._component_' " + loss.as_string() + " is not modelled (CEWithChunkedOutputLoss, LinearCrossEntropyLoss, "
                "torch.nn.CrossEntropyLoss are)");
    }
  }

  const YamlNode custom = root.child("custom_sharded_layers");
  if (given(custom) && !custom.as_string_list().empty()) {
    ledger.unmodelled("custom_sharded_layers", "is not modelled: those layers are planned in the root FSDP unit");
  }
  const bool distributed = launch.recipe.find("distributed") != std::string::npos ||
                           (launch.recipe.empty() && (given(root.child("fsdp_cpu_offload")) ||
                                                      given(root.child("fsdp_reshard_after_forward"))));
  if (distributed) {
    // The distributed recipes wrap every layer, then the model, in FSDP2's fully_shard, with
    // the model's own bf16 shards (no MixedPrecisionPolicy).
    YAML::Node parallel(YAML::NodeType::Map);
    if (launch.processes > 0) {
      parallel["world_size"] = launch.processes;
    } else if (!overridden.sets("parallel.world_size")) {
      root.fail("a distributed recipe runs on `tune run --nproc_per_node N`, which this file does not state: "
                "give --set parallel.world_size=N");
    }
    parallel["fsdp2"]["reshard_after_forward"] = flag_or(root, "fsdp_reshard_after_forward", true);
    if (flag_or(root, "fsdp_cpu_offload", false)) parallel["fsdp2"]["offload_policy"] = "cpu";
    const int64_t tensor = integer_or_null(root, "tensor_parallel_dim", 1, 1, 1 << 16);
    if (tensor > 1) parallel["tensor_parallel"] = tensor;
    const int64_t replicate = integer_or_null(root, "data_parallel_replicate_dim", 1, 1, 1 << 16);
    if (replicate > 1) parallel["data_parallel_replicate"] = replicate;
    const int64_t context = integer_or_null(root, "context_parallel_dim", 1, 1, 1 << 16);
    if (context > 1) parallel["context_parallel"] = context;
    scenario["parallel"] = parallel;
    for (const char* key : {"fsdp_reshard_after_forward", "fsdp_cpu_offload", "tensor_parallel_dim",
                            "data_parallel_replicate_dim", "context_parallel_dim"}) {
      ledger.use(key);
    }
  }
  ignore_unset_keys(root, ledger);
  ledger.classify_rest(every_key(root), kNoMemoryEffect);
  if (!launch.recipe.empty()) translation.used_keys.push_back("the usage line's recipe " + launch.recipe);
}

}  // namespace oomcast::scenario
