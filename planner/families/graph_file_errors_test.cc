// Bad graph files: each error names the file, the line and the op (unknown op, a tensor used
// before it is produced, a cycle, a shape mismatch on a catalogue op, a symbol that is not a
// scenario size, sizes out of bounds), and a repeat keeps an 80-block model's file small.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "planner/families/families.h"
#include "planner/model_setup.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::CheckpointMode;
using oomcast::scenario::Scenario;
using oomcast::scenario::resolve_model;
using oomcast::scenario::testing::error_of;

namespace {

// Writes `text` to a graph file of its own in the temp directory and returns the path.
std::string graph_file(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / ("oomcast-graph-test-" + name + ".yaml")).string();
  std::ofstream(path) << text;
  return path;
}

const char* kHeader =
    "oomcast_graph: 1\n"                                               // 1
    "dims: {hidden: 8}\n"                                              // 2
    "parameters:\n"                                                    // 3
    "  - {name: fc.weight, shape: [4, hidden]}\n"                      // 4
    "inputs:\n"                                                        // 5
    "  - {name: x, shape: [batch_size, hidden], dtype: param}\n"       // 6
    "  - {name: y, shape: [batch_size], dtype: int64}\n"               // 7
    "forward:\n";                                                      // 8

const char* kTail = "outputs: {loss: loss}\n";

std::string plan_error(const std::string& name, const std::string& forward) {
  std::string path = graph_file(name, std::string(kHeader) + forward + kTail);
  return error_of([&] {
    Scenario scenario = oomcast::scenario::testing::cpu_scenario("mlp", 2, 1);
    scenario.model = resolve_model(path, "");
    plan_steps(scenario);
  });
}

Scenario scenario_for(const std::string& path) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("mlp", 2, 1);
  scenario.model = resolve_model(path, "");
  return scenario;
}

}  // namespace

TEST_CASE("a graph file that plans correctly is the baseline of the error tests", "[graph_file]") {
  std::string error = plan_error("ok",
                                 "  - {op: linear, name: fc, x: x, weight: fc.weight, out: logits}\n"
                                 "  - {op: cross_entropy, logits: logits, targets: y, out: loss}\n");
  CHECK(error == "no error");
}

TEST_CASE("an unknown op names the file, line and op with a did-you-mean", "[graph_file]") {
  std::string error = plan_error("unknown-op",
                                 "  - {op: linear, name: fc, x: x, weight: fc.weight, out: logits}\n"
                                 "  - {op: cross_entropyy, logits: logits, targets: y, out: loss}\n");
  CHECK_THAT(error, Catch::Contains("oomcast-graph-test-unknown-op.yaml:10:"));
  CHECK_THAT(error, Catch::Contains("unknown op 'cross_entropyy'"));
  CHECK_THAT(error, Catch::Contains("did you mean 'cross_entropy'"));
}

TEST_CASE("a tensor used before it is produced names the op and the line", "[graph_file]") {
  std::string error = plan_error("unbound",
                                 "  - {op: linear, name: fc, x: h, weight: fc.weight, out: logits}\n"
                                 "  - {op: cross_entropy, logits: logits, targets: y, out: loss}\n");
  CHECK_THAT(error, Catch::Contains("oomcast-graph-test-unbound.yaml:9:"));
  CHECK_THAT(error, Catch::Contains("op 'fc' (linear): tensor 'h' is used before it is produced"));
}

TEST_CASE("ops that feed each other in a cycle are reported as out of order or a cycle", "[graph_file]") {
  std::string error = plan_error("cycle",
                                 "  - {op: add, name: first, a: x, b: b, out: a}\n"
                                 "  - {op: add, name: second, a: a, b: x, out: b}\n"
                                 "  - {op: linear, name: fc, x: b, weight: fc.weight, out: logits}\n"
                                 "  - {op: cross_entropy, logits: logits, targets: y, out: loss}\n");
  CHECK_THAT(error, Catch::Contains(":9:"));
  CHECK_THAT(error, Catch::Contains("op 'first' (add): tensor 'b' is used before it is produced"));
  CHECK_THAT(error, Catch::Contains("produced later, at line 10 by op 'second'"));
  CHECK_THAT(error, Catch::Contains("form a cycle"));
}

TEST_CASE("a shape mismatch on a catalogue op names both shapes", "[graph_file]") {
  std::string error = plan_error("mismatch",
                                 "  - {op: view, name: flat, x: x, shape: [batch_size*2, hidden/2], out: h}\n"
                                 "  - {op: linear, name: fc, x: h, weight: fc.weight, out: logits}\n"
                                 "  - {op: cross_entropy, logits: logits, targets: y, out: loss}\n");
  CHECK_THAT(error, Catch::Contains("oomcast-graph-test-mismatch.yaml:10:"));
  CHECK_THAT(error, Catch::Contains("op 'fc' (linear): shape mismatch: x [4, 4] has 4 features, weight [4, 8] expects 8"));
}

TEST_CASE("a stated output shape that differs from the op's is a shape mismatch", "[graph_file]") {
  std::string error = plan_error("stated",
                                 "  - {op: linear, name: fc, x: x, weight: fc.weight, out: logits, shape: [batch_size, 5]}\n"
                                 "  - {op: cross_entropy, logits: logits, targets: y, out: loss}\n");
  CHECK_THAT(error, Catch::Contains(":9:"));
  CHECK_THAT(error, Catch::Contains("'logits' is stated as [2, 5] but the op makes [2, 4]"));
}

TEST_CASE("a symbol that is not a scenario size is an error at its line", "[graph_file]") {
  std::string error = plan_error("symbol",
                                 "  - {op: view, name: flat, x: x, shape: [batch_size*seq, hidden], out: h}\n"
                                 "  - {op: linear, name: fc, x: h, weight: fc.weight, out: logits}\n"
                                 "  - {op: cross_entropy, logits: logits, targets: y, out: loss}\n");
  CHECK_THAT(error, Catch::Contains(":9:"));
  CHECK_THAT(error, Catch::Contains("op 'flat' (view): in expression 'batch_size*seq': 'seq' is not a scenario size (batch_size), a dim or a repeat index"));
}

TEST_CASE("seq_len in a graph that does not declare it says to declare it", "[graph_file]") {
  std::string error = plan_error("undeclared",
                                 "  - {op: view, name: flat, x: x, shape: [batch_size, seq_len], out: h}\n");
  CHECK_THAT(error, Catch::Contains("(declare it under sizes:)"));
}

TEST_CASE("a dimension beyond 2^40 and a repeat beyond 100000 are rejected", "[graph_file]") {
  CHECK_THAT(error_of([] {
               resolve_model(graph_file("big-dim", "oomcast_graph: 1\nparameters:\n  - {name: w, shape: [2199023255553]}\n"
                                                   "forward: []\noutputs: {loss: w}\n"),
                             "");
             }),
             Catch::Contains(":3:") && Catch::Contains("outside 0 .. 2^40"));
  CHECK_THAT(error_of([] {
               resolve_model(graph_file("big-repeat", "oomcast_graph: 1\nforward:\n  - repeat: 200000\n    body: []\n"
                                                      "outputs: {loss: w}\n"),
                             "");
             }),
             Catch::Contains(":3:") && Catch::Contains("repeat count 200000 is outside 1 .. 100000"));
}

TEST_CASE("repeats that multiply past what any schedule holds are refused at the repeat before a graph is built",
          "[graph_file][hostile]") {
  // 100000 x 100 op statements: ten million ops, more than 20 M events at three per op.
  std::string error = plan_error("nested-repeats",
                                 "  - repeat: 100000\n"                                                    // 9
                                 "    body:\n"
                                 "      - repeat: 100\n"
                                 "        body:\n"
                                 "          - {op: linear, name: fc, x: x, weight: fc.weight, out: h}\n");
  CHECK_THAT(error, Catch::Contains(":9:") && Catch::Contains("the forward runs at least 10000000 ops") &&
                        Catch::Contains("lower this repeat count"));
}

namespace {

// llama-tiny's graph (18 op statements and 9 parameters per layer) with `layers` layers.
Scenario llama_tiny_graph_with(int64_t layers) {
  std::ifstream source(std::string(OOMCAST_SOURCE_DIR) + "/tests/data/graphs/llama-tiny.graph.yaml");
  std::string text((std::istreambuf_iterator<char>(source)), std::istreambuf_iterator<char>());
  const std::string two_layers = "dims: {layers: 2,";
  REQUIRE(text.find(two_layers) != std::string::npos);
  text.replace(text.find(two_layers), two_layers.size(), "dims: {layers: " + std::to_string(layers) + ",");
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 1, 16);
  scenario.model = resolve_model(graph_file("llama-tiny-" + std::to_string(layers) + "-layers", text), "");
  return scenario;
}

int64_t least_ops(const Scenario& scenario) {
  return families::least_graph_file_work(scenario.model, scenario_build_context(scenario, 16, true, true)).ops;
}

}  // namespace

TEST_CASE("a graph file whose one training step is over the work limit is refused as too large a model, from its "
          "op statements before the graph is built", "[graph_file][hostile]") {
  // 100000 layers: fewer ops than a forward's limit, more events than one training step may hold.
  const Scenario scenario = llama_tiny_graph_with(100000);
  const int64_t ops = least_ops(scenario);
  REQUIRE(ops > 100000);
  CHECK_THAT(error_of([&] { plan_steps(scenario); }),
             Catch::Contains("one training step of the model's " + std::to_string(ops) + " ops") &&
                 Catch::Contains("the model is too large to plan"));
}

TEST_CASE("a graph file's training schedule over the work limit names the loop key, counted before the graph is built",
          "[graph_file][hostile]") {
  // 60000 layers: one step fits the limit, two iterations do not.
  Scenario scenario = llama_tiny_graph_with(60000);
  scenario.iterations = 2;
  const int64_t ops = least_ops(scenario);
  CHECK_THAT(error_of([&] { plan_steps(scenario); }),
             Catch::Contains("(iterations 2 x grad_accum_steps 1 over " + std::to_string(ops) + " ops)") &&
                 Catch::Contains("lower 'iterations'"));
}

TEST_CASE("a tensor over 2^48 elements is rejected where its shape is evaluated", "[graph_file]") {
  std::string error = plan_error("huge",
                                 "  - {op: constant, name: c, shape: [1048576, 1048576, 1048576], dtype: bool, out: c}\n");
  CHECK_THAT(error, Catch::Contains(":9:") && Catch::Contains("more than 2^48 elements"));
}

TEST_CASE("a loss that is not a scalar is an error", "[graph_file]") {
  std::string error = plan_error("loss-shape", "  - {op: linear, name: fc, x: x, weight: fc.weight, out: loss}\n");
  CHECK_THAT(error, Catch::Contains("the loss 'loss' has shape [2, 4]; it must be a scalar"));
}

TEST_CASE("a repeat of 80 blocks keeps the file small and plans every block", "[graph_file]") {
  std::string text =
      "oomcast_graph: 1\n"
      "dims: {layers: 80, hidden: 64}\n"
      "parameters:\n"
      "  - repeat: layers\n"
      "    index: i\n"
      "    body:\n"
      "      - {name: \"blocks.${i}.fc.weight\", shape: [hidden, hidden]}\n"
      "      - {name: \"blocks.${i}.fc.bias\", shape: [hidden]}\n"
      "  - {name: head.weight, shape: [10, hidden]}\n"
      "inputs:\n"
      "  - {name: x, shape: [batch_size, hidden], dtype: param}\n"
      "  - {name: y, shape: [batch_size], dtype: int64}\n"
      "forward:\n"
      "  - repeat: layers\n"
      "    index: i\n"
      "    body:\n"
      "      - module: \"blocks.${i}\"\n"
      "        checkpoint_unit: true\n"
      "        frame: [x]\n"
      "        body:\n"
      "          - {op: linear, name: fc, x: x, weight: \"blocks.${i}.fc.weight\", bias: \"blocks.${i}.fc.bias\", out: h}\n"
      "          - {op: gelu, name: act, x: h, out: h}\n"
      "          - {op: add, name: residual, a: x, b: h, out: x}\n"
      "  - {op: linear, name: head, x: x, weight: head.weight, out: logits}\n"
      "  - {op: cross_entropy, logits: logits, targets: y, out: loss}\n"
      "outputs: {loss: loss, logits: logits}\n";
  CHECK(text.size() < 1500);
  Scenario scenario = scenario_for(graph_file("repeat-80", text));
  scenario.checkpointing.mode = CheckpointMode::Full;
  PlannedTrace planned = plan_steps(scenario);
  CHECK(planned.parameter_count == 80 * (64 * 64 + 64) + 640);
  CHECK(testing::check_schedule(planned).ok);
  bool last_block_ran = false;
  for (const EventInfo& info : planned.info) last_block_ran = last_block_ran || planned.names[info.op] == "blocks.79.fc";
  CHECK(last_block_ran);
}
