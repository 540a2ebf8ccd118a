// A graph file records the torch release its capture ran under (`torch_version:`): a scenario
// that names none plans that release; one that names another plans its own, with a warning.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::planner {
namespace {

// tests/data/graphs/mlp.graph.yaml with `torch_yaml` appended, in the temp directory.
std::string mlp_graph_captured_under(const std::string& torch_yaml, const std::string& file_name) {
  std::ifstream in(std::string(OOMCAST_SOURCE_DIR) + "/tests/data/graphs/mlp.graph.yaml");
  std::stringstream text;
  text << in.rdbuf() << torch_yaml;
  const std::string path = (std::filesystem::temp_directory_path() / file_name).string();
  std::ofstream(path) << text.str();
  return path;
}

Scenario load_with_model(const std::string& graph_path, const std::string& extra = "") {
  return load_scenario_text("model: " + graph_path + "\nbatch_size: 8\ndevice: cpu\n" + extra, "s.yaml");
}

bool warns_of_release(const Scenario& s) {
  for (const std::string& warning : s.model.warnings) {
    if (warning.find("was captured under torch 2.13 but the scenario plans torch 2.6") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a scenario naming no torch release plans the one its graph file was captured under",
          "[planner][scenario][torch_version]") {
  Scenario s = load_with_model(mlp_graph_captured_under("torch_version: \"2.13\"\n", "oomcast-torch-213.graph.yaml"));
  CHECK(s.allocator.torch_version == 213);
  CHECK_FALSE(warns_of_release(s));
}

TEST_CASE("a scenario naming another torch release than its graph file's is planned as asked, with a warning",
          "[planner][scenario][torch_version]") {
  Scenario s = load_with_model(mlp_graph_captured_under("torch_version: \"2.13\"\n", "oomcast-torch-213-26.graph.yaml"),
                               "allocator: {torch_version: \"2.6\"}\n");
  CHECK(s.allocator.torch_version == 206);
  CHECK(warns_of_release(s));
}

TEST_CASE("a graph file's torch_version that is not a release is an error naming the key",
          "[planner][scenario][torch_version]") {
  const std::string path = mlp_graph_captured_under("torch_version: two\n", "oomcast-torch-bad.graph.yaml");
  const std::string error = testing::error_of([&] { load_with_model(path); });
  CHECK(error.find("oomcast-torch-bad.graph.yaml:") != std::string::npos);
  CHECK(error.find("torch_version") != std::string::npos);
}

}  // namespace oomcast::planner
