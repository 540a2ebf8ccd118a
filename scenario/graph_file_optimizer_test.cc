// A graph file may carry the optimizer its model file builds (`optimizer:`, written by the
// capture): a scenario that names no optimizer uses it; one that names its own keeps it.
#include <catch2/catch.hpp>

#include "scenario/graph_file_test_support.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {

using testing::load_with_model;
using testing::mlp_graph_with;

TEST_CASE("a scenario without optimizer uses the one its graph file declares", "[planner][scenario]") {
  Scenario s = load_with_model(mlp_graph_with("optimizer: {type: sgd, momentum: 0.9}\n", "oomcast-opt-sgd.graph.yaml"));
  CHECK(s.optimizer.type == OptimizerType::Sgd);
  CHECK(s.optimizer.momentum == Approx(0.9));
  CHECK(s.optimizer.impl == OptimizerImpl::SingleTensor);  // the cpu device's default still applies
}

TEST_CASE("a scenario's own optimizer wins over its graph file's", "[planner][scenario]") {
  Scenario s = load_with_model(mlp_graph_with("optimizer: {type: sgd, momentum: 0.9}\n", "oomcast-opt-own.graph.yaml"),
                               "optimizer: adam\n");
  CHECK(s.optimizer.type == OptimizerType::Adam);
  CHECK(s.optimizer.momentum == 0.0);
}

TEST_CASE("a bad optimizer in a graph file is an error naming the graph file's line", "[planner][scenario]") {
  const std::string path = mlp_graph_with("optimizer: {type: sgdd}\n", "oomcast-opt-bad.graph.yaml");
  const std::string error = testing::error_of([&] { load_with_model(path); });
  CHECK(error.find("oomcast-opt-bad.graph.yaml:") != std::string::npos);
  CHECK(error.find("did you mean 'sgd'") != std::string::npos);
}

TEST_CASE("a graph file without optimizer leaves PyTorch's default AdamW", "[planner][scenario]") {
  Scenario s = load_with_model(mlp_graph_with("", "oomcast-opt-none.graph.yaml"));
  CHECK(s.optimizer.type == OptimizerType::AdamW);
}

}  // namespace oomcast::scenario
