// check_something_trains(); see trainable_check.h.
#include "planner/trainable_check.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "base/edit_distance.h"
#include "base/input_error.h"

namespace oomcast::planner {

using scenario::JobKind;
using scenario::Scenario;
using scenario::TrainableConfig;

namespace {

// The last component of the module holding `parameter_name`: "model.layers.0.q_proj.weight" -> "q_proj".
std::string module_leaf(const std::string& parameter_name) {
  const size_t last = parameter_name.rfind('.');
  if (last == std::string::npos || last == 0) return "";
  const size_t before = parameter_name.rfind('.', last - 1);
  return parameter_name.substr(before == std::string::npos ? 0 : before + 1,
                               last - (before == std::string::npos ? 0 : before + 1));
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

}  // namespace

void check_something_trains(const Scenario& scenario, const LayerGraph& graph) {
  const TrainableConfig& training = scenario.job.training;
  const SourceLocation where{scenario.source_path};
  // Adapters exist when a linear took them, or when the graph file carries them already (an
  // exported LoRA model has its lora_A / lora_B parameters written out).
  const bool has_adapters =
      graph.first_adapter_parameter < graph.parameters.size() ||
      std::any_of(graph.parameters.begin(), graph.parameters.end(), [&](TensorId parameter) {
        return graph.names[graph.tensors[parameter].name].find(".lora_A.") != std::string::npos;
      });
  if (training.lora.enabled && !has_adapters) {
    // The modules with a 2-D weight: what target_modules can name (linears, and embeddings).
    std::set<std::string> leaves;
    for (size_t p = 0; p < graph.parameters.size(); ++p) {
      const std::string& name = graph.names[graph.tensors[graph.parameters[p]].name];
      if (graph.parameter_shapes[p].size() == 2 && name.ends_with(".weight")) leaves.insert(module_leaf(name));
    }
    std::vector<std::string> candidates(leaves.begin(), leaves.end());
    candidates.push_back("all-linear");
    std::string hints;
    for (const std::string& target : training.lora.target_modules) hints += did_you_mean(target, candidates);
    throw InputError(where, "training.trainable.lora.target_modules",
                     "target_modules [" + joined(training.lora.target_modules) +
                         "] adapt no module of the model (PEFT raises: not found in the base model)" + hints +
                         "; its modules: " + joined(std::vector<std::string>(leaves.begin(), leaves.end())) +
                         ", or all-linear");
  }
  if (scenario.job.job.kind != JobKind::Train) return;
  for (size_t p = 0; p < graph.parameters.size(); ++p) {
    if (graph.parameter_requires_grad(static_cast<int32_t>(p))) return;
  }
  throw InputError(where, "training.trainable",
                   "no parameter trains: training.trainable and training.freeze leave all " +
                       std::to_string(graph.parameters.size()) +
                       " parameters frozen (torch.optim raises: optimizer got an empty parameter list)");
}

}  // namespace oomcast::planner
