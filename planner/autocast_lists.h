// torch.autocast's op lists, per device and release: which ops run in the low dtype ("lower"),
// which in fp32, and which follow their inputs. The catalogue's ops (softmax, layer_norm,
// cross_entropy) and a graph file's generic ops both ask here, so a CPU job gets the CPU lists.
// The lists are the table planner/autocast_lists.yaml (compiled in; each row names its source:
// aten/src/ATen/autocast_mode.cpp, or the probe's measurement, validate/op_probe.py --table).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace oomcast::planner {

enum class AutocastClass : uint8_t { None, Lower, Fp32 };

enum class AutocastDevice : uint8_t { Cuda, Cpu };

// The class of the aten op `name` (base name: "softmax", "layer_norm", "conv_transpose2d") under
// autocast on `device` in release `torch_version` (100 * major + minor).
AutocastClass autocast_class(std::string_view name, AutocastDevice device, int torch_version);

const char* autocast_class_name(AutocastClass autocast);

// One device's lists for one release, as read from a table: the listed ops' classes.
struct AutocastTable {
  // Looked up by string_view without building a string (asked once per planned op).
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  std::unordered_map<std::string, AutocastClass, NameHash, std::equal_to<>> class_of;
};

// Parses a lists table (the YAML's text; `name` is the file errors print) for `device` and
// `torch_version`. Throws InputError (file:line:col and key) for a malformed row.
AutocastTable parse_autocast_lists(const std::string& text, const std::string& name, AutocastDevice device,
                                   int torch_version);

// The class of `name` in a parsed table.
AutocastClass autocast_class(const AutocastTable& table, std::string_view name);

}  // namespace oomcast::planner
