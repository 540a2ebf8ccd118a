// Reads torch.autocast's op lists from planner/autocast_lists.yaml (compiled in) and answers an
// op's class for a device and release. The lists are data so that a release that moves an op
// (conv_transpose on the CPU in 2.0) is a new row with its source, not a code branch. Each
// (device, release) table is built once and kept.
#include "planner/autocast_lists.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "scenario/outside_allocator_table.h"
#include "scenario/yaml_reader.h"

namespace oomcast::planner {

using scenario::YamlDocument;
using scenario::YamlNode;
using scenario::read_release_range;

std::string_view autocast_lists_yaml_text();  // generated from the YAML by CMake

namespace {

const char* device_name(AutocastDevice device) { return device == AutocastDevice::Cpu ? "cpu" : "cuda"; }

const AutocastTable& cached_table(AutocastDevice device, int torch_version) {
  // The planner asks once per op; most plans ask for one (device, release) only, so the last
  // answer is kept per thread to skip the lock.
  thread_local const AutocastTable* last_table = nullptr;
  thread_local AutocastDevice last_device = AutocastDevice::Cuda;
  thread_local int last_version = -1;
  if (last_table != nullptr && last_device == device && last_version == torch_version) return *last_table;
  static std::mutex mutex;
  static std::map<std::pair<int, int>, std::unique_ptr<AutocastTable>> tables;
  std::lock_guard lock(mutex);
  auto& table = tables[{static_cast<int>(device), torch_version}];
  if (!table) {
    table = std::make_unique<AutocastTable>(parse_autocast_lists(
        std::string(autocast_lists_yaml_text()), "planner/autocast_lists.yaml", device, torch_version));
  }
  last_table = table.get();
  last_device = device;
  last_version = torch_version;
  return *table;
}

}  // namespace

AutocastTable parse_autocast_lists(const std::string& text, const std::string& name, AutocastDevice device,
                                   int torch_version) {
  YamlDocument document = YamlDocument::parse(text, name);
  YamlNode root = document.root();
  root.require_map();
  root.reject_unknown_keys({"lists"});
  AutocastTable table;
  for (const YamlNode& row : root.child("lists").items()) {
    row.reject_unknown_keys({"device", "class", "releases", "source", "ops"});
    if (row.child("source").is_missing()) row.fail("every list needs a 'source'");
    const std::string row_device = row.child("device").as_choice({"cuda", "cpu"});
    const AutocastClass row_class =
        row.child("class").as_choice({"lower", "fp32"}) == "lower" ? AutocastClass::Lower : AutocastClass::Fp32;
    const bool holds = row_device == device_name(device) && read_release_range(row.child("releases")).contains(torch_version);
    const std::vector<std::string> ops = row.child("ops").as_string_list();
    if (ops.empty()) row.child("ops").fail("a list needs at least one op");
    if (!holds) continue;
    for (const std::string& op : ops) table.class_of[op] = row_class;  // a later row wins
  }
  return table;
}

AutocastClass autocast_class(const AutocastTable& table, std::string_view name) {
  auto found = table.class_of.find(name);
  return found == table.class_of.end() ? AutocastClass::None : found->second;
}

AutocastClass autocast_class(std::string_view name, AutocastDevice device, int torch_version) {
  return autocast_class(cached_table(device, torch_version), name);
}

const char* autocast_class_name(AutocastClass autocast) {
  switch (autocast) {
    case AutocastClass::None: return "none";
    case AutocastClass::Lower: return "lower";
    case AutocastClass::Fp32: return "fp32";
  }
  return "?";
}

}  // namespace oomcast::planner
