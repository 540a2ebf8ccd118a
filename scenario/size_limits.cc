// check_scenario_sizes(): limits on model dimensions and on the tensors they imply; see
// size_limits.h. Runs after the whole scenario is read, so dimensions that came from a
// preset, a model YAML or a config.json are checked as well as those set in the scenario.
#include "scenario/size_limits.h"

#include <algorithm>
#include <limits>
#include <string>

#include "scenario/model_families.h"
#include "scenario/scenario_loader.h"

namespace oomcast::scenario {

namespace {

bool is_depth(const std::string& name) { return name == "layers" || name == "depth"; }

std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

// The node to blame for model dimension `name`: the scenario's own key when it set one.
YamlNode model_dim_node(const YamlNode& root, const std::string& name) {
  YamlNode model = root.child("model");
  if (model.is_map() && !model.child(name).is_missing()) return model.child(name);
  return model;
}

void check_dims(const YamlNode& root, const ModelConfig& model) {
  for (const auto& [name, value] : model.dims) {
    const int64_t limit = is_depth(name) ? kMaxLayers : kMaxModelWidth;
    if (value <= limit) continue;
    std::string from = model.source.empty() ? "" : " (from " + model.source + ")";
    model_dim_node(root, name)
        .fail("'model." + name + "' " + with_commas(value) + from + " exceeds the limit of " + with_commas(limit) +
              (is_depth(name) ? " layers" : ""));
  }
}

int64_t widest_dim(const ModelConfig& model, std::string* name) {
  int64_t widest = 0;
  for (const auto& [key, value] : model.dims) {
    if (is_depth(key) || key == "max_positions" || key == "image_size") continue;
    if (value > widest) {
      widest = value;
      *name = key;
    }
  }
  return widest;
}

}  // namespace

int64_t saturating_product(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a > std::numeric_limits<int64_t>::max() / b) return std::numeric_limits<int64_t>::max();
  return a * b;
}

void check_scenario_sizes(const YamlNode& root, const Scenario& scenario) {
  check_dims(root, scenario.model);
  const bool vision = families::is_vision(scenario.model);
  const char* length_key = vision ? "image_size" : "seq_len";
  // Positions per sample: tokens, or pixels for an image model.
  const int64_t positions = vision ? saturating_product(scenario.seq_len, scenario.seq_len) : scenario.seq_len;
  std::string width_name;
  const int64_t width = widest_dim(scenario.model, &width_name);
  const int64_t elements = saturating_product(saturating_product(scenario.batch_size, positions), std::max<int64_t>(width, 1));
  YamlNode blame = root.child("batch_size");
  if (elements > kMaxTensorElements) {
    blame.fail("batch_size " + with_commas(scenario.batch_size) + " x " + length_key + " " +
               with_commas(scenario.seq_len) + (vision ? "^2" : "") + " x model." + width_name + " " + with_commas(width) +
               " is a tensor of more than 2^44 elements (64 TiB in fp32): beyond any device");
  }
  // Eager and math attention materialise batch x heads x seq x seq scores.
  auto heads = scenario.model.dims.find("heads");
  bool materialised = scenario.attention == AttentionImpl::Eager || scenario.attention == AttentionImpl::SdpaMath;
  if (!vision && materialised && heads != scenario.model.dims.end()) {
    int64_t scores = saturating_product(saturating_product(scenario.batch_size, heads->second),
                                        saturating_product(scenario.seq_len, scenario.seq_len));
    if (scores > kMaxTensorElements) {
      blame.fail("batch_size " + with_commas(scenario.batch_size) + " x model.heads " + with_commas(heads->second) +
                 " x seq_len^2 (" + with_commas(scenario.seq_len) + ") attention scores are more than 2^44 elements "
                 "(64 TiB in fp32) under attention " + attention_name(scenario.attention) +
                 ": use a shorter seq_len or attention flash/mem_efficient");
    }
  }
}

}  // namespace oomcast::scenario
