// Recognises model files given where a scenario belongs (not_a_scenario.h).
#include "scenario/not_a_scenario.h"

#include <filesystem>

namespace oomcast::scenario {

void reject_model_file_given_as_scenario(const YamlNode& root, const std::string& path) {
  if (!root.child("model").is_missing()) return;
  const std::string file = std::filesystem::path(path).filename().string();
  if (!root.child("model_type").is_missing()) {
    root.child("model_type").fail("this is a Hugging Face config.json, not a scenario: write a scenario with 'model: " +
                                  file + "' and batch_size, seq_len, device (docs/scenario-format.md)");
  }
  if (!root.child("oomcast_graph").is_missing()) {
    root.child("oomcast_graph").fail("this is a graph file, not a scenario: write a scenario with 'model: " + file +
                                     "' and its sizes, precision and device (docs/graph-format.md)");
  }
}

}  // namespace oomcast::scenario
