// Tests for what a model's constructor allocates and frees before it returns: the untied lm_head
// weight that weight tying replaces (gpt2, llama-style and Falcon families), a graph file's
// `construction_temporary` entries, and the loading modes and devices that do or do not build
// them (docs/scenario-format.md#loading, docs/graph-format.md#construction-temporaries).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "planner/families/families.h"
#include "planner/families/graph_file_export.h"
#include "planner/planner_test_support.h"
#include "planner/jobs/training_job.h"

using namespace oomcast::planner;
using oomcast::scenario::LoadMethod;
using oomcast::scenario::ModelConfig;
using oomcast::scenario::OptimizerType;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::WeightFormat;
using oomcast::scenario::resolve_model;
using oomcast::scenario::testing::inline_model;

namespace {

struct Setup {
  uint64_t peak = 0;        // highest live bytes before the first forward
  uint64_t built = 0;       // live bytes when the setup phase ends
  uint64_t temporaries = 0; // bytes of the slots named "*.construction"
};

Setup setup_of(const PlannedTrace& planned) {
  Setup setup;
  uint64_t live = 0;
  std::vector<uint64_t> bytes(planned.trace.slot_names.size(), 0);
  for (const oomcast::sim::Event& event : planned.trace.events) {
    if (event.kind == oomcast::sim::EventKind::Mark && planned.trace.strings[event.tag] != "setup") break;
    if (event.kind == oomcast::sim::EventKind::Alloc) {
      bytes[event.slot] = event.bytes;
      live += event.bytes;
      setup.peak = std::max(setup.peak, live);
      const std::string& name = planned.trace.slot_names[event.slot];
      if (name.size() > 13 && name.compare(name.size() - 13, 13, ".construction") == 0) setup.temporaries += event.bytes;
    } else if (event.kind == oomcast::sim::EventKind::Free) {
      live -= bytes[event.slot];
    }
  }
  setup.built = live;
  return setup;
}

Scenario job(ModelConfig model, bool cpu) {
  Scenario scenario;
  scenario.model = std::move(model);
  scenario.batch_size = 2;
  scenario.seq_len = 16;
  scenario.iterations = 1;
  scenario.optimizer.type = OptimizerType::Sgd;
  scenario.device.is_cpu = cpu;
  scenario.device.profile = cpu ? "cpu" : "h200";
  return scenario;
}

ModelConfig gpt2(bool tied) {
  return inline_model("gpt2", {{"layers", 2}, {"hidden", 64}, {"heads", 4}, {"vocab", 256}, {"max_positions", 32},
                               {"ffn_hidden", 256}},
                      {{"tied_embeddings", tied ? "true" : "false"}});
}

ModelConfig llama(bool tied) {
  return inline_model("llama", {{"layers", 2}, {"hidden", 64}, {"heads", 4}, {"kv_heads", 2}, {"ffn_hidden", 128},
                                {"vocab", 256}, {"max_positions", 32}},
                      {{"tied_embeddings", tied ? "true" : "false"}});
}

std::string graph_file(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / ("oomcast-construction-test-" + name + ".yaml")).string();
  std::ofstream(path) << text;
  return path;
}

const char* kGraphWithTemporary =
    "oomcast_graph: 1\n"
    "dims: {hidden: 8}\n"
    "parameters:\n"
    "  - {name: fc.weight, shape: [4, hidden]}\n"
    "  - {construction_temporary: template.weight, shape: [16, hidden]}\n"
    "  - {construction_temporary: init.indices, shape: [10], dtype: int64}\n"
    "inputs:\n"
    "  - {name: x, shape: [batch_size, hidden], dtype: param}\n"
    "  - {name: y, shape: [batch_size], dtype: int64}\n"
    "forward:\n"
    "  - {op: linear, name: fc, x: x, weight: fc.weight, out: logits}\n"
    "  - {op: cross_entropy, logits: logits, targets: y, out: loss}\n"
    "outputs: {loss: loss}\n";

}  // namespace

TEST_CASE("a tied GPT-2 built on the CPU holds the untied lm_head weight until its constructor returns",
          "[planner][construction]") {
  Setup setup = setup_of(plan_steps(job(gpt2(/*tied=*/true), /*cpu=*/true)));
  CHECK(setup.temporaries == 256u * 64u * 4u);
  CHECK(setup.peak - setup.built == 256u * 64u * 4u);
}

TEST_CASE("an untied GPT-2 builds no weight that tying replaces", "[planner][construction]") {
  Setup setup = setup_of(plan_steps(job(gpt2(/*tied=*/false), /*cpu=*/true)));
  CHECK(setup.temporaries == 0u);
  CHECK(setup.peak == setup.built);
}

TEST_CASE("a tied llama-style model's constructor allocates an lm_head weight the embedding replaces",
          "[planner][construction]") {
  CHECK(setup_of(plan_steps(job(llama(/*tied=*/true), /*cpu=*/true))).temporaries == 256u * 64u * 4u);
  CHECK(setup_of(plan_steps(job(llama(/*tied=*/false), /*cpu=*/true))).temporaries == 0u);
}

TEST_CASE("from_pretrained instantiates on the meta device and never builds the untied lm_head weight",
          "[planner][construction]") {
  Scenario scenario = job(gpt2(/*tied=*/true), /*cpu=*/true);
  scenario.job.loading.method = LoadMethod::FromPretrained;
  Setup setup = setup_of(plan_steps(scenario));
  CHECK(setup.temporaries == 0u);
  CHECK(setup.peak == setup.built);
}

TEST_CASE("a GPU job builds the tied model on the CPU, so the device never sees the untied weight",
          "[planner][construction]") {
  Setup setup = setup_of(plan_steps(job(gpt2(/*tied=*/true), /*cpu=*/false)));
  CHECK(setup.temporaries == 0u);
}

TEST_CASE("fp32_then_cast builds the untied lm_head weight in fp32 before the model is cast",
          "[planner][construction]") {
  Scenario scenario = job(gpt2(/*tied=*/true), /*cpu=*/true);
  scenario.precision = Precision::PureBf16;
  scenario.job.weights.format = WeightFormat::Bf16;
  scenario.job.loading.method = LoadMethod::BuiltThenCast;
  CHECK(setup_of(plan_steps(scenario)).temporaries == 256u * 64u * 4u);
  scenario.job.loading.method = LoadMethod::OnDevice;
  CHECK(setup_of(plan_steps(scenario)).temporaries == 256u * 64u * 2u);
}

TEST_CASE("a graph file's construction temporaries take the parameters' dtype unless one is written",
          "[planner][construction]") {
  Scenario scenario = job(resolve_model(graph_file("dtype", kGraphWithTemporary), ""), /*cpu=*/true);
  Setup setup = setup_of(plan_steps(scenario));
  CHECK(setup.temporaries == 16u * 8u * 4u + 10u * 8u);
  CHECK(setup.peak - setup.built == 16u * 8u * 4u + 10u * 8u);
  CHECK(plan_steps(scenario).parameter_count == 32u);  // a temporary is not a parameter
}

TEST_CASE("a construction temporary without a shape is an error naming the file and line", "[planner][construction]") {
  std::string path = graph_file("no-shape",
                                "oomcast_graph: 1\n"
                                "parameters:\n"
                                "  - {construction_temporary: template.weight, dtype: param}\n"
                                "inputs: []\nforward: []\noutputs: {loss: x}\n");
  std::string error = oomcast::scenario::testing::error_of([&] { resolve_model(path, ""); });
  CHECK(error.find(path + ":3") != std::string::npos);
  CHECK(error.find("construction temporary 'template.weight' needs a 'shape'") != std::string::npos);
}

TEST_CASE("an exported tied GPT-2 writes the untied lm_head weight and plans its setup like the preset",
          "[planner][construction]") {
  Scenario preset = job(gpt2(/*tied=*/true), /*cpu=*/true);
  std::string text = families::export_graph_file(build_training_graph(preset), "gpt2-tied", {"seq_len", 16, ""});
  CHECK(text.find("{construction_temporary: \"lm_head.weight\", shape: [16384], dtype: param}") != std::string::npos);
  Scenario exported = job(resolve_model(graph_file("export", text), ""), /*cpu=*/true);
  Setup expected = setup_of(plan_steps(preset));
  Setup actual = setup_of(plan_steps(exported));
  CHECK(actual.peak == expected.peak);
  CHECK(actual.temporaries == expected.temporaries);
}
