// The schema of each model family: the dimensions and switches a model YAML or config.json
// may set, their defaults, and the outputs a training loop may hold. The scenario reader
// checks models against it; the planner's family builders (planner/families/) read the
// values through dim() and option_enabled().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "scenario/scenario.h"

namespace oomcast::scenario::families {

struct DimSpec {
  const char* name;
  int64_t default_value;  // 0: required
  const char* meaning;
};

struct FamilySpec {
  const char* name;
  std::vector<DimSpec> dims;
  std::vector<std::string> options;  // accepted option keys
  std::vector<std::string> outputs;  // names the training loop may hold ("loss", "logits")
};

const std::vector<FamilySpec>& family_specs();
// Returns nullptr when `name` is not a family.
const FamilySpec* find_family(const std::string& name);

// Where a key of the model's source is (file, line); used to place check_model's errors.
using KeyLocator = std::function<SourceLocation(const std::string& key)>;

// Checks a resolved model against its family's schema and refuses what PyTorch or HF would
// refuse to build: an unknown family, dimension or option, a missing or non-positive
// dimension, a switch that is not true/false, and impossible shapes (hidden not a multiple
// of heads, kv_heads not dividing heads, ...), naming the keys. Throws InputError.
void check_model(const ModelConfig& model, const KeyLocator& locate);
void check_model(const ModelConfig& model);

// The dimension `name` of `model`, or the family default; throws InputError when missing.
int64_t dim(const ModelConfig& model, const std::string& name);
// A family switch; throws InputError when its value is not a boolean.
bool option_enabled(const ModelConfig& model, const std::string& name, bool default_value);

// The sequence length (image size for vision) used when a scenario gives none.
int64_t default_sequence_length(const ModelConfig& model);
// True for families whose inputs are images (seq_len means image size).
bool is_vision(const ModelConfig& model);
// True when the scenario's `attention:` choice reaches the model: a family with attention, or a
// graph file with a catalogue `attention` op (a CNN or a bare MLP has none to choose).
bool uses_attention_setting(const ModelConfig& model);

}  // namespace oomcast::scenario::families
