// Reads `compile:` / `compiled:` and checks a scenario's compile settings against its torch
// release, device and model (scenario/compile_config_loader.h). The releases below are when each
// option appeared in PyTorch: torch.compile(model, fullgraph, dynamic, mode) in 2.0
// (torch/__init__.py), dynamic=None ("auto", automatic dynamic shapes) as the default in 2.1,
// mode "max-autotune-no-cudagraphs" in 2.1 and "lite" checked in 2.13
// (torch/_inductor/__init__.py list_mode_options), torch._functorch.config.activation_memory_budget
// in 2.4 (torch/_functorch/config.py).
#include "scenario/compile_config_loader.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include "scenario/graph_file.h"
#include "scenario/hf_capture.h"
#include "scenario/model_catalog.h"

namespace oomcast::scenario {

namespace {

struct ModeName {
  CompileMode mode;
  const char* name;
  int since;  // 100 * major + minor
};

constexpr ModeName kModes[] = {
    {CompileMode::Default, "default", 200},
    {CompileMode::Lite, "lite", 213},
    {CompileMode::ReduceOverhead, "reduce-overhead", 200},
    {CompileMode::MaxAutotune, "max-autotune", 200},
    {CompileMode::MaxAutotuneNoCudagraphs, "max-autotune-no-cudagraphs", 201},
};

struct ScopeName {
  CompileScope scope;
  const char* name;
};

constexpr ScopeName kScopes[] = {
    {CompileScope::Model, "model"},
    {CompileScope::Blocks, "blocks"},
    {CompileScope::Loss, "loss"},
    {CompileScope::Optimizer, "optimizer"},
};

constexpr int kCompileSince = 200;
constexpr int kDynamicAutoSince = 201;
constexpr int kMemoryBudgetSince = 204;

std::string release_text(int release) { return std::to_string(release / 100) + "." + std::to_string(release % 100); }

const ModeName& mode_entry(CompileMode mode) {
  for (const ModeName& entry : kModes) {
    if (entry.mode == mode) return entry;
  }
  return kModes[0];
}

std::string scopes_text(const std::vector<CompileScope>& scopes) {
  std::string text;
  for (CompileScope scope : scopes) text += std::string(text.empty() ? "" : ", ") + compile_scope_name(scope);
  return "[" + text + "]";
}

void require_release(const YamlNode& node, const std::string& what, int since, int release) {
  if (release < since)
    node.fail(what + " needs torch " + release_text(since) + " or newer; the scenario plans torch " +
              release_text(release) + " (allocator.torch_version)");
}

// The scenario's compile settings must be the ones the graph file was captured with: the
// partition, the fusion and the graph breaks are the capture's.
void check_against_capture(const YamlNode& node, const CompileConfig& wanted, const GraphFile& file) {
  const CompileConfig& captured = file.compiled;
  auto differs = [&](const std::string& key, const std::string& asked, const std::string& recorded) {
    YamlNode at = node.is_map() && !node.child(key).is_missing() ? node.child(key) : node;
    at.fail("compile." + key + " " + asked + " differs from the " + recorded + " " + file.path +
            " was captured with; capture it again with these settings (capture/oomcast_capture.py --compile, "
            "capture/README.md)");
  };
  if (wanted.mode != captured.mode) differs("mode", compile_mode_name(wanted.mode), compile_mode_name(captured.mode));
  if (wanted.fullgraph != captured.fullgraph)
    differs("fullgraph", wanted.fullgraph ? "true" : "false", captured.fullgraph ? "true" : "false");
  if (wanted.dynamic != captured.dynamic) differs("dynamic", wanted.dynamic, captured.dynamic);
  if (wanted.scopes != captured.scopes) differs("scope", scopes_text(wanted.scopes), scopes_text(captured.scopes));
  if (wanted.activation_memory_budget != captured.activation_memory_budget)
    differs("activation_memory_budget", std::to_string(wanted.activation_memory_budget),
            std::to_string(captured.activation_memory_budget));
}

// A compiled optimizer.step (torch.compile around the step, as torchtune's and torchtitan's
// recipes write it): inductor fuses the update into kernels that write the parameters and the
// states in place, so the step allocates none of the eager implementations' temporaries. That was
// measured for torch.optim's Adam, AdamW and SGD (validate/compiled/gpt-optimizer.yaml); other
// optimizers are refused rather than guessed.
void check_compiled_optimizer(const YamlNode& scope, OptimizerConfig& optimizer) {
  const bool measured = optimizer.type == OptimizerType::Adam || optimizer.type == OptimizerType::AdamW ||
                        optimizer.type == OptimizerType::Sgd;
  if (!measured)
    scope.fail("compile scope 'optimizer': a compiled step is planned for torch.optim's adam, adamw and sgd only "
               "(this optimizer's compiled step was not measured)");
  if (optimizer.in_backward)
    scope.fail("compile scope 'optimizer' with optimizer.in_backward: the per-parameter steps run in backward "
               "hooks, which the recipes do not compile");
  optimizer.compiled_step = true;
}

}  // namespace

bool CompileConfig::has_scope(CompileScope scope) const {
  return std::find(scopes.begin(), scopes.end(), scope) != scopes.end();
}

const char* compile_mode_name(CompileMode mode) { return mode_entry(mode).name; }

const char* compile_scope_name(CompileScope scope) {
  for (const ScopeName& entry : kScopes) {
    if (entry.scope == scope) return entry.name;
  }
  return "?";
}

CompileConfig read_compile_map(const YamlNode& node, bool graph_file_keys) {
  CompileConfig config;
  if (node.is_missing()) return config;
  if (node.is_scalar()) {
    config.enabled = node.as_bool();
    if (config.enabled) config.scopes = {CompileScope::Model};
    return config;
  }
  if (!node.is_map())
    node.fail("'" + node.key() + "' is true, false or a map {mode, fullgraph, dynamic, scope, activation_memory_budget}");
  std::vector<std::string> keys = {"enabled", "mode", "fullgraph", "dynamic", "scope", "activation_memory_budget"};
  if (graph_file_keys) keys.insert(keys.end(), {"graphs", "graph_breaks", "for_device"});
  node.reject_unknown_keys(keys);
  config.enabled = node.bool_or("enabled", true);
  std::vector<std::string> mode_names;
  for (const ModeName& entry : kModes) mode_names.emplace_back(entry.name);
  const std::string mode = node.choice_or("mode", "default", mode_names);
  for (const ModeName& entry : kModes) {
    if (mode == entry.name) config.mode = entry.mode;
  }
  config.fullgraph = node.bool_or("fullgraph", false);
  config.dynamic = node.choice_or("dynamic", "false", {"false", "true", "auto"});
  YamlNode scope = node.child("scope");
  if (scope.is_missing()) {
    config.scopes = {CompileScope::Model};
  } else {
    std::vector<std::string> names;
    for (const ScopeName& entry : kScopes) names.emplace_back(entry.name);
    for (const std::string& name : scope.as_string_list()) {
      CompileScope value = CompileScope::Model;
      for (const ScopeName& entry : kScopes) {
        if (name == entry.name) value = entry.scope;
      }
      if (std::find(names.begin(), names.end(), name) == names.end())
        scope.fail("unknown compile scope '" + name + "' (model, blocks, loss, optimizer)");
      if (config.has_scope(value)) scope.fail("compile scope '" + name + "' is listed twice");
      config.scopes.push_back(value);
    }
    std::sort(config.scopes.begin(), config.scopes.end());
    if (config.has_scope(CompileScope::Model) && config.has_scope(CompileScope::Blocks))
      scope.fail("compile scopes 'model' and 'blocks' exclude each other (the blocks are inside the model)");
  }
  config.activation_memory_budget = node.number_or("activation_memory_budget", 1.0, 0.0, 1.0);
  if (graph_file_keys) {
    config.graphs = static_cast<int>(node.integer_or("graphs", 0, 0, 100000));
    config.graph_breaks = static_cast<int>(node.integer_or("graph_breaks", 0, 0, 100000));
    if (!node.child("for_device").is_missing()) config.for_device = node.choice_or("for_device", "cuda", {"cuda", "cpu"});
  }
  return config;
}

// --compile's SETTINGS for `config`: the scenario's compile: map as the capture reads it.
std::string capture_settings(const CompileConfig& config) {
  std::string scopes;
  for (CompileScope scope : config.scopes) scopes += std::string(scopes.empty() ? "" : ", ") + compile_scope_name(scope);
  std::string budget = std::to_string(config.activation_memory_budget);
  return std::string("{mode: ") + compile_mode_name(config.mode) + ", fullgraph: " +
         (config.fullgraph ? "true" : "false") + ", dynamic: " + config.dynamic + ", scope: [" + scopes +
         "], activation_memory_budget: " + budget + "}";
}

void capture_compiled_config(const YamlNode& node, bool device_is_cpu, ModelConfig& model) {
  if (node.is_missing() || !model.source.ends_with(".json")) return;
  const CompileConfig config = read_compile_map(node, false);
  // what read_compile_section refuses anyway is refused there, at its key, before any capture
  if (!config.enabled || config.uses_cudagraphs() || config.has_scope(CompileScope::Blocks)) return;
  if (!config.has_scope(CompileScope::Loss)) {
    YamlNode at = node.is_map() && !node.child("scope").is_missing() ? node.child("scope") : node;
    at.fail("compile: a config.json's loss (transformers' loss over the logits, which a Trainer computes in the "
            "compiled forward) is compiled with the model: write scope: [model, loss]");
  }
  const std::string models = models_directory();
  const std::string repo_root = models.empty() ? "" : std::filesystem::path(models).parent_path().string();
  ModelConfig compiled =
      captured_compiled_hf_model(model.source, capture_settings(config), device_is_cpu ? "cpu" : "cuda", repo_root);
  compiled.name = model.name;
  model = std::move(compiled);
}

void read_compile_section(const YamlNode& node, Scenario& scenario) {
  const GraphFile* file = scenario.model.graph.get();
  const bool captured_compiled = file != nullptr && file->compiled.enabled;
  CompileConfig config = read_compile_map(node, false);
  if (!config.enabled) {
    if (captured_compiled)
      node.fail(
          "model " + file->path + " was captured compiled (its 'compiled:' key) but the scenario says no 'compile:'; "
          "give the capture's settings as 'compile:', or capture the model without --compile to plan it eager");
    return;
  }
  const int release = scenario.allocator.torch_version;
  require_release(node, "torch.compile", kCompileSince, release);
  if (node.is_map()) {
    if (YamlNode mode = node.child("mode"); !mode.is_missing())
      require_release(mode, "compile mode '" + std::string(compile_mode_name(config.mode)) + "'",
                      mode_entry(config.mode).since, release);
    if (YamlNode dynamic = node.child("dynamic"); !dynamic.is_missing() && config.dynamic == "auto")
      require_release(dynamic, "compile.dynamic: auto (dynamic=None)", kDynamicAutoSince, release);
    if (YamlNode budget = node.child("activation_memory_budget"); !budget.is_missing())
      require_release(budget, "compile.activation_memory_budget (torch._functorch.config.activation_memory_budget)",
                      kMemoryBudgetSince, release);
  }
  auto at = [&](const char* key) { return node.is_map() && !node.child(key).is_missing() ? node.child(key) : node; };
  if (config.uses_cudagraphs()) {
    if (scenario.device.is_cpu)
      at("mode").fail(std::string("compile.mode '") + compile_mode_name(config.mode) +
                      "' captures CUDA graphs (cudagraph trees); the scenario runs on the cpu");
    at("mode").fail(std::string("compile.mode '") + compile_mode_name(config.mode) +
                    "' (cudagraph trees) is not planned yet: its private pools and static inputs are "
                    "docs/scenario-format.md#compile's open item; plan 'default' or 'max-autotune-no-cudagraphs'");
  }
  if (config.has_scope(CompileScope::Blocks))
    at("scope").fail("compile scope " + scopes_text(config.scopes) +
                     ": 'blocks' is not planned yet (the compiled capture compiles the model, the loss and the "
                     "optimizer step)");
  if (config.has_scope(CompileScope::Optimizer)) check_compiled_optimizer(at("scope"), scenario.optimizer);
  if (file == nullptr)
    node.fail("compile: model '" + scenario.model.name + "' is a built-in family; a compiled plan comes from running "
              "the model's code under torch.compile: give its config.json (captured compiled on fake tensors), or write "
              "its model file (validate/models.py builds the families in PyTorch) and capture/oomcast_capture.py "
              "MODEL.py --compile -o GRAPH.yaml (docs/scenario-format.md#compile)");
  if (!captured_compiled)
    node.fail("compile: " + file->path + " was captured eager; capture it with --compile "
              "(capture/oomcast_capture.py MODEL.py --compile -o GRAPH.yaml)");
  check_against_capture(node, config, *file);
  const std::string device_kind = scenario.device.is_cpu ? "cpu" : "cuda";
  if (!file->compiled.for_device.empty() && file->compiled.for_device != device_kind)
    node.fail("compile: " + file->path + " was captured for device kind '" + file->compiled.for_device +
              "' (its compiled.for_device) and the scenario runs on " + device_kind +
              ": inductor's channels-last layout copies differ by device; capture again with --for-device " +
              device_kind);
  config.graphs = file->compiled.graphs;
  config.for_device = file->compiled.for_device;
  config.graph_breaks = file->compiled.graph_breaks;
  scenario.compile = config;
}

}  // namespace oomcast::scenario
