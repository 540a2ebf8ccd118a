// A graph file records the torch release its capture ran under (`torch_version:`): a scenario
// that names none plans that release; one that names another plans its own, with a warning.
#include <catch2/catch.hpp>

#include "scenario/graph_file_test_support.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::load_with_model;
using testing::mlp_graph_with;

bool warns_of_release(const Scenario& s) {
  for (const std::string& warning : s.model.warnings) {
    if (warning.find("was captured under torch 2.13 but the scenario plans torch 2.6") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a scenario naming no torch release plans the one its graph file was captured under",
          "[planner][scenario][torch_version]") {
  Scenario s = load_with_model(mlp_graph_with("torch_version: \"2.13\"\n", "oomcast-torch-213.graph.yaml"));
  CHECK(s.allocator.torch_version == 213);
  CHECK_FALSE(warns_of_release(s));
}

TEST_CASE("a scenario naming another torch release than its graph file's is planned as asked, with a warning",
          "[planner][scenario][torch_version]") {
  Scenario s = load_with_model(mlp_graph_with("torch_version: \"2.13\"\n", "oomcast-torch-213-26.graph.yaml"),
                               "allocator: {torch_version: \"2.6\"}\n");
  CHECK(s.allocator.torch_version == 206);
  CHECK(warns_of_release(s));
}

TEST_CASE("a graph file's torch_version that is not a release is an error naming the key",
          "[planner][scenario][torch_version]") {
  const std::string path = mlp_graph_with("torch_version: two\n", "oomcast-torch-bad.graph.yaml");
  const std::string error = testing::error_of([&] { load_with_model(path); });
  CHECK(error.find("oomcast-torch-bad.graph.yaml:") != std::string::npos);
  CHECK(error.find("torch_version") != std::string::npos);
}

}  // namespace oomcast::scenario
