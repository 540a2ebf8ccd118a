// Reads planner/torch_release_facts.yaml (compiled in) and answers which facts hold for a
// release. Each release's answer is computed once and kept.
#include "planner/torch_release_facts.h"

#include <map>
#include <mutex>
#include <string_view>
#include <utility>

#include "scenario/outside_allocator_table.h"
#include "scenario/yaml_reader.h"

namespace oomcast::planner {

using scenario::YamlDocument;
using scenario::YamlNode;
using scenario::read_release_range;

std::string_view torch_release_facts_yaml_text();  // generated from the YAML by CMake

namespace {

constexpr std::pair<std::string_view, bool TorchReleaseFacts::*> kFacts[] = {
    {"softmax_saves_input", &TorchReleaseFacts::softmax_saves_input},
    {"mean_saves_input", &TorchReleaseFacts::mean_saves_input},
    {"foreach_adam_denom_out_of_place", &TorchReleaseFacts::foreach_adam_denom_out_of_place},
    {"multihead_attention_calls_sdpa", &TorchReleaseFacts::multihead_attention_calls_sdpa},
    {"cpu_sdpa_flash_without_dropout", &TorchReleaseFacts::cpu_sdpa_flash_without_dropout},
    {"select_backward_clones_zeros", &TorchReleaseFacts::select_backward_clones_zeros},
    {"trunc_normal_rejection_masks", &TorchReleaseFacts::trunc_normal_rejection_masks},
};

}  // namespace

TorchReleaseFacts parse_torch_release_facts(const std::string& text, const std::string& name, int torch_version) {
  YamlDocument document = YamlDocument::parse(text, name);
  YamlNode root = document.root();
  root.require_map();
  root.reject_unknown_keys({"facts"});
  TorchReleaseFacts facts;
  for (const YamlNode& row : root.child("facts").items()) {
    row.reject_unknown_keys({"fact", "releases", "source"});
    if (row.child("source").is_missing()) row.fail("every fact needs a 'source'");
    std::vector<std::string> names;
    for (const auto& [fact_name, member] : kFacts) names.emplace_back(fact_name);
    std::string fact = row.child("fact").as_choice(names);
    if (!read_release_range(row.child("releases")).contains(torch_version)) continue;
    for (const auto& [fact_name, member] : kFacts) {
      if (fact_name == fact) facts.*member = true;
    }
  }
  return facts;
}

const TorchReleaseFacts& torch_release_facts(int torch_version) {
  static std::mutex mutex;
  static std::map<int, TorchReleaseFacts> by_release;
  std::lock_guard lock(mutex);
  auto found = by_release.find(torch_version);
  if (found == by_release.end()) {
    found = by_release
                .emplace(torch_version, parse_torch_release_facts(std::string(torch_release_facts_yaml_text()),
                                                                  "planner/torch_release_facts.yaml", torch_version))
                .first;
  }
  return found->second;
}

}  // namespace oomcast::planner
