// The scenario's `device` and `allocator` sections: a GPU profile or a custom card, and one
// PYTORCH_CUDA_ALLOC_CONF built from the allocator keys. Split from scenario_loader.cc, which
// reads the other sections and the rules that cross them.
#include "scenario/device_section_loader.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "scenario/device_profiles.h"
#include "sim/newest_torch_release.h"

namespace oomcast::scenario {

namespace {

constexpr int64_t kMaxCount = int64_t{1} << 40;

uint64_t scaled_bytes(double amount, double unit) { return static_cast<uint64_t>(std::llround(amount * unit)); }

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& word : words) text += (text.empty() ? "" : ", ") + word;
  return text;
}

}  // namespace

DeviceConfig read_device(const YamlNode& node) {
  const DeviceProfile* default_profile = find_device_profile("a100-80gb");
  if (node.is_missing()) return device_config_from_profile(*default_profile);
  YamlNode profile_node = node;
  if (node.is_map()) {
    node.reject_unknown_keys({"profile", "total_gib", "context_mib", "other_processes_mib",
                              "cublas_workspace_bytes", "cublas_workspaces", "compute_capability",
                              "gpu_index", "cuda_version", "module_loading", "cublas_workspace_config"});
    profile_node = node.child("profile");
  }
  DeviceConfig config;
  if (!profile_node.is_missing()) {
    std::string name = profile_node.as_string();
    const DeviceProfile* profile = find_device_profile(name);
    if (!profile) {
      profile_node.fail("unknown device profile '" + name + "'" + device_did_you_mean(name) + "; known: " +
                        join(device_profile_names()));
    }
    config = device_config_from_profile(*profile);
  } else {
    // A custom GPU: the total is required, everything else defaults like a generic sm_80 card.
    config.profile = "custom";
    config.display_name = "custom GPU";
    config.compute_capability = 80;
    config.model.context_bytes = kDefaultContextBytes;
    config.cublas_workspaces = kTrainingCublasWorkspaces;
    if (node.child("total_gib").is_missing()) {
      node.fail("'device' needs 'profile' (one of the known GPUs) or 'total_gib' for a custom GPU");
    }
  }
  if (!node.is_map()) return config;

  if (config.is_cpu) {
    for (const char* key : {"context_mib", "other_processes_mib", "cublas_workspace_bytes", "cublas_workspaces",
                            "compute_capability", "gpu_index", "cuda_version", "module_loading",
                            "cublas_workspace_config"}) {
      YamlNode value = node.child(key);
      if (!value.is_missing()) value.fail("'device." + std::string(key) + "' does not apply to the cpu device");
    }
  }
  YamlNode capability = node.child("compute_capability");
  if (!capability.is_missing()) {
    config.compute_capability = static_cast<int>(std::lround(capability.as_number(3.0, 20.0) * 10));
  }
  if (config.profile == "custom") {
    config.cublas_workspace_bytes = default_cublas_workspace_bytes(config.compute_capability);
  }
  YamlNode total = node.child("total_gib");
  if (!total.is_missing()) config.model.total_bytes = scaled_bytes(total.as_number(0.001, 1 << 20), 1ull << 30);
  YamlNode context = node.child("context_mib");
  if (!context.is_missing()) config.model.context_bytes = scaled_bytes(context.as_number(0, 1 << 20), 1ull << 20);
  YamlNode others = node.child("other_processes_mib");
  if (!others.is_missing()) config.model.other_process_bytes = scaled_bytes(others.as_number(0, 1 << 30), 1ull << 20);
  config.cublas_workspace_bytes = static_cast<uint64_t>(
      node.integer_or("cublas_workspace_bytes", static_cast<int64_t>(config.cublas_workspace_bytes), 0, kMaxCount));
  config.cublas_workspaces = node.integer_or("cublas_workspaces", config.cublas_workspaces, 0, 64);
  config.model.device_index = static_cast<int>(node.integer_or("gpu_index", 0, 0, 1023));
  return config;
}

namespace {

// "2.6" -> 206.
sim::TorchVersion read_torch_version(const YamlNode& node) {
  std::string text = node.as_string();
  size_t dot = text.find('.');
  sim::TorchVersion version = 0;
  try {
    if (dot != std::string::npos) {
      size_t used_major = 0, used_minor = 0;
      int major = std::stoi(text.substr(0, dot), &used_major);
      std::string minor_text = text.substr(dot + 1);
      int minor = std::stoi(minor_text, &used_minor);
      if (used_major == dot && used_minor == minor_text.size() && major >= 1 && minor >= 0 && minor < 100) {
        version = major * 100 + minor;
      }
    }
  } catch (const std::exception&) {
  }
  if (version > sim::kNewestTorchVersion) {
    node.fail("'allocator.torch_version' " + text + " is newer than the newest release oomcast models (2." +
              std::to_string(sim::kNewestTorchVersion % 100) + ")");
  }
  if (version > 0) return version;
  node.fail("'allocator.torch_version' must be a PyTorch release such as \"2.6\", got '" + text + "'");
}

}  // namespace

// Builds one PYTORCH_CUDA_ALLOC_CONF string from the section, because PyTorch's parser resets
// max_split_size, the roundup table and the GC threshold on every parse: the keys must be
// parsed together. An error in the string is reported at the YAML key that produced it.
sim::AllocatorConfig read_allocator(const YamlNode& node, DeviceConfig& device) {
  sim::AllocatorConfig base;
  if (node.is_missing()) return base;
  std::string conf;
  YamlNode conf_node = node;
  auto append = [&conf](const std::string& option) { conf += (conf.empty() ? "" : ",") + option; };
  if (node.is_scalar()) {
    conf = node.as_string();
  } else {
    node.reject_unknown_keys({"conf", "expandable_segments", "max_split_size_mb", "roundup_power2_divisions",
                              "garbage_collection_threshold", "memory_fraction", "torch_version"});
    conf_node = node.child("conf");
    if (!conf_node.is_missing()) conf = conf_node.as_string();
    YamlNode version = node.child("torch_version");
    if (!version.is_missing()) base.torch_version = read_torch_version(version);
    YamlNode expandable = node.child("expandable_segments");
    if (!expandable.is_missing()) append(std::string("expandable_segments:") + (expandable.as_bool() ? "True" : "False"));
    YamlNode split = node.child("max_split_size_mb");
    if (!split.is_missing()) append("max_split_size_mb:" + std::to_string(split.as_integer(0, kMaxCount)));
    YamlNode roundup = node.child("roundup_power2_divisions");
    if (roundup.is_map()) {
      // {256: 1, 512: 2, ">": 8} -> roundup_power2_divisions:[256:1,512:2,>:8]
      std::string list;
      for (const auto& key : roundup.keys()) {
        list += (list.empty() ? "" : ",") + key + ":" + std::to_string(roundup.child(key).as_integer(0, 1 << 20));
      }
      append("roundup_power2_divisions:[" + list + "]");
    } else if (!roundup.is_missing()) {
      append("roundup_power2_divisions:" + std::to_string(roundup.as_integer(0, 1 << 20)));
    }
    YamlNode gc = node.child("garbage_collection_threshold");
    if (!gc.is_missing()) {
      // Formatted with enough digits that PyTorch's own range check sees the written value.
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", gc.as_number(-1e9, 1e9));
      append(std::string("garbage_collection_threshold:") + text);
    }
    YamlNode fraction = node.child("memory_fraction");
    if (!fraction.is_missing()) {
      double value = fraction.as_number(0.0, 1.0);
      if (value <= 0.0) fraction.fail("'allocator.memory_fraction' must be above 0, got " + std::to_string(value));
      device.model.memory_fraction = value;
    }
  }
  if (conf.empty()) return base;
  try {
    sim::AllocatorConfig config = sim::parse_alloc_conf(conf, base);
    config.source_text = conf;
    return config;
  } catch (const InputError& error) {
    YamlNode culprit = node.is_map() ? node.child(error.key()) : node;
    if (culprit.is_missing()) culprit = conf_node.is_missing() ? node : conf_node;
    culprit.fail(error.message());
  }
}

}  // namespace oomcast::scenario
