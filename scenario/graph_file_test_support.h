// Helpers of the tests of what a graph file carries besides its layers (its optimizer, its torch
// release): the bundled mlp graph with keys appended, and a CPU scenario naming it.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "scenario/scenario_loader.h"

namespace oomcast::scenario::testing {

// tests/data/graphs/mlp.graph.yaml with `appended_yaml` appended, written to the temp directory.
inline std::string mlp_graph_with(const std::string& appended_yaml, const std::string& file_name) {
  std::ifstream in(std::string(OOMCAST_SOURCE_DIR) + "/tests/data/graphs/mlp.graph.yaml");
  std::stringstream text;
  text << in.rdbuf() << appended_yaml;
  const std::string path = (std::filesystem::temp_directory_path() / file_name).string();
  std::ofstream(path) << text.str();
  return path;
}

// A batch-8 CPU scenario whose model is the graph file at `graph_path`, plus `extra` YAML lines.
inline Scenario load_with_model(const std::string& graph_path, const std::string& extra = "") {
  return load_scenario_text("model: " + graph_path + "\nbatch_size: 8\ndevice: cpu\n" + extra, "s.yaml");
}

}  // namespace oomcast::scenario::testing
