// Scenario YAML -> Scenario. One reader per section, in the order of
// docs/scenario-format.md (the device and allocator sections in device_section_loader.cc);
// cross-section rules (flash needs 16-bit, bf16 needs sm_80) are
// checked last so each section's own errors come first.
#include "scenario/scenario_loader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <utility>

#include "base/edit_distance.h"
#include "base/input_error.h"
#include "scenario/activation_offload_config_loader.h"
#include "scenario/loss_config_loader.h"
#include "scenario/graph_file.h"
#include "scenario/job_config_loader.h"
#include "scenario/outside_allocator.h"
#include "scenario/model_families.h"
#include "scenario/op_kind.h"
#include "scenario/model_catalog.h"
#include "scenario/compile_config_loader.h"
#include "scenario/cuda_graphs_config_loader.h"
#include "scenario/device_section_loader.h"
#include "scenario/moe_config.h"
#include "scenario/not_a_scenario.h"
#include "scenario/parallel_config_loader.h"
#include "scenario/recipe_translation.h"
#include "scenario/size_limits.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

namespace {

constexpr int64_t kMaxCount = int64_t{1} << 40;

template <typename Enum>
struct Named {
  const char* name;
  Enum value;
};

const Named<Precision> kPrecisions[] = {
    {"fp32", Precision::Fp32}, {"amp_bf16", Precision::AmpBf16}, {"amp_fp16", Precision::AmpFp16},
    {"pure_bf16", Precision::PureBf16}};
const Named<AttentionImpl> kAttentions[] = {
    {"eager", AttentionImpl::Eager}, {"sdpa_math", AttentionImpl::SdpaMath}, {"flash", AttentionImpl::Flash},
    {"mem_efficient", AttentionImpl::MemEfficient}};
const Named<CheckpointMode> kCheckpointModes[] = {
    {"none", CheckpointMode::None}, {"full", CheckpointMode::Full}, {"every_n", CheckpointMode::EveryN},
    {"selective", CheckpointMode::Selective}, {"auto", CheckpointMode::Auto}};
const Named<OptimizerType> kOptimizerTypes[] = {
    {"sgd", OptimizerType::Sgd}, {"adam", OptimizerType::Adam}, {"adamw", OptimizerType::AdamW},
    {"adafactor", OptimizerType::Adafactor}, {"adamw8bit", OptimizerType::AdamW8bit},
    {"muon", OptimizerType::Muon}, {"anyprecision_adamw", OptimizerType::AnyPrecisionAdamW},
    // Hugging Face TrainingArguments' names (optim=...). paged_adamw_8bit (QLoRA's default) keeps
    // the same 8-bit state in paged (managed) memory that moves to the host only under pressure:
    // planned resident, as adamw8bit.
    {"adamw_8bit", OptimizerType::AdamW8bit}, {"adamw_bnb_8bit", OptimizerType::AdamW8bit},
    {"paged_adamw_8bit", OptimizerType::AdamW8bit}};
const Named<OptimizerImpl> kOptimizerImpls[] = {
    {"single_tensor", OptimizerImpl::SingleTensor}, {"foreach", OptimizerImpl::Foreach},
    {"fused", OptimizerImpl::Fused}};

template <typename Enum, size_t N>
std::vector<std::string> names_of(const Named<Enum> (&table)[N]) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.push_back(entry.name);
  return names;
}

template <typename Enum, size_t N>
Enum value_of(const Named<Enum> (&table)[N], const std::string& name) {
  for (const auto& entry : table) {
    if (name == entry.name) return entry.value;
  }
  return table[0].value;  // unreachable: callers pass names validated by as_choice
}

template <typename Enum, size_t N>
const char* name_of(const Named<Enum> (&table)[N], Enum value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

template <typename Enum, size_t N>
Enum read_choice(const YamlNode& node, const Named<Enum> (&table)[N]) {
  return value_of(table, node.as_choice(names_of(table)));
}

const std::vector<std::string> kTopLevelKeys = {
    "description", "model", "batch_size", "seq_len", "image_size", "grad_accum_steps",
    "iterations", "precision", "attention", "dropout", "checkpointing", "optimizer",
    "training_loop", "eval", "device", "allocator", "parallel", "moe",
    "cuda_graphs", "compile", "loss", "activation_offloading"};

bool looks_like_path(const std::string& reference) {
  auto ends_with = [&](const char* suffix) {
    std::string s(suffix);
    return reference.size() >= s.size() && reference.compare(reference.size() - s.size(), s.size(), s) == 0;
  };
  return reference.find('/') != std::string::npos || ends_with(".yaml") || ends_with(".yml") ||
         ends_with(".json");
}

// Sections that may be written as one scalar, and the key that scalar stands for.
std::string shorthand_key(const std::string& path, const std::string& scalar) {
  if (path == "model") return looks_like_path(scalar) ? "path" : "preset";
  if (path == "device") return "profile";
  if (path == "allocator") return "conf";
  if (path == "optimizer") return "type";
  if (path == "checkpointing") return "mode";
  if (path == "eval") return "enabled";
  if (path == "job") return "kind";
  if (path == "weights") return "format";
  if (path == "loading") return "method";
  if (path == "compile") return "enabled";
  return "";
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// A family switch as the families read it: booleans in any YAML spelling become "true"/"false".
std::string option_text(const YamlNode& value) {
  std::string text = value.as_string();
  std::string lowered = lowercase(text);
  if (lowered == "true" || lowered == "yes" || lowered == "on") return "true";
  if (lowered == "false" || lowered == "no" || lowered == "off") return "false";
  return text;
}

// ---- model ------------------------------------------------------------------------------

ModelConfig read_model(const YamlNode& node, const std::string& base_dir) {
  if (node.is_missing()) node.fail("missing required key 'model'");
  YamlNode reference_node = node;
  if (node.is_map()) {
    YamlNode preset = node.child("preset");
    YamlNode path = node.child("path");
    if (!preset.is_missing() && !path.is_missing()) path.fail("'model' takes 'preset' or 'path', not both");
    if (preset.is_missing() && path.is_missing()) {
      node.fail("'model' needs 'preset' (a name from models/) or 'path' (a model YAML or config.json)");
    }
    reference_node = preset.is_missing() ? path : preset;
  }
  const std::string reference = reference_node.as_string();
  // An unknown preset is refused by resolve_model (a did-you-mean that keeps the name's
  // numbers, or the local folder it names), at this node's line.
  ModelConfig model;
  try {
    model = resolve_model(reference, base_dir);
  } catch (const InputError& error) {
    if (!error.where().file.empty()) throw;  // the error is inside the model file itself
    reference_node.fail(error.message());
  }
  if (!node.is_map()) return model;

  // Every other key of the map overrides one of the family's dimensions or switches.
  const families::FamilySpec* family = families::find_family(model.family);
  std::vector<std::string> dims;
  std::vector<std::string> allowed = {"preset", "path"};
  for (const auto& [name, value] : model.dims) dims.push_back(name);
  if (family) {
    for (const auto& spec : family->dims) dims.push_back(spec.name);
    allowed.insert(allowed.end(), family->options.begin(), family->options.end());
  }
  allowed.insert(allowed.end(), dims.begin(), dims.end());
  node.reject_unknown_keys(allowed);
  for (const auto& key : node.keys()) {
    if (key == "preset" || key == "path") continue;
    YamlNode value = node.child(key);
    if (std::find(dims.begin(), dims.end(), key) != dims.end()) {
      model.dims[key] = value.as_integer(1, kMaxCount);
    } else {
      model.options[key] = option_text(value);
    }
  }
  return model;
}

// ---- training knobs ---------------------------------------------------------------------

CheckpointConfig read_checkpointing(const YamlNode& node) {
  CheckpointConfig config;
  if (node.is_missing()) return config;
  if (node.is_scalar()) {
    config.mode = read_choice(node, kCheckpointModes);
    if (config.mode == CheckpointMode::Selective) node.fail("checkpointing mode 'selective' needs a 'recompute' list");
    config.reentrant = config.mode == CheckpointMode::Full || config.mode == CheckpointMode::EveryN;
    return config;
  }
  node.reject_unknown_keys({"mode", "every_n", "recompute", "save", "every_other_linear", "reentrant", "margin"});
  YamlNode mode = node.child("mode");
  if (!mode.is_missing()) config.mode = read_choice(mode, kCheckpointModes);
  YamlNode every_n = node.child("every_n");
  if (!every_n.is_missing()) {
    if (config.mode != CheckpointMode::EveryN) every_n.fail("'checkpointing.every_n' applies only to mode every_n");
    config.every_n = every_n.as_integer(1, kMaxCount);
  } else if (config.mode == CheckpointMode::EveryN) {
    node.fail("checkpointing mode 'every_n' needs 'every_n' (checkpoint one block in every n)");
  }
  YamlNode recompute = node.child("recompute");
  if (!recompute.is_missing()) {
    if (config.mode != CheckpointMode::Selective) {
      recompute.fail("'checkpointing.recompute' applies only to mode selective");
    }
    std::vector<YamlNode> items = recompute.is_scalar() ? std::vector<YamlNode>{recompute} : recompute.items();
    for (const auto& item : items) config.recompute_ops.push_back(item.as_choice(op_kind_names()));
  }
  YamlNode save = node.child("save");
  if (!save.is_missing()) {
    if (config.mode != CheckpointMode::Selective) save.fail("'checkpointing.save' applies only to mode selective");
    if (!recompute.is_missing()) save.fail("'checkpointing.save' and 'checkpointing.recompute' exclude each other");
    std::vector<YamlNode> items = save.is_scalar() ? std::vector<YamlNode>{save} : save.items();
    for (const auto& item : items) config.save_ops.push_back(item.as_choice(op_kind_names()));
  }
  if (config.mode == CheckpointMode::Selective && config.recompute_ops.empty() && config.save_ops.empty()) {
    node.fail("checkpointing mode 'selective' needs a 'recompute' or a 'save' list of op kinds");
  }
  YamlNode every_other = node.child("every_other_linear");
  if (!every_other.is_missing()) {
    config.every_other_linear = every_other.as_bool();
    bool saves_linear = std::find(config.save_ops.begin(), config.save_ops.end(), "linear") != config.save_ops.end();
    if (config.every_other_linear && !saves_linear) {
      every_other.fail("'checkpointing.every_other_linear' needs 'save' to list linear");
    }
  }
  // Selective and auto policies go through context_fn, which torch.utils.checkpoint accepts
  // only with use_reentrant=False (torch/utils/checkpoint.py, 2.13).
  config.reentrant = config.mode == CheckpointMode::Full || config.mode == CheckpointMode::EveryN;
  YamlNode reentrant = node.child("reentrant");
  if (!reentrant.is_missing()) {
    if (config.mode == CheckpointMode::None) reentrant.fail("'checkpointing.reentrant' applies only with checkpointing on");
    bool value = reentrant.as_bool();
    if (value && !config.reentrant) {
      reentrant.fail(std::string("'checkpointing.reentrant' true: mode ") + checkpoint_mode_name(config.mode) +
                     " runs only non-reentrant (context_fn needs use_reentrant=False)");
    }
    config.reentrant = value;
  }
  YamlNode margin = node.child("margin");
  if (!margin.is_missing()) {
    if (config.mode != CheckpointMode::Auto) margin.fail("'checkpointing.margin' applies only to mode auto");
    config.margin_fraction = margin.as_number(0.0, 0.9);
  }
  return config;
}

// torch.optim.Muon's arguments (torch 2.13 _muon.py), and the parameters left to AdamW.
void read_muon_keys(const YamlNode& node, OptimizerConfig& config, const std::string& type_name) {
  const bool muon = config.type == OptimizerType::Muon;
  for (const char* key : {"nesterov", "ns_steps", "adamw_params"}) {
    YamlNode given = node.child(key);
    if (!given.is_missing() && !muon) given.fail(std::string("'optimizer.") + key + "' applies only to muon, not " + type_name);
  }
  if (!muon) return;
  YamlNode impl = node.child("impl");
  if (!impl.is_missing() && config.impl == OptimizerImpl::Fused) {
    impl.fail("torch.optim.Muon has no fused implementation; 'impl' is the AdamW beside it and must be single_tensor or foreach here");
  }
  YamlNode nesterov = node.child("nesterov");
  if (!nesterov.is_missing()) config.nesterov = nesterov.as_bool();
  YamlNode ns_steps = node.child("ns_steps");
  if (!ns_steps.is_missing()) config.ns_steps = ns_steps.as_integer(1, 99);  // Muon refuses >= 100
  YamlNode adamw = node.child("adamw_params");
  if (!adamw.is_missing()) config.adamw_params = adamw.as_string_list();
}

// AnyPrecisionAdamW's arguments (llama-recipes policies/anyprecision_optimizer.py).
void read_anyprecision_keys(const YamlNode& node, OptimizerConfig& config, const std::string& type_name) {
  const bool any = config.type == OptimizerType::AnyPrecisionAdamW;
  for (const char* key : {"use_kahan_summation", "momentum_dtype", "variance_dtype", "compensation_buffer_dtype"}) {
    YamlNode given = node.child(key);
    if (!given.is_missing() && !any) given.fail(std::string("'optimizer.") + key + "' applies only to anyprecision_adamw, not " + type_name);
  }
  if (!any) return;
  YamlNode impl = node.child("impl");
  if (!impl.is_missing() && config.impl != OptimizerImpl::SingleTensor) {
    impl.fail("AnyPrecisionAdamW loops over its parameters: 'impl' can only be single_tensor");
  }
  config.impl = OptimizerImpl::SingleTensor;
  YamlNode kahan = node.child("use_kahan_summation");
  if (!kahan.is_missing()) config.kahan_summation = kahan.as_bool();
  auto fp32 = [&](const char* key) {
    YamlNode dtype = node.child(key);
    return !dtype.is_missing() && dtype.as_choice({"bf16", "fp32"}) == "fp32";
  };
  config.momentum_fp32 = fp32("momentum_dtype");
  config.variance_fp32 = fp32("variance_dtype");
  config.compensation_fp32 = fp32("compensation_buffer_dtype");
}

OptimizerConfig read_optimizer(const YamlNode& node, bool on_cpu) {
  OptimizerConfig config;
  // PyTorch's default implementation: foreach when every parameter is on a GPU, otherwise
  // the per-tensor loop (torch/optim/optimizer.py, _default_to_fused_or_foreach).
  config.impl = on_cpu ? OptimizerImpl::SingleTensor : OptimizerImpl::Foreach;
  if (node.is_missing()) return config;
  if (node.is_scalar()) {
    config.type = read_choice(node, kOptimizerTypes);
    return config;
  }
  node.reject_unknown_keys({"type", "impl", "momentum", "amsgrad", "in_backward", "nesterov", "ns_steps", "adamw_params",
                            "use_kahan_summation", "momentum_dtype", "variance_dtype", "compensation_buffer_dtype"});
  YamlNode type = node.child("type");
  if (!type.is_missing()) config.type = read_choice(type, kOptimizerTypes);
  const std::string type_name = optimizer_type_name(config.type);
  YamlNode impl = node.child("impl");
  if (!impl.is_missing()) {
    if (config.type == OptimizerType::AdamW8bit) impl.fail("'optimizer.impl' does not apply to adamw8bit (bitsandbytes has one kernel)");
    config.impl = read_choice(impl, kOptimizerImpls);
    if (config.impl == OptimizerImpl::Fused && config.type == OptimizerType::Adafactor) {
      impl.fail("torch.optim.Adafactor has no fused implementation (use foreach or single_tensor)");
    }
  }
  YamlNode momentum = node.child("momentum");
  if (!momentum.is_missing()) {
    if (config.type != OptimizerType::Sgd) momentum.fail("'optimizer.momentum' applies only to sgd, not " + type_name);
    config.momentum = momentum.as_number(0.0, 0.999999);
  }
  YamlNode amsgrad = node.child("amsgrad");
  if (!amsgrad.is_missing()) {
    if (config.type != OptimizerType::Adam && config.type != OptimizerType::AdamW) {
      amsgrad.fail("'optimizer.amsgrad' applies only to adam and adamw, not " + type_name);
    }
    config.amsgrad = amsgrad.as_bool();
  }
  YamlNode in_backward = node.child("in_backward");
  if (!in_backward.is_missing()) config.in_backward = in_backward.as_bool();
  read_muon_keys(node, config, type_name);
  read_anyprecision_keys(node, config, type_name);
  return config;
}

TrainingLoopConfig read_training_loop(const YamlNode& node, const ModelConfig& model) {
  const families::FamilySpec* family = families::find_family(model.family);
  const std::vector<std::string> outputs = family ? family->outputs : std::vector<std::string>{"loss", "logits"};
  TrainingLoopConfig config;
  node.reject_unknown_keys({"zero_grad", "zero_grad_position", "caller_held_outputs",
                            "keep_losses_across_iterations", "loss_outside_model"});
  config.zero_grad_set_to_none =
      node.choice_or("zero_grad", "set_to_none", {"set_to_none", "zero"}) == "set_to_none";
  config.zero_grad_before_forward =
      node.choice_or("zero_grad_position", "after_step", {"after_step", "before_forward"}) == "before_forward";
  YamlNode held = node.child("caller_held_outputs");
  if (!held.is_missing()) {
    config.caller_held_outputs.clear();
    std::vector<YamlNode> items = held.is_scalar() ? std::vector<YamlNode>{held} : held.items();
    for (const auto& item : items) config.caller_held_outputs.push_back(item.as_choice(outputs));
  }
  config.keep_losses_across_iterations = node.bool_or("keep_losses_across_iterations", false);
  config.loss_outside_model = node.bool_or("loss_outside_model", false);
  return config;
}

EvalConfig read_eval(const YamlNode& node) {
  EvalConfig config;
  if (node.is_missing()) return config;
  if (node.is_scalar()) {
    config.enabled = node.as_bool();
    return config;
  }
  node.reject_unknown_keys({"enabled", "batches", "no_grad", "accumulate_loss_without_item"});
  config.enabled = node.bool_or("enabled", true);  // writing the section asks for evaluation
  config.batches = node.integer_or("batches", 1, 1, kMaxEvalBatches);
  config.no_grad = node.bool_or("no_grad", true);
  config.accumulate_loss_without_item = node.bool_or("accumulate_loss_without_item", false);
  return config;
}

// ---- cross-section rules ----------------------------------------------------------------

std::string capability_text(int capability) {
  return std::to_string(capability / 10) + "." + std::to_string(capability % 10);
}

void check_device_support(const YamlNode& root, const Scenario& scenario) {
  const DeviceConfig& device = scenario.device;
  if (device.is_cpu) return;
  bool bf16 = scenario.precision == Precision::AmpBf16 || scenario.precision == Precision::PureBf16;
  if (bf16 && device.compute_capability < 80) {
    root.child("precision").fail(std::string("'precision' ") + precision_name(scenario.precision) +
                                 " needs bfloat16 support (compute capability 8.0+); " + device.profile +
                                 " is " + capability_text(device.compute_capability));
  }
  if (scenario.attention == AttentionImpl::Flash) {
    YamlNode attention = root.child("attention");
    const WeightFormat weights = scenario.job.weights.format;
    const bool half_weights = weights == WeightFormat::Fp16 || weights == WeightFormat::Bf16 || scenario.job.weights.quantized();
    if (scenario.precision == Precision::Fp32 && !half_weights) {
      YamlNode precision = root.child("precision");
      if (!precision.set_by().empty() && attention.set_by().empty()) {
        // The override made the clash: say so at the override, with the setting that resolves it.
        int64_t line = attention.location().line;
        precision.fail("fp32 clashes with 'attention: flash'" +
                       (line > 0 ? " (line " + std::to_string(line) + ")" : std::string()) +
                       ": PyTorch's flash kernel has no fp32 path; add --set attention=mem_efficient "
                       "(what SDPA picks for fp32)");
      }
      attention.fail("'attention' flash needs a 16-bit precision (amp_bf16, amp_fp16 or pure_bf16): "
                     "PyTorch's flash kernel has no fp32 path" +
                     std::string(attention.set_by().empty() ? "" : "; use attention=mem_efficient for fp32"));
    }
    if (device.compute_capability < 80) {
      attention.fail("'attention' flash needs compute capability 8.0+; " + device.profile + " is " +
                     capability_text(device.compute_capability));
    }
  }
}

// What F.scaled_dot_product_attention picks when the scenario does not say: flash for 16-bit
// inputs on sm_80+, the memory-efficient kernel otherwise on a GPU. On a CPU, its flash kernel
// (PyTorch 2.2+, any float dtype, fp32 included) unless dropout is active: the CPU dispatcher
// refuses flash for a nonzero dropout_p, so a training step with dropout runs the math path.
AttentionImpl default_attention(const Scenario& scenario) {
  if (scenario.device.is_cpu) {
    const bool dropout_active = scenario.dropout > 0.0 &&
                                (scenario.job.job.kind == JobKind::Train ||
                                 (scenario.job.job.kind == JobKind::Forward && !scenario.job.job.eval_mode));
    return dropout_active ? AttentionImpl::SdpaMath : AttentionImpl::Flash;
  }
  bool half = scenario.precision != Precision::Fp32;
  return half && scenario.device.compute_capability >= 80 ? AttentionImpl::Flash : AttentionImpl::MemEfficient;
}

Scenario read_scenario(const YamlDocument& document) {
  YamlNode root = document.root();
  if (!root.is_map()) root.fail("a scenario must be a map of keys (model, batch_size, ...), got " +
                                std::string(root.is_sequence() ? "a list" : root.is_scalar() ? "one value" : "nothing"));
  std::vector<std::string> top_level_keys = kTopLevelKeys;
  top_level_keys.insert(top_level_keys.end(), job_section_keys().begin(), job_section_keys().end());
  reject_model_file_given_as_scenario(root, document.path());
  root.reject_unknown_keys(top_level_keys);

  Scenario scenario;
  scenario.source_path = document.path();
  root.string_or("description", "");
  std::string base_dir = std::filesystem::path(document.path()).parent_path().string();
  if (base_dir.empty()) base_dir = ".";
  scenario.model = read_model(root.child("model"), base_dir);

  scenario.batch_size = root.child("batch_size").as_integer(1, kMaxBatchSize);
  YamlNode seq_len = root.child("seq_len");
  YamlNode image_size = root.child("image_size");
  const ModelConfig& model = scenario.model;
  if (families::is_vision(model)) {
    if (!seq_len.is_missing()) seq_len.fail("vision model '" + model.name + "' takes 'image_size', not 'seq_len'");
    int64_t model_size = families::default_sequence_length(model);
    scenario.seq_len = root.integer_or("image_size", model_size, 1, kMaxImageSize);
    if (model.family == "vit" && scenario.seq_len != model_size) {
      // torchvision's VisionTransformer asserts the input is exactly its configured size.
      image_size.fail("'image_size' " + std::to_string(scenario.seq_len) + " does not match " + model.name +
                      ", built for " + std::to_string(model_size) + "x" + std::to_string(model_size) +
                      " images (set model.image_size to change the model)");
    }
  } else {
    if (!image_size.is_missing()) image_size.fail("model '" + model.name + "' takes 'seq_len', not 'image_size'");
    const bool seq_len_optional = model.family == "mlp" || model.graph;  // a graph file has a default
    // A generate job's prompt_len stands for seq_len (the prompt) when seq_len is not given.
    const YamlNode job = root.child("job");
    const bool prompt_given = job.is_map() && !job.child("prompt_len").is_missing();
    if (seq_len.is_missing() && prompt_given) {
      scenario.seq_len = job.child("prompt_len").as_integer(1, kMaxSeqLen);
    } else {
      scenario.seq_len = seq_len_optional ? root.integer_or("seq_len", families::default_sequence_length(model), 1, kMaxSeqLen)
                                          : seq_len.as_integer(1, kMaxSeqLen);
    }
    // Learned position tables (GPT-2, BERT) have no row past max_positions; RoPE models do not stop there.
    if (model.family == "gpt2" || model.family == "bert") {
      int64_t max_positions = families::dim(model, "max_positions");
      if (scenario.seq_len > max_positions) {
        seq_len.fail("'seq_len' " + std::to_string(scenario.seq_len) + " exceeds the model's max_positions " +
                     std::to_string(max_positions) + " (its position embedding has no more rows)");
      }
    }
  }
  if (model.graph) check_graph_size(*model.graph, scenario.seq_len, model.graph->image_size ? image_size : seq_len);
  scenario.grad_accum_steps = root.integer_or("grad_accum_steps", 1, 1, kMaxGradAccumSteps);
  scenario.iterations = root.integer_or("iterations", 3, 1, kMaxIterations);
  YamlNode precision = root.child("precision");
  if (!precision.is_missing()) scenario.precision = read_choice(precision, kPrecisions);
  scenario.dropout = root.number_or("dropout", 0.0, 0.0, 0.999999);

  scenario.device = read_device(root.child("device"));
  capture_compiled_config(root.child("compile"), scenario.device.is_cpu, scenario.model);  // compile_config_loader.cc
  scenario.allocator = read_allocator(root.child("allocator"), scenario.device);
  if (model.graph) {
    YamlNode allocator = root.child("allocator");
    scenario.allocator.torch_version = graph_torch_version(
        *model.graph, allocator.is_map() && !allocator.child("torch_version").is_missing(),
        scenario.allocator.torch_version, scenario.model.warnings);
  }
  apply_outside_allocator(root.child("device"), scenario.allocator.torch_version, scenario.device);
  YamlNode attention = root.child("attention");
  if (!attention.is_missing()) scenario.attention = read_choice(attention, kAttentions);
  scenario.checkpointing = read_checkpointing(root.child("checkpointing"));
  YamlNode optimizer = root.child("optimizer");
  if (optimizer.is_missing() && model.graph && model.graph->declares_optimizer) {
    // The model file's own optimizer, captured into its graph file; errors name that file.
    const YamlDocument graph_file = YamlDocument::load_file(model.graph->path);
    scenario.optimizer = read_optimizer(graph_file.root().child("optimizer"), scenario.device.is_cpu);
  } else {
    scenario.optimizer = read_optimizer(optimizer, scenario.device.is_cpu);
  }
  scenario.loop = read_training_loop(root.child("training_loop"), scenario.model);
  scenario.eval = read_eval(root.child("eval"));
  read_parallel_section(root, base_dir, scenario);  // planner/parallel_config_loader.cc
  read_moe_section(root.child("moe"), scenario);    // scenario/moe_config.cc
  read_job_sections(root, scenario);                // scenario/job_config_loader.cc
  read_loss_section(root.child("loss"), scenario);  // scenario/loss_config_loader.cc
  if (attention.is_missing()) scenario.attention = default_attention(scenario);  // depends on the job
  read_cuda_graphs_section(root.child("cuda_graphs"), scenario);  // scenario/cuda_graphs_config_loader.cc
  read_compile_section(root.child("compile"), scenario);          // scenario/compile_config_loader.cc
  read_activation_offloading_section(root.child("activation_offloading"), scenario);  // activation_offload_config_loader.cc
  check_device_support(root, scenario);
  check_scenario_sizes(root, scenario);
  return scenario;
}

}  // namespace

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  if (recipe_kind(path)) {
    // A framework's own config: its scenario text is read as any scenario, with the overrides
    // on top; its messages name the mapped text (`--print-scenario` shows it, line for line).
    const RecipeTranslation translation = translate_recipe(path, overrides);
    const std::string mapped = path + " (as scenario)";
    Scenario scenario;
    try {
      scenario = read_scenario(YamlDocument::parse(translation.scenario_text(), mapped, overrides, shorthand_key));
    } catch (const InputError& error) {
      // An error at a key the file wrote (a Hub id not cached) names the file's own line and key.
      auto origin = translation.origins.find(error.key().substr(0, error.key().find('.')));
      if (error.where().file != mapped || origin == translation.origins.end()) throw;
      throw InputError(origin->second.first, origin->second.second,
                       "'" + origin->second.second + "': " + error.message());
    }
    scenario.source_path = path;
    scenario.model.warnings.insert(scenario.model.warnings.end(), translation.warnings.begin(),
                                   translation.warnings.end());
    return scenario;
  }
  return read_scenario(YamlDocument::load_file(path, overrides, shorthand_key));
}

Scenario load_scenario_text(const std::string& text, const std::string& path,
                            const std::vector<std::string>& overrides) {
  return read_scenario(YamlDocument::parse(text, path, overrides, shorthand_key));
}

const char* precision_name(Precision precision) { return name_of(kPrecisions, precision); }
const char* attention_name(AttentionImpl attention) { return name_of(kAttentions, attention); }
const char* checkpoint_mode_name(CheckpointMode mode) { return name_of(kCheckpointModes, mode); }
const char* optimizer_type_name(OptimizerType type) { return name_of(kOptimizerTypes, type); }
const char* optimizer_impl_name(OptimizerImpl impl) { return name_of(kOptimizerImpls, impl); }

}  // namespace oomcast::scenario
