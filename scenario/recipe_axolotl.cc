// Axolotl configs (the YAML `axolotl train FILE` takes) as scenarios. Key names and defaults
// are Axolotl 0.9's (utils/schemas/config.py): micro_batch_size 1, sequence_len 2048, LoRA
// r 8 / alpha 16 / dropout 0 when unset, `bf16: true|auto` loads the model in bf16 and turns
// on the Trainer's bf16 autocast, gradient_checkpointing_kwargs defaulting to
// use_reentrant True (utils/config normalize_config), and HF TrainingArguments' optim names.
#include "base/input_error.h"
#include "scenario/recipe_readers.h"

namespace oomcast::scenario {

namespace {

const std::vector<std::string> kNoMemoryEffect = {
    "base_model_config", "model_type", "tokenizer_type", "is_llama_derived_model", "trust_remote_code", "strict",
    "datasets", "dataset_prepared_path", "shuffle_merged_datasets", "dataset_processes", "output_dir", "chat_template",
    "special_tokens", "tokens", "train_on_inputs", "group_by_length", "sample_packing", "eval_sample_packing",
    "pad_to_sequence_len", "wandb_project", "wandb_entity", "wandb_watch", "wandb_name", "wandb_log_model",
    "num_epochs", "max_steps", "learning_rate", "lr_scheduler", "cosine_min_lr_ratio", "warmup_steps", "warmup_ratio",
    "weight_decay", "max_grad_norm", "logging_steps", "saves_per_epoch", "save_steps", "save_total_limit",
    "save_safetensors", "early_stopping_patience", "resume_from_checkpoint", "auto_resume_from_checkpoints",
    "local_rank", "tf32", "debug", "seed", "hub_model_id", "lora_fan_in_fan_out", "lora_model_dir",
    "load_best_model_at_end", "xformers_attention", "sdp_attention", "flash_attention", "eager_attention",
    "flash_attn_cross_entropy", "flash_attn_rms_norm", "s2_attention", "evals_per_epoch", "eval_steps",
    "eval_max_new_tokens", "eval_table_size", "val_set_size", "adam_beta1", "adam_beta2", "adam_epsilon",
    "optim_args", "fsdp_config", "plugins", "bnb_config_kwargs", "gradient_checkpointing_kwargs"};

void read_adapter(const YamlNode& root, RecipeKeyLedger& ledger, YAML::Node& scenario) {
  const YamlNode adapter = root.child("adapter");
  if (!given(adapter)) return;
  const std::string method = adapter.as_choice({"lora", "qlora"});
  YAML::Node lora(YAML::NodeType::Map);
  lora["r"] = integer_or_null(root, "lora_r", 8, 1, 1 << 16);
  lora["alpha"] = decimal_or_null(root, "lora_alpha", 16.0, 0.0, 1e9);
  lora["dropout"] = decimal_or_null(root, "lora_dropout", 0.0, 0.0, 0.999999);
  const YamlNode targets = root.child("lora_target_modules");
  if (flag_or(root, "lora_target_linear", false)) {
    lora["target_modules"] = std::vector<std::string>{"all-linear"};
  } else if (given(targets)) {
    lora["target_modules"] = targets.as_string_list();
  } else {
    adapter.fail("'adapter' " + method + " needs 'lora_target_modules' or 'lora_target_linear: true'");
  }
  const YamlNode dora = root.child("peft_use_dora");
  if (given(dora) && dora.as_bool()) dora.fail("'peft_use_dora' (DoRA) is not modelled yet");
  scenario["training"]["trainable"]["lora"] = lora;
  for (const char* key : {"adapter", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
                          "lora_target_linear", "peft_use_dora"}) {
    ledger.use(key);
  }
  const YamlNode saved = root.child("lora_modules_to_save");
  if (given(saved)) {
    ledger.unmodelled("lora_modules_to_save", "is not modelled: PEFT trains a full copy of each listed module");
  }
  if (method == "qlora" && !flag_or(root, "load_in_4bit", false)) {
    adapter.fail("'adapter' qlora needs 'load_in_4bit: true' (Axolotl refuses it otherwise)");
  }
}

// bf16 may be true, false or "auto" (bf16 where the GPU has it: the planned GPUs of sm_80+).
bool half_flag(const YamlNode& node) {
  if (!given(node)) return false;
  if (node.is_scalar() && node.as_string() == "auto") return true;
  return node.as_bool();
}

}  // namespace

void read_axolotl_config(const YamlNode& root, const OverriddenKeys& overridden, RecipeTranslation& translation) {
  RecipeKeyLedger ledger(translation, "Axolotl");
  YAML::Node& scenario = translation.scenario;
  if (!overridden.sets("model")) {
    scenario["model"] = root.child("base_model").as_string();
    translation.origins["model"] = {root.child("base_model").location(), "base_model"};
  }
  ledger.use("base_model");
  scenario["batch_size"] = integer_or_null(root, "micro_batch_size", 1, 1, int64_t{1} << 24);
  ledger.use("micro_batch_size");
  scenario["seq_len"] = integer_or_null(root, "sequence_len", 2048, 1, int64_t{1} << 24);
  ledger.use("sequence_len");
  const int64_t accumulation = integer_or_null(root, "gradient_accumulation_steps", 1, 1, int64_t{1} << 20);
  if (accumulation > 1) scenario["grad_accum_steps"] = accumulation;
  ledger.use("gradient_accumulation_steps");

  const bool bf16 = half_flag(root.child("bf16"));
  const bool fp16 = half_flag(root.child("fp16"));
  if (bf16 && fp16) root.child("fp16").fail("'bf16' and 'fp16' exclude each other");
  ledger.use("bf16");
  ledger.use("fp16");
  const bool four = flag_or(root, "load_in_4bit", false);
  const bool eight = flag_or(root, "load_in_8bit", false);
  if (four && eight) root.child("load_in_8bit").fail("'load_in_8bit' and 'load_in_4bit' exclude each other");
  if (four) {
    // Axolotl's 4-bit load: nf4, double quantization, compute in the training dtype.
    YAML::Node weights = YAML::Load("{format: nf4, double_quant: true}");
    weights["compute_dtype"] = fp16 ? "fp16" : "bf16";
    scenario["weights"] = weights;
  } else if (eight) {
    scenario["weights"] = "int8";
  } else if (bf16 || fp16) {
    scenario["weights"] = bf16 ? "bf16" : "fp16";  // from_pretrained(torch_dtype=...)
  }
  if (bf16 || fp16) scenario["precision"] = bf16 ? "amp_bf16" : "amp_fp16";
  ledger.use("load_in_4bit");
  ledger.use("load_in_8bit");
  read_adapter(root, ledger, scenario);

  const YamlNode checkpointing = root.child("gradient_checkpointing");
  if (given(checkpointing)) {
    const std::string mode = checkpointing.as_string();
    const bool on = mode == "offload" || mode == "unsloth" || checkpointing.as_bool();
    if (mode == "offload" || mode == "unsloth") {
      ledger.unmodelled("gradient_checkpointing", mode + " (checkpoints offloaded to the host) is not modelled: planned on the GPU");
    }
    if (on) {
      const YamlNode reentrant = root.child("gradient_checkpointing_kwargs").child("use_reentrant");
      YAML::Node mapped(YAML::NodeType::Map);
      mapped["mode"] = "full";
      mapped["reentrant"] = !given(reentrant) || reentrant.as_bool();
      scenario["checkpointing"] = mapped;
    }
    ledger.use("gradient_checkpointing");
  }
  if (given(root.child("optimizer"))) {
    scenario["optimizer"] = hf_optimizer(root.child("optimizer"));
    ledger.use("optimizer");
  } else {
    scenario["optimizer"] = YAML::Load("{type: adamw, impl: fused}");  // the Trainer's default (torch >= 2.8)
  }
  if (flag_or(root, "flash_attention", false)) scenario["attention"] = "flash";
  if (flag_or(root, "xformers_attention", false)) scenario["attention"] = "mem_efficient";
  if (flag_or(root, "eager_attention", false)) scenario["attention"] = "eager";

  const YamlNode deepspeed = root.child("deepspeed");
  if (given(deepspeed)) {
    scenario["parallel"]["deepspeed_config"] = deepspeed.as_string();
    scenario.remove("precision");  // DeepSpeed runs 16-bit parameters from its own bf16 section
    ledger.use("deepspeed");
  }
  const YamlNode fsdp = root.child("fsdp");
  if (given(fsdp)) {
    const YamlNode config = root.child("fsdp_config");
    const bool version2 = integer_or_null(config, "fsdp_version", 1, 1, 2) == 2 || integer_or_null(root, "fsdp_version", 1, 1, 2) == 2;
    YAML::Node engine(YAML::NodeType::Map);
    if (flag_or(config, "fsdp_offload_params", false) || flag_or(config, "offload_params", false)) {
      engine[version2 ? "offload_policy" : "cpu_offload"] = version2 ? YAML::Node("cpu") : YAML::Node(true);
    }
    if (bf16 || fp16) {
      engine["mixed_precision"]["param_dtype"] = bf16 ? "bf16" : "fp16";
      engine["mixed_precision"]["reduce_dtype"] = bf16 ? "bf16" : "fp16";
      scenario.remove("precision");
      scenario.remove("weights");
    }
    scenario["parallel"][version2 ? "fsdp2" : "fsdp"] = engine;
    ledger.use("fsdp");
    ledger.use("fsdp_version");
  }
  if (flag_or(root, "torch_compile", false)) {
    ledger.unmodelled("torch_compile", "true is not modelled for a built-in model: the eager step is planned");
  }
  for (const char* key : {"liger_fused_linear_cross_entropy", "cut_cross_entropy", "unsloth_lora_mlp", "unsloth_cross_entropy_loss"}) {
    if (flag_or(root, key, false)) ledger.unmodelled(key, "true is not modelled (a fused kernel that saves less)");
  }
  const YamlNode validation = root.child("val_set_size");
  if (given(validation) && validation.as_number(0, 1e12) > 0) {
    ledger.unmodelled("val_set_size", "runs evaluation, which is not planned (only the training step is)");
  }
  ignore_unset_keys(root, ledger);
  ledger.classify_rest(root.keys(), kNoMemoryEffect);
}

}  // namespace oomcast::scenario
