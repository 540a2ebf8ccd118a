// Hugging Face Trainer arguments (TrainingArguments keys, as a JSON or YAML file), with TRL's
// SFTConfig and ModelConfig keys (what `trl sft --config FILE` reads) as scenarios. Defaults
// are transformers 5.24's (training_args.py: per_device_train_batch_size 8, optim
// adamw_torch_fused with torch >= 2.8; modeling_utils.py: gradient checkpointing with
// use_reentrant False) and TRL's (SFTConfig max_length 1024; ModelConfig lora_r 16,
// lora_alpha 32, lora_dropout 0.05).
#include <map>

#include "base/input_error.h"
#include "scenario/recipe_readers.h"

namespace oomcast::scenario {

namespace {

const std::vector<std::string> kNoMemoryEffect = {
    "output_dir", "overwrite_output_dir", "do_train", "do_predict", "learning_rate", "weight_decay", "adam_beta1",
    "adam_beta2", "adam_epsilon", "max_grad_norm", "num_train_epochs", "max_steps", "lr_scheduler_type",
    "lr_scheduler_kwargs", "warmup_ratio", "warmup_steps", "logging_dir", "logging_strategy", "logging_steps",
    "logging_first_step", "save_strategy", "save_steps", "save_total_limit", "save_only_model", "seed", "data_seed",
    "run_name", "report_to", "push_to_hub", "hub_model_id", "hub_strategy", "hub_private_repo", "remove_unused_columns",
    "label_names", "load_best_model_at_end", "metric_for_best_model", "greater_is_better", "disable_tqdm",
    "dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers", "dataloader_drop_last",
    "group_by_length", "tf32", "ddp_find_unused_parameters", "ddp_timeout", "resume_from_checkpoint",
    "dataset_name", "dataset_config", "dataset_text_field", "dataset_num_proc", "dataset_kwargs", "eos_token",
    "pad_token", "completion_only_loss", "assistant_only_loss", "neftune_noise_alpha", "model_revision",
    "trust_remote_code", "use_rslora", "lora_task_type", "bnb_4bit_quant_type", "use_bnb_nested_quant",
    "gradient_checkpointing_kwargs", "eval_steps", "per_device_eval_batch_size", "eval_accumulation_steps",
    "bf16_full_eval", "fp16_full_eval", "include_num_input_tokens_seen", "padding_free", "pad_to_multiple_of",
    "packing", "packing_strategy", "dataset_train_split", "dataset_test_split", "chat_template_path", "log_level",
    "optim_args", "logging_nan_inf_filter", "skip_memory_metrics", "average_tokens_across_devices"};

const std::map<std::string, std::string> kModelDtypes = {
    {"bfloat16", "bf16"}, {"bf16", "bf16"}, {"float16", "fp16"}, {"fp16", "fp16"}, {"float32", "fp32"}, {"fp32", "fp32"}};

// attn_implementation as transformers names it -> the scenario's attention.
const std::map<std::string, std::string> kAttention = {
    {"flash_attention_2", "flash"}, {"flash_attention_3", "flash"}, {"eager", "eager"}, {"sdpa", ""}};

void read_peft(const YamlNode& root, RecipeKeyLedger& ledger, YAML::Node& scenario) {
  if (!flag_or(root, "use_peft", false)) return;
  YAML::Node lora(YAML::NodeType::Map);
  lora["r"] = integer_or_null(root, "lora_r", 16, 1, 1 << 16);
  lora["alpha"] = decimal_or_null(root, "lora_alpha", 32.0, 0.0, 1e9);
  lora["dropout"] = decimal_or_null(root, "lora_dropout", 0.05, 0.0, 0.999999);
  const YamlNode targets = root.child("lora_target_modules");
  if (!given(targets)) {
    root.child("use_peft").fail("'use_peft' without 'lora_target_modules': PEFT picks them by model type; "
                                "write them (e.g. [q_proj, v_proj], or all-linear)");
  }
  lora["target_modules"] = targets.as_string_list();
  const YamlNode dora = root.child("use_dora");
  if (given(dora) && dora.as_bool()) dora.fail("'use_dora' (DoRA) is not modelled yet");
  scenario["training"]["trainable"]["lora"] = lora;
  for (const char* key : {"use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "use_dora"}) {
    ledger.use(key);
  }
  const YamlNode saved = root.child("lora_modules_to_save");
  if (given(saved)) {
    ledger.unmodelled("lora_modules_to_save", "is not modelled: PEFT trains a full copy of each listed module");
  }
}

void read_quantization(const YamlNode& root, RecipeKeyLedger& ledger, YAML::Node& scenario) {
  const bool four = flag_or(root, "load_in_4bit", false);
  const bool eight = flag_or(root, "load_in_8bit", false);
  if (four && eight) root.child("load_in_8bit").fail("'load_in_8bit' and 'load_in_4bit' exclude each other");
  if (four) {
    YAML::Node weights(YAML::NodeType::Map);
    weights["format"] = choice_or_null(root, "bnb_4bit_quant_type", "nf4", {"nf4", "fp4"});
    weights["double_quant"] = flag_or(root, "use_bnb_nested_quant", false);
    scenario["weights"] = weights;
  } else if (eight) {
    scenario["weights"] = "int8";
  }
  for (const char* key : {"load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "use_bnb_nested_quant"}) ledger.use(key);
}

// `fsdp: "full_shard auto_wrap"` (or a list) with `fsdp_config`, as the Trainer hands them to accelerate.
void read_fsdp(const YamlNode& root, bool half, RecipeKeyLedger& ledger, YAML::Node& scenario) {
  const YamlNode fsdp = root.child("fsdp");
  if (!given(fsdp)) return;
  std::vector<std::string> options;
  if (fsdp.is_scalar()) {
    std::string text = fsdp.as_string(), word;
    for (char c : text + " ") {
      if (c == ' ' && !word.empty()) options.push_back(word), word.clear();
      else if (c != ' ') word += c;
    }
  } else {
    options = fsdp.as_string_list();
  }
  if (options.empty()) return;
  const YamlNode config = root.child("fsdp_config");
  const bool version2 = integer_or_null(config, "fsdp_version", 1, 1, 2) == 2 || integer_or_null(config, "version", 1, 1, 2) == 2;
  YAML::Node engine(YAML::NodeType::Map);
  for (const std::string& option : options) {
    if (option == "full_shard" || option == "shard_grad_op" || option == "no_shard") {
      if (!version2) engine["sharding_strategy"] = option == "full_shard" ? "FULL_SHARD" : option == "shard_grad_op" ? "SHARD_GRAD_OP" : "NO_SHARD";
      if (version2 && option != "full_shard") fsdp.fail("'fsdp' " + option + " with fsdp_version 2 is not modelled");
    } else if (option == "offload") {
      if (version2) engine["offload_policy"] = "cpu";
      else engine["cpu_offload"] = true;
    } else if (option != "auto_wrap") {
      fsdp.fail("'fsdp' option '" + option + "' is not modelled (full_shard, shard_grad_op, no_shard, offload, auto_wrap are)");
    }
  }
  if (half) {
    // accelerate's FSDP mixed precision for bf16/fp16: 16-bit gathers and compute, fp32 shards.
    const std::string dtype = flag_or(root, "bf16", false) ? "bf16" : "fp16";
    engine["mixed_precision"]["param_dtype"] = dtype;
    engine["mixed_precision"]["reduce_dtype"] = dtype;
  }
  if (given(config)) {
    if (version2 && given(config.child("reshard_after_forward"))) {
      engine["reshard_after_forward"] = config.child("reshard_after_forward").as_bool();
    }
    if (!version2 && flag_or(config, "use_orig_params", false)) engine["use_orig_params"] = true;
    if (flag_or(config, "activation_checkpointing", false)) scenario["checkpointing"] = YAML::Load("{mode: full, reentrant: false}");
    if (given(config.child("min_num_params"))) {
      ledger.unmodelled("fsdp_config", "min_num_params (size-based wrapping) is not modelled: one unit per block is planned");
    }
  }
  scenario["parallel"][version2 ? "fsdp2" : "fsdp"] = engine;
  ledger.use("fsdp");
  ledger.use("fsdp_config");
}

}  // namespace

YAML::Node hf_optimizer(const YamlNode& optim) {
  const std::string name = optim.as_string();
  // TrainingArguments' OptimizerNames with a modelled optimizer (transformers 5.24 training_args.py).
  static const std::map<std::string, std::string> kNames = {
      {"adamw_torch", "{type: adamw, impl: foreach}"}, {"adamw_torch_fused", "{type: adamw, impl: fused}"},
      {"adamw_torch_foreach", "{type: adamw, impl: foreach}"}, {"adamw_8bit", "adamw8bit"},
      {"adamw_bnb_8bit", "adamw8bit"}, {"paged_adamw_8bit", "adamw8bit"}, {"sgd", "sgd"},
      {"adafactor", "adafactor"}};
  auto found = kNames.find(name);
  if (found == kNames.end()) {
    std::string known;
    for (const auto& [key, ignored] : kNames) known += (known.empty() ? "" : ", ") + key;
    optim.fail("optim '" + name + "' is not modelled (" + known + " are)");
  }
  return YAML::Load(found->second);
}

void read_hf_trainer_args(const YamlNode& root, const OverriddenKeys& overridden, RecipeTranslation& translation) {
  RecipeKeyLedger ledger(translation, "Trainer arguments");
  YAML::Node& scenario = translation.scenario;
  const YamlNode model = root.child("model_name_or_path");
  if (given(model)) {
    scenario["model"] = model.as_string();
    translation.origins["model"] = {model.location(), model.path()};
  } else if (!overridden.sets("model")) {
    root.fail("no 'model_name_or_path': give the model with --set model=ORG/NAME (a Hub id in your cache) or a config.json");
  }
  ledger.use("model_name_or_path");
  scenario["batch_size"] = integer_or_null(root, "per_device_train_batch_size", 8, 1, int64_t{1} << 24);
  ledger.use("per_device_train_batch_size");
  const int64_t accumulation = integer_or_null(root, "gradient_accumulation_steps", 1, 1, int64_t{1} << 20);
  if (accumulation > 1) scenario["grad_accum_steps"] = accumulation;
  ledger.use("gradient_accumulation_steps");
  // SFTConfig's max_length (max_seq_length before TRL 0.20); packing or not, no sample is longer.
  const YamlNode length = given(root.child("max_length")) ? root.child("max_length") : root.child("max_seq_length");
  if (given(length)) {
    scenario["seq_len"] = length.as_integer(1, int64_t{1} << 24);
    ledger.use(length.key());
  } else if (!overridden.sets("seq_len")) {
    root.fail("no 'max_length' (TRL) or 'max_seq_length': give the sequence length with --set seq_len=N");
  }
  const bool bf16 = flag_or(root, "bf16", false);
  const bool fp16 = flag_or(root, "fp16", false);
  if (bf16 && fp16) root.child("fp16").fail("'bf16' and 'fp16' exclude each other");
  ledger.use("bf16");
  ledger.use("fp16");
  const bool sharded = given(root.child("fsdp"));
  if ((bf16 || fp16) && !sharded) scenario["precision"] = bf16 ? "amp_bf16" : "amp_fp16";
  for (const char* key : {"torch_dtype", "dtype"}) {
    const YamlNode dtype = root.child(key);
    if (!given(dtype)) continue;
    const std::string text = dtype.as_string();
    if (text == "auto") {
      ledger.unmodelled(key, "auto (the checkpoint's own dtype) is not read: the weights are planned as precision implies");
      continue;
    }
    auto found = kModelDtypes.find(text);
    if (found == kModelDtypes.end()) dtype.fail("'" + std::string(key) + "' must be bfloat16, float16, float32 or auto");
    scenario["weights"] = found->second;
    ledger.use(key);
  }
  read_quantization(root, ledger, scenario);
  if (flag_or(root, "gradient_checkpointing", false)) {
    const YamlNode reentrant = root.child("gradient_checkpointing_kwargs").child("use_reentrant");
    YAML::Node checkpointing(YAML::NodeType::Map);
    checkpointing["mode"] = "full";
    checkpointing["reentrant"] = given(reentrant) && reentrant.as_bool();
    scenario["checkpointing"] = checkpointing;
  }
  ledger.use("gradient_checkpointing");
  ledger.use("gradient_checkpointing_kwargs");
  // TrainingArguments' default optim with torch >= 2.8: adamw_torch_fused.
  scenario["optimizer"] = !given(root.child("optim")) ? YAML::Load("{type: adamw, impl: fused}") : hf_optimizer(root.child("optim"));
  ledger.use("optim");
  const YamlNode attention = root.child("attn_implementation");
  if (given(attention)) {
    auto found = kAttention.find(attention.as_string());
    if (found == kAttention.end()) attention.fail("'attn_implementation' must be flash_attention_2, flash_attention_3, sdpa or eager");
    if (!found->second.empty()) scenario["attention"] = found->second;
    ledger.use("attn_implementation");
  }
  read_peft(root, ledger, scenario);
  const YamlNode deepspeed = root.child("deepspeed");
  if (given(deepspeed)) {
    if (!deepspeed.is_scalar()) deepspeed.fail("'deepspeed' as an inline dict is not read: save it as a JSON file and name it here");
    scenario["parallel"]["deepspeed_config"] = deepspeed.as_string();
    scenario.remove("precision");  // DeepSpeed runs 16-bit parameters from its own bf16/fp16 section
    ledger.use("deepspeed");
  }
  read_fsdp(root, bf16 || fp16, ledger, scenario);
  if (flag_or(root, "torch_compile", false)) {
    ledger.unmodelled("torch_compile", "true is not modelled for a built-in model: the eager step is planned");
  }
  if (flag_or(root, "use_liger_kernel", false)) {
    ledger.unmodelled("use_liger_kernel", "true is not modelled (Liger's fused kernels and linear cross-entropy)");
  }
  for (const char* key : {"eval_strategy", "evaluation_strategy", "do_eval"}) {
    const YamlNode value = root.child(key);
    if (!given(value)) continue;
    const std::string text = value.as_string();
    if (text != "no" && text != "false" && text != "False") {
      ledger.unmodelled(key, "runs evaluation, which is not planned (only the training step is)");
    }
    ledger.ignore(key);
  }
  if (given(root.child("torch_empty_cache_steps"))) {
    ledger.unmodelled("torch_empty_cache_steps", "is not modelled (the plan never empties the cache)");
  }
  ignore_unset_keys(root, ledger);
  ledger.classify_rest(root.keys(), kNoMemoryEffect);
}

}  // namespace oomcast::scenario
