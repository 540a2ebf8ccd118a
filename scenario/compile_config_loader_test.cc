// Tests of the scenario's `compile` key: what it reads, the torch releases and devices it needs,
// and that a compiled plan needs a graph file captured compiled with the same settings.
#include "scenario/compile_config_loader.h"

#include <catch2/catch.hpp>

#include "scenario/graph_file_test_support.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;
using testing::load_with_model;
using testing::mlp_graph_with;

const std::string kCompiled =
    "compiled: {mode: default, fullgraph: false, dynamic: \"false\", scope: [model, loss], "
    "activation_memory_budget: 0.5, graphs: 2, graph_breaks: 0}\n";

std::string compiled_graph(const std::string& file_name) { return mlp_graph_with(kCompiled, file_name); }

}  // namespace

TEST_CASE("compile with the settings the graph file was captured with is planned compiled", "[scenario][compile]") {
  Scenario s = load_with_model(compiled_graph("oomcast-compile-ok.graph.yaml"),
                               "compile: {scope: [loss, model], activation_memory_budget: 0.5}\n");
  CHECK(s.compile.enabled);
  CHECK(s.compile.has_scope(CompileScope::Loss));
  CHECK(s.compile.activation_memory_budget == 0.5);
  CHECK(s.compile.graphs == 2);
}

TEST_CASE("a scenario whose compile settings differ from the capture's is refused at the differing key",
          "[scenario][compile]") {
  const std::string error = error_of([&] {
    load_with_model(compiled_graph("oomcast-compile-budget.graph.yaml"),
                    "compile: {scope: [model, loss], activation_memory_budget: 0.8}\n");
  });
  CHECK(error.find("compile.activation_memory_budget") != std::string::npos);
  CHECK(error.find("--compile") != std::string::npos);
}

TEST_CASE("a graph file captured compiled for the gpu is refused on the cpu, naming the capture option",
          "[scenario][compile]") {
  const std::string for_cuda =
      "compiled: {mode: default, scope: [model], graphs: 1, graph_breaks: 0, for_device: cuda}\n";
  const std::string error = error_of(
      [&] { load_with_model(mlp_graph_with(for_cuda, "oomcast-compile-for-cuda.graph.yaml"), "compile: true\n"); });
  CHECK(error.find("for_device") != std::string::npos);
  CHECK(error.find("--for-device cpu") != std::string::npos);
}

TEST_CASE("a graph file captured compiled for the cpu plans on the cpu", "[scenario][compile]") {
  const std::string for_cpu = "compiled: {mode: default, scope: [model], graphs: 1, graph_breaks: 0, for_device: cpu}\n";
  Scenario s = load_with_model(mlp_graph_with(for_cpu, "oomcast-compile-for-cpu.graph.yaml"), "compile: true\n");
  CHECK(s.compile.for_device == "cpu");
}

TEST_CASE("compile on a graph file captured eager is refused with the command that captures it compiled",
          "[scenario][compile]") {
  const std::string error =
      error_of([&] { load_with_model(mlp_graph_with("", "oomcast-compile-eager.graph.yaml"), "compile: true\n"); });
  CHECK(error.find("captured eager") != std::string::npos);
  CHECK(error.find("oomcast_capture.py MODEL.py --compile") != std::string::npos);
}

TEST_CASE("compile=true set on a built-in family is refused by name, not as an unknown key", "[scenario][compile]") {
  const std::string error = error_of([&] {
    load_scenario_text("model: gpt2\nbatch_size: 2\nseq_len: 64\ndevice: a100-80gb\n", "s.yaml", {"compile=true"});
  });
  CHECK(error.find("unknown key") == std::string::npos);
  CHECK(error.find("built-in family") != std::string::npos);
}

TEST_CASE("a graph file captured compiled needs the scenario to say compile", "[scenario][compile]") {
  const std::string error = error_of([&] { load_with_model(compiled_graph("oomcast-compile-silent.graph.yaml")); });
  CHECK(error.find("was captured compiled") != std::string::npos);
}

TEST_CASE("compile options newer than the scenario's torch release are refused naming the option and release",
          "[scenario][compile]") {
  const std::string graph = compiled_graph("oomcast-compile-old.graph.yaml");
  const std::string budget = error_of([&] {
    load_with_model(graph, "allocator: {torch_version: \"2.3\"}\ncompile: {scope: [model, loss], activation_memory_budget: 0.5}\n");
  });
  CHECK(budget.find("activation_memory_budget") != std::string::npos);
  CHECK(budget.find("needs torch 2.4") != std::string::npos);
  const std::string old = error_of([&] { load_with_model(graph, "allocator: {torch_version: \"1.13\"}\ncompile: true\n"); });
  CHECK(old.find("torch.compile needs torch 2.0") != std::string::npos);
}

TEST_CASE("cudagraph compile modes are refused on the cpu", "[scenario][compile]") {
  const std::string error = error_of([&] {
    load_with_model(compiled_graph("oomcast-compile-ro.graph.yaml"), "compile: {mode: reduce-overhead}\n");
  });
  CHECK(error.find("compile.mode") != std::string::npos);
  CHECK(error.find("CUDA graphs") != std::string::npos);
}

TEST_CASE("unknown compile keys and scopes are errors naming them", "[scenario][compile]") {
  const std::string graph = compiled_graph("oomcast-compile-keys.graph.yaml");
  CHECK(error_of([&] { load_with_model(graph, "compile: {backend: eager}\n"); }).find("backend") != std::string::npos);
  CHECK(error_of([&] { load_with_model(graph, "compile: {scope: [layers]}\n"); }).find("unknown compile scope 'layers'") !=
        std::string::npos);
  CHECK(error_of([&] { load_with_model(graph, "compile: {scope: [model, blocks]}\n"); }).find("exclude each other") !=
        std::string::npos);
}

TEST_CASE("compile scope optimizer marks an adamw step as compiled", "[scenario][compile]") {
  const std::string captured = "compiled: {mode: default, scope: [model, optimizer], graphs: 1, graph_breaks: 0}\n";
  Scenario s = load_with_model(mlp_graph_with(captured, "oomcast-compile-optimizer.graph.yaml"),
                               "optimizer: adamw\ncompile: {scope: [model, optimizer]}\n");
  CHECK(s.compile.has_scope(CompileScope::Optimizer));
  CHECK(s.optimizer.compiled_step);
}

TEST_CASE("compile scope optimizer is refused for an optimizer whose compiled step was not measured",
          "[scenario][compile]") {
  const std::string captured = "compiled: {mode: default, scope: [model, optimizer], graphs: 1, graph_breaks: 0}\n";
  const std::string graph = mlp_graph_with(captured, "oomcast-compile-optimizer-adafactor.graph.yaml");
  const std::string error =
      error_of([&] { load_with_model(graph, "optimizer: adafactor\ncompile: {scope: [model, optimizer]}\n"); });
  CHECK(error.find("compile scope 'optimizer'") != std::string::npos);
  CHECK(error.find("not measured") != std::string::npos);
}

TEST_CASE("a compiled model without compile scope optimizer keeps an eager optimizer step", "[scenario][compile]") {
  Scenario s = load_with_model(compiled_graph("oomcast-compile-eager-step.graph.yaml"),
                               "compile: {scope: [model, loss], activation_memory_budget: 0.5}\n");
  CHECK_FALSE(s.optimizer.compiled_step);
}

TEST_CASE("compile: false is eager, as is no compile key", "[scenario][compile]") {
  Scenario s = load_with_model(mlp_graph_with("", "oomcast-compile-false.graph.yaml"), "compile: false\n");
  CHECK_FALSE(s.compile.enabled);
}

}  // namespace oomcast::scenario
