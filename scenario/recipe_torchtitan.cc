// torchtitan job configs (the TOML `torchtitan/train.py --job.config_file FILE` takes) as
// scenarios. Section and key names, defaults and behaviour are torchtitan's (config/job_config.py,
// distributed/parallel_dims.py, models/llama3/infra/parallelize.py, 2025-09): FSDP2 with
// MixedPrecisionPolicy(param bf16, reduce fp32) over the data-parallel shards, DDP when only
// replicated, HSDP when both; non-reentrant activation checkpoints; the op-level selective
// policy saving every other matmul and the attention outputs. Read with toml++ (tomlplusplus).
#include <toml++/toml.h>

#include <filesystem>
#include <map>

#include "base/input_error.h"
#include "scenario/recipe_readers.h"

namespace oomcast::scenario {

namespace {

const std::map<std::string, std::string> kFlavorPresets = {{"llama3/8B", "llama-3-8b"}};

const std::map<std::string, std::string> kSchedules = {
    {"1F1B", "1f1b"}, {"GPipe", "gpipe"}, {"Interleaved1F1B", "interleaved_1f1b"},
    {"InterleavedZeroBubble", "zero_bubble"}, {"ZBVZeroBubble", "zero_bubble"}};

// Whole sections, and keys, that leave memory unchanged: logging, checkpoints on disk,
// schedules of the learning rate, data sources.
const std::vector<std::string> kNoMemoryEffect = {
    "job", "profiling", "metrics", "checkpoint", "comm", "lr_scheduler", "fault_tolerance", "experimental",
    "validation", "float8", "mx", "memory_estimation",  // validation and float8 act through the keys warned about
    "model.name", "model.flavor", "model.hf_assets_path", "model.tokenizer_path", "model.print_after_conversion",
    "optimizer.lr", "optimizer.eps", "optimizer.weight_decay", "optimizer.beta1", "optimizer.beta2",
    "training.max_norm", "training.steps", "training.warmup_steps", "training.dataset", "training.dataset_path",
    "training.seed", "training.deterministic", "training.gc_freq", "parallelism.pipeline_parallel_split_points",
    "parallelism.context_parallel_rotate_method", "activation_checkpoint.per_op_sac_force_recompute_mm_shapes_by_fqns",
    "activation_checkpoint.preserve_rng_state", "validation.enable"};

class TomlFile {
 public:
  TomlFile(std::string path, toml::table root) : path_(std::move(path)), root_(std::move(root)) {}

  const toml::node* find(const std::string& section, const std::string& key) const {
    const toml::table* table = root_[section].as_table();
    return table ? table->get(key) : nullptr;
  }
  bool has(const std::string& section, const std::string& key) const { return find(section, key) != nullptr; }

  // The key's line and column (its section's when the key is absent).
  SourceLocation where(const std::string& section, const std::string& key) const {
    const toml::node* node = find(section, key);
    const toml::node* at = node ? node : root_.get(section);
    if (!at) return SourceLocation{path_, 0, 0, -1};
    return SourceLocation{path_, static_cast<int64_t>(at->source().begin.line),
                          static_cast<int64_t>(at->source().begin.column), -1};
  }

  [[noreturn]] void fail(const std::string& section, const std::string& key, const std::string& message) const {
    throw InputError(where(section, key), section + "." + key, "'" + section + "." + key + "' " + message);
  }

  int64_t integer(const std::string& section, const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
    const toml::node* node = find(section, key);
    if (!node) return fallback;
    if (!node->is_integer()) fail(section, key, "must be an integer");
    const int64_t value = *node->value<int64_t>();
    if (value < min || value > max) {
      fail(section, key, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + std::to_string(value));
    }
    return value;
  }
  bool boolean(const std::string& section, const std::string& key, bool fallback) const {
    const toml::node* node = find(section, key);
    if (!node) return fallback;
    if (!node->is_boolean()) fail(section, key, "must be true or false");
    return *node->value<bool>();
  }
  std::string text(const std::string& section, const std::string& key, const std::string& fallback) const {
    const toml::node* node = find(section, key);
    if (!node) return fallback;
    if (!node->is_string()) fail(section, key, "must be a string");
    return *node->value<std::string>();
  }
  std::vector<std::string> strings(const std::string& section, const std::string& key) const {
    std::vector<std::string> items;
    const toml::node* node = find(section, key);
    if (!node) return items;
    if (!node->is_array()) fail(section, key, "must be a list of strings");
    for (const toml::node& item : *node->as_array()) {
      if (!item.is_string()) fail(section, key, "must be a list of strings");
      items.push_back(*item.value<std::string>());
    }
    return items;
  }
  // Every key as "section.key" (a top-level value as its name), in the file's order.
  std::vector<std::string> keys() const {
    std::vector<std::string> all;
    for (auto&& [section, value] : root_) {
      if (const toml::table* table = value.as_table(); table && !table->empty()) {
        for (auto&& [key, ignored] : *table) all.push_back(std::string(section.str()) + "." + std::string(key.str()));
      } else {
        all.push_back(std::string(section.str()));
      }
    }
    return all;
  }

 private:
  std::string path_;
  toml::table root_;
};

TomlFile parse(const std::string& path) {
  try {
    return TomlFile(path, toml::parse_file(path));
  } catch (const toml::parse_error& error) {
    throw InputError(SourceLocation{path, static_cast<int64_t>(error.source().begin.line),
                                    static_cast<int64_t>(error.source().begin.column), -1},
                     "", "invalid TOML: " + std::string(error.description()));
  }
}

void read_model(const TomlFile& file, const std::string& path, const OverriddenKeys& overridden,
                RecipeTranslation& translation) {
  if (overridden.sets("model")) return;
  YAML::Node& scenario = translation.scenario;
  const std::string name = file.text("model", "name", "llama3");
  const std::string flavor = file.text("model", "flavor", "debugmodel");
  if (auto preset = kFlavorPresets.find(name + "/" + flavor); preset != kFlavorPresets.end()) {
    scenario["model"] = preset->second;
    return;
  }
  // The checkpoint's Hugging Face files, when they are here: their config.json has the shapes.
  const std::string assets = file.text("model", "hf_assets_path", "");
  std::error_code error;
  std::filesystem::path folder(assets);
  if (folder.is_relative()) folder = std::filesystem::path(path).parent_path() / folder;
  if (!assets.empty() && std::filesystem::is_regular_file(folder / "config.json", error)) {
    scenario["model"] = assets;
    translation.origins["model"] = {file.where("model", "hf_assets_path"), "model.hf_assets_path"};
    return;
  }
  file.fail("model", "flavor", "'" + name + "/" + flavor + "' has no oomcast preset (llama3/8B has) and no config.json "
            "under hf_assets_path: give the model with --set model=ORG/NAME or a config.json");
}

YAML::Node checkpointing(const TomlFile& file) {
  const std::string mode = file.text("activation_checkpoint", "mode", "selective");
  if (mode == "none") return YAML::Node();
  if (mode == "full") return YAML::Load("{mode: full, reentrant: false}");
  if (mode != "selective") file.fail("activation_checkpoint", "mode", "must be none, full or selective (memory_budget is not modelled)");
  const std::string option = file.text("activation_checkpoint", "selective_ac_option", "2");
  if (option == "op") return YAML::Load("{mode: selective, save: [linear, attention], every_other_linear: true}");
  int64_t every = 0;
  try {
    every = std::stoll(option);
  } catch (const std::exception&) {
  }
  if (every < 1 || std::to_string(every) != option) {
    file.fail("activation_checkpoint", "selective_ac_option", "must be 'op' or a positive integer (one block in every N), got '" + option + "'");
  }
  YAML::Node mapped = YAML::Load("{mode: every_n, reentrant: false}");
  mapped["every_n"] = every;
  return mapped;
}

}  // namespace

void read_torchtitan_toml(const std::string& path, const OverriddenKeys& overridden, RecipeTranslation& translation) {
  const TomlFile file = parse(path);
  RecipeKeyLedger ledger(translation, "torchtitan");
  YAML::Node& scenario = translation.scenario;
  read_model(file, path, overridden, translation);
  ledger.use("model.name");
  ledger.use("model.flavor");
  if (!file.strings("model", "converters").empty()) {
    ledger.unmodelled("model.converters", "(float8 / mx training) is not modelled: planned in bf16");
  }

  const std::string batch_key = file.has("training", "local_batch_size") ? "local_batch_size" : "batch_size";
  const int64_t local_batch = file.integer("training", batch_key, 8, 1, int64_t{1} << 24);
  const int64_t seq_len = file.integer("training", "seq_len", 2048, 1, int64_t{1} << 24);
  scenario["seq_len"] = seq_len;
  ledger.use("training." + batch_key);
  ledger.use("training.seq_len");

  const int64_t replicate = file.integer("parallelism", "data_parallel_replicate_degree", 1, 1, 1 << 20);
  const int64_t shard = file.integer("parallelism", "data_parallel_shard_degree", -1, -1, 1 << 20);
  const int64_t tensor = file.integer("parallelism", "tensor_parallel_degree", 1, 1, 1 << 16);
  const int64_t pipeline = file.integer("parallelism", "pipeline_parallel_degree", 1, 1, 1 << 16);
  const int64_t context = file.integer("parallelism", "context_parallel_degree", 1, 1, 1 << 16);
  const int64_t expert = file.integer("parallelism", "expert_parallel_degree", 1, 1, 1 << 16);
  if (shard == 0 || shard < -1) file.fail("parallelism", "data_parallel_shard_degree", "must be -1 (the GPUs left) or >= 1");
  for (const char* key : {"data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                          "pipeline_parallel_degree", "context_parallel_degree", "expert_parallel_degree"}) {
    ledger.use(std::string("parallelism.") + key);
  }
  YAML::Node parallel(YAML::NodeType::Map);
  if (shard > 0) {
    parallel["world_size"] = replicate * shard * context * tensor * pipeline;
  } else if (!overridden.sets("parallel.world_size")) {
    file.fail("parallelism", "data_parallel_shard_degree",
              "-1 shards over the GPUs left, which the launch (NGPU) decides, not this file: give --set parallel.world_size=N");
  }
  const bool sharded = shard != 1 || context > 1;
  const std::string reshard = file.text("parallelism", "fsdp_reshard_after_forward", "default");
  ledger.use("parallelism.fsdp_reshard_after_forward");
  if (sharded) {
    YAML::Node fsdp2(YAML::NodeType::Map);
    // "default" reshards except under pipeline parallelism, whose microbatches would gather again.
    if (reshard != "default" && reshard != "always" && reshard != "never") {
      file.fail("parallelism", "fsdp_reshard_after_forward", "must be default, always or never");
    }
    fsdp2["reshard_after_forward"] = reshard == "always" || (reshard == "default" && pipeline == 1);
    YAML::Node mixed(YAML::NodeType::Map);
    const std::string param = file.text("training", "mixed_precision_param", "bfloat16");
    const std::string reduce = file.text("training", "mixed_precision_reduce", "float32");
    auto dtype = [&](const std::string& key, const std::string& value) -> std::string {
      if (value == "bfloat16") return "bf16";
      if (value == "float32") return "fp32";
      if (value == "float16") return "fp16";
      file.fail("training", key, "must be bfloat16, float16 or float32");
    };
    mixed["param_dtype"] = dtype("mixed_precision_param", param);
    mixed["reduce_dtype"] = dtype("mixed_precision_reduce", reduce);
    if (mixed["param_dtype"].as<std::string>() != "fp32") fsdp2["mixed_precision"] = mixed;
    if (file.boolean("training", "enable_cpu_offload", false)) fsdp2["offload_policy"] = "cpu";
    parallel["fsdp2"] = fsdp2;
    if (replicate > 1) parallel["data_parallel_replicate"] = replicate;
  } else if (replicate > 1) {
    parallel["ddp"] = YAML::Node(YAML::NodeType::Map);
  } else {
    // No FSDP: torchtitan's maybe_enable_amp runs the step under bf16 autocast instead.
    if (file.text("training", "mixed_precision_param", "bfloat16") == "bfloat16") scenario["precision"] = "amp_bf16";
  }
  for (const char* key : {"mixed_precision_param", "mixed_precision_reduce", "enable_cpu_offload"}) {
    ledger.use(std::string("training.") + key);
  }
  if (tensor > 1) {
    parallel["tensor_parallel"] = tensor;
    parallel["sequence_parallel"] = true;  // torchtitan's TP plan always shards the norms' sequence
    if (file.boolean("parallelism", "enable_async_tensor_parallel", false)) parallel["async_tensor_parallel"] = true;
    if (file.boolean("parallelism", "disable_loss_parallel", false)) parallel["vocab_parallel"] = false;
  }
  ledger.use("parallelism.enable_async_tensor_parallel");
  ledger.use("parallelism.disable_loss_parallel");
  int64_t micro_batch = local_batch;
  if (pipeline > 1) {
    micro_batch = file.integer("parallelism", "pipeline_parallel_microbatch_size", 1, 1, int64_t{1} << 24);
    if (local_batch % micro_batch != 0) {
      file.fail("parallelism", "pipeline_parallel_microbatch_size", "must divide training." + batch_key + " (" + std::to_string(local_batch) + ")");
    }
    parallel["pipeline_parallel"] = pipeline;
    parallel["pipeline_microbatches"] = local_batch / micro_batch;
    const std::string schedule = file.text("parallelism", "pipeline_parallel_schedule", "1F1B");
    auto found = kSchedules.find(schedule);
    if (found == kSchedules.end()) file.fail("parallelism", "pipeline_parallel_schedule", "'" + schedule + "' is not modelled (1F1B, GPipe, Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble are)");
    parallel["pipeline_schedule"] = found->second;
    if (found->second != "1f1b" && found->second != "gpipe") {
      // Looped schedules: torchtitan builds two stages per rank unless layers_per_stage says otherwise.
      parallel["pipeline_virtual_stages"] = 2;
    }
  }
  for (const char* key : {"pipeline_parallel_microbatch_size", "pipeline_parallel_schedule"}) ledger.use(std::string("parallelism.") + key);
  if (context > 1) parallel["context_parallel"] = context;
  if (expert > 1) parallel["expert_parallel"] = expert;
  if (parallel.size() > 0) scenario["parallel"] = parallel;
  scenario["batch_size"] = micro_batch;

  const int64_t global = file.integer("training", "global_batch_size", -1, -1, int64_t{1} << 30);
  ledger.use("training.global_batch_size");
  if (global > 0) {
    if (shard < 1) {
      ledger.unmodelled("training.global_batch_size", "with data_parallel_shard_degree -1: gradient accumulation is not derived");
    } else {
      const int64_t per_step = local_batch * replicate * shard;
      if (global % per_step != 0) file.fail("training", "global_batch_size", "must be a multiple of local batch x data-parallel degree (" + std::to_string(per_step) + ")");
      if (global / per_step > 1) scenario["grad_accum_steps"] = global / per_step;
    }
  }

  const YAML::Node checkpoint = checkpointing(file);
  if (checkpoint.IsDefined() && !checkpoint.IsNull()) scenario["checkpointing"] = checkpoint;
  ledger.use("activation_checkpoint.mode");
  ledger.use("activation_checkpoint.selective_ac_option");

  const std::string optimizer = file.text("optimizer", "name", "AdamW");
  if (optimizer != "AdamW" && optimizer != "Adam") file.fail("optimizer", "name", "must be AdamW or Adam");
  const std::string implementation = file.text("optimizer", "implementation", "fused");
  YAML::Node mapped(YAML::NodeType::Map);
  mapped["type"] = optimizer == "Adam" ? "adam" : "adamw";
  if (implementation == "for-loop") mapped["impl"] = "single_tensor";
  else if (implementation == "fused" || implementation == "foreach") mapped["impl"] = implementation;
  else file.fail("optimizer", "implementation", "must be fused, foreach or for-loop");
  if (file.boolean("optimizer", "early_step_in_backward", false)) mapped["in_backward"] = true;
  scenario["optimizer"] = mapped;
  for (const char* key : {"name", "implementation", "early_step_in_backward"}) ledger.use(std::string("optimizer.") + key);
  scenario["attention"] = "flash";  // torchtitan's llama3 calls SDPA with bf16 inputs: the flash kernel

  if (file.boolean("training", "compile", false)) ledger.unmodelled("training.compile", "true is not modelled for a built-in model: the eager step is planned");
  if (file.boolean("compile", "enable", false)) ledger.unmodelled("compile.enable", "true is not modelled for a built-in model: the eager step is planned");
  ledger.use("compile.enable");
  ledger.use("compile.components");
  ledger.use("training.compile");
  if (file.boolean("validation", "enable", false)) ledger.unmodelled("validation.enable", "runs evaluation, which is not planned");
  if (file.boolean("parallelism", "enable_compiled_autograd", false)) {
    ledger.unmodelled("parallelism.enable_compiled_autograd", "true is not modelled");
  }
  ledger.use("parallelism.enable_compiled_autograd");
  ledger.use("model.converters");
  // The whole sections marked in kNoMemoryEffect cover their keys.
  std::vector<std::string> no_effect = kNoMemoryEffect;
  for (const auto& key : file.keys()) {
    const std::string section = key.substr(0, key.find('.'));
    for (const auto& entry : kNoMemoryEffect) {
      if (entry == section) no_effect.push_back(key);
    }
  }
  ledger.classify_rest(file.keys(), no_effect);
}

}  // namespace oomcast::scenario
