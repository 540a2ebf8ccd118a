// check_model: a resolved model against its family's schema (scenario/model_families.cc) and
// the shape rules PyTorch and Hugging Face enforce when they build the modules.
#include <algorithm>

#include "base/edit_distance.h"
#include "base/input_error.h"
#include "scenario/model_families.h"

namespace oomcast::scenario::families {

namespace {

// Beyond this many blocks the graph alone would take gigabytes; the deepest published
// transformers have under 200.
constexpr int64_t kMaxLayers = 10000;
constexpr int64_t kMaxDimension = int64_t{1} << 24;

bool is_boolean_text(const std::string& text) {
  return text == "true" || text == "false" || text == "1" || text == "0" || text == "yes" || text == "no";
}

int64_t value_of(const ModelConfig& model, const char* name) {
  auto found = model.dims.find(name);
  if (found != model.dims.end()) return found->second;
  try {
    return dim(model, name);
  } catch (const InputError&) {
    return 0;
  }
}

void check_shapes(const ModelConfig& model, const KeyLocator& locate) {
  auto refuse = [&](const std::string& key, const std::string& message) {
    throw InputError(locate(key), key, "model '" + model.name + "' (family " + model.family + "): " + message);
  };
  const std::string& family = model.family;
  if (family == "resnet" || family == "mlp") return;
  const int64_t hidden = value_of(model, "hidden");
  const int64_t heads = value_of(model, "heads");
  const bool explicit_head_dim = model.dims.count("head_dim") > 0;
  if (hidden > 0 && heads > 0 && !explicit_head_dim && hidden % heads != 0) {
    refuse("heads", "hidden (" + std::to_string(hidden) + ") must be a multiple of heads (" + std::to_string(heads) +
                        "): each head gets hidden / heads features");
  }
  const FamilySpec* spec = find_family(family);
  const bool has_kv_heads =
      spec && std::any_of(spec->dims.begin(), spec->dims.end(), [](const DimSpec& d) { return d.name == std::string("kv_heads"); });
  if (has_kv_heads) {
    const int64_t kv_heads = value_of(model, "kv_heads");
    if (kv_heads > 0 && heads > 0 && (kv_heads > heads || heads % kv_heads != 0)) {
      refuse("kv_heads", "kv_heads (" + std::to_string(kv_heads) + ") must divide heads (" + std::to_string(heads) +
                             "): each key/value head serves heads / kv_heads query heads");
    }
    const int64_t head_dim = explicit_head_dim ? model.dims.at("head_dim") : (heads > 0 ? hidden / heads : 0);
    const bool partial = model.dims.count("rotary_dims") > 0;
    const int64_t rotated = partial ? model.dims.at("rotary_dims") : head_dim;
    if (partial && rotated > head_dim) {
      refuse("rotary_dims", "rotary_dims (" + std::to_string(rotated) + ") exceeds the head dimension (" +
                                std::to_string(head_dim) + ")");
    }
    if (rotated % 2 != 0) {
      refuse(partial ? "rotary_dims" : explicit_head_dim ? "head_dim" : "heads",
             "the rotated head width (" + std::to_string(rotated) + ") must be even for rotary embeddings");
    }
  }
  if (model.dims.count("experts") > 0) {
    const int64_t experts = model.dims.at("experts");
    const int64_t top_k = value_of(model, "experts_per_token");
    if (top_k > experts) {
      refuse("experts_per_token", "experts_per_token (" + std::to_string(top_k) + ") must not exceed experts (" +
                                      std::to_string(experts) + ")");
    }
  }
  if (family == "vit") {
    const int64_t image = value_of(model, "image_size");
    const int64_t patch = value_of(model, "patch_size");
    if (image > 0 && patch > 0 && image % patch != 0) {
      refuse("patch_size", "image_size (" + std::to_string(image) + ") must be a multiple of patch_size (" +
                               std::to_string(patch) + ")");
    }
  }
}

}  // namespace

void check_model(const ModelConfig& model, const KeyLocator& locate) {
  const FamilySpec* spec = find_family(model.family);
  if (spec == nullptr) {
    std::vector<std::string> names;
    for (const auto& entry : family_specs()) names.emplace_back(entry.name);
    throw InputError(locate("family"), "family",
                     "unknown model family '" + model.family + "'" + did_you_mean(model.family, names));
  }
  std::vector<std::string> dim_names;
  for (const auto& entry : spec->dims) dim_names.emplace_back(entry.name);
  for (const auto& [name, value] : model.dims) {
    if (std::find(dim_names.begin(), dim_names.end(), name) == dim_names.end()) {
      throw InputError(locate(name), name,
                       "unknown dimension '" + name + "' for family " + model.family + did_you_mean(name, dim_names));
    }
    if (value <= 0) throw InputError(locate(name), name, "dimension '" + name + "' must be positive");
    const int64_t limit = name == "layers" ? kMaxLayers : kMaxDimension;
    if (value > limit) {
      throw InputError(locate(name), name,
                       "dimension '" + name + "' = " + std::to_string(value) + " is beyond the limit " +
                           std::to_string(limit));
    }
  }
  for (const auto& entry : spec->dims) {
    if (entry.default_value == 0 && model.dims.count(entry.name) == 0) {
      throw InputError(locate("dims"), entry.name,
                       "model '" + model.name + "' (family " + model.family + ") needs dimension '" + entry.name +
                           "' (" + entry.meaning + ")");
    }
  }
  for (const auto& [name, value] : model.options) {
    if (std::find(spec->options.begin(), spec->options.end(), name) == spec->options.end()) {
      throw InputError(locate(name), name,
                       "unknown option '" + name + "' for family " + model.family + did_you_mean(name, spec->options));
    }
    if (!is_boolean_text(value)) {
      throw InputError(locate(name), name, "option '" + name + "' is true or false, not '" + value + "'");
    }
  }
  check_shapes(model, locate);
}

void check_model(const ModelConfig& model) {
  check_model(model, [&](const std::string&) { return SourceLocation{model.source, 0, 0, -1}; });
}

}  // namespace oomcast::scenario::families
