// Tests of the autocast lists per device: on the CPU softmax, log_softmax and layer_norm stay in
// bf16 (issue 26, item 4: +16% on a bf16 CPU training step under CUDA's lists), cross-entropy
// runs in fp32 on both devices, and the CPU lists agree with the table the probe measured
// (validate/op_facts/torch-2.13-cpu.tsv, written by validate/op_probe.py --table).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "base/input_error.h"
#include "planner/autocast_lists.h"
#include "planner/ops/op_catalogue.h"

using namespace oomcast::planner;
using oomcast::scenario::OpKind;
using oomcast::scenario::Precision;

namespace {

BuildContext amp_bf16_context(bool cpu) {
  BuildContext context;
  context.precision = precision_rules(Precision::AmpBf16);
  context.precision.autocast_device = cpu ? AutocastDevice::Cpu : AutocastDevice::Cuda;
  context.precision.torch_version = 213;
  context.cpu_kernels = cpu;
  context.torch_version = 213;
  return context;
}

}  // namespace

TEST_CASE("CPU autocast keeps a bf16 softmax and layer_norm in bf16, with no fp32 copy", "[planner][autocast]") {
  GraphBuilder g(amp_bf16_context(/*cpu=*/true));
  TensorId scores = g.input("scores", 2 * 2 * 32 * 32, DType::BFloat16);
  TensorId probabilities = ops::softmax(g, "softmax", scores);
  CHECK(g.tensor(probabilities).dtype == DType::BFloat16);
  TensorId weight = g.parameter("ln.weight", {64});
  TensorId bias = g.parameter("ln.bias", {64});
  TensorId hidden = g.input("hidden", 2 * 16 * 64, DType::BFloat16);
  TensorId normed = ops::layer_norm(g, "ln", hidden, weight, bias, 64);
  CHECK(g.tensor(normed).dtype == DType::BFloat16);
  LayerGraph graph = g.finish();
  for (const OpNode& op : graph.ops) CHECK(op.kind != OpKind::Cast);
}

TEST_CASE("CUDA autocast runs a bf16 softmax and layer_norm in fp32", "[planner][autocast]") {
  GraphBuilder g(amp_bf16_context(/*cpu=*/false));
  TensorId scores = g.input("scores", 2 * 2 * 32 * 32, DType::BFloat16);
  CHECK(g.tensor(ops::softmax(g, "softmax", scores)).dtype == DType::Float32);
  TensorId weight = g.parameter("ln.weight", {64});
  TensorId bias = g.parameter("ln.bias", {64});
  TensorId hidden = g.input("hidden", 2 * 16 * 64, DType::BFloat16);
  CHECK(g.tensor(ops::layer_norm(g, "ln", hidden, weight, bias, 64)).dtype == DType::Float32);
}

TEST_CASE("cross-entropy on bf16 logits computes fp32 log-probabilities under autocast on both devices",
          "[planner][autocast]") {
  for (bool cpu : {true, false}) {
    INFO((cpu ? "cpu" : "cuda"));
    GraphBuilder g(amp_bf16_context(cpu));
    TensorId logits = g.input("logits", 32 * 96, DType::BFloat16);
    TensorId targets = g.input("targets", 32, DType::Int64);
    ops::cross_entropy(g, "loss", logits, targets, 96);
    LayerGraph graph = g.finish();
    bool found = false;
    for (const OpNode& op : graph.ops) {
      if (op.kind != OpKind::LogSoftmax) continue;
      found = true;
      CHECK(graph.tensors[op.outputs[0]].dtype == DType::Float32);
    }
    CHECK(found);
  }
}

TEST_CASE("conv_transpose is fp32 under CPU autocast before torch 2.0 and lower from 2.0", "[planner][autocast]") {
  CHECK(autocast_class("conv_transpose2d", AutocastDevice::Cpu, 113) == AutocastClass::Fp32);
  CHECK(autocast_class("conv_transpose2d", AutocastDevice::Cpu, 213) == AutocastClass::Lower);
  CHECK(autocast_class("conv_transpose2d", AutocastDevice::Cuda, 213) == AutocastClass::Lower);
}

TEST_CASE("the CPU autocast lists agree with the classes the probe measured under torch 2.13", "[planner][autocast]") {
  const std::string path = std::string(OOMCAST_SOURCE_DIR) + "/validate/op_facts/torch-2.13-cpu.tsv";
  std::ifstream in(path);
  REQUIRE(in);
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, op, measured;
    if (!(fields >> kind >> op >> measured) || kind != "autocast") continue;
    INFO(op);
    CHECK(autocast_class_name(autocast_class(op, AutocastDevice::Cpu, 213)) == measured);
    ++rows;
  }
  CHECK(rows >= 40);
}

TEST_CASE("a later row of the autocast table moves an op to another class for its releases", "[planner][autocast]") {
  const std::string table =
      "lists:\n"
      "  - {device: cpu, class: fp32, releases: \"1.0+\", source: test, ops: [conv_transpose2d, mse_loss]}\n"
      "  - {device: cpu, class: lower, releases: \"2.0+\", source: test, ops: [conv_transpose2d]}\n"
      "  - {device: cuda, class: lower, releases: \"1.0+\", source: test, ops: [mse_loss]}\n";
  AutocastTable before = parse_autocast_lists(table, "test.yaml", AutocastDevice::Cpu, 113);
  AutocastTable after = parse_autocast_lists(table, "test.yaml", AutocastDevice::Cpu, 213);
  CHECK(autocast_class(before, "conv_transpose2d") == AutocastClass::Fp32);
  CHECK(autocast_class(after, "conv_transpose2d") == AutocastClass::Lower);
  CHECK(autocast_class(after, "mse_loss") == AutocastClass::Fp32);
  CHECK(autocast_class(after, "softmax") == AutocastClass::None);
  AutocastTable cuda = parse_autocast_lists(table, "test.yaml", AutocastDevice::Cuda, 213);
  CHECK(autocast_class(cuda, "mse_loss") == AutocastClass::Lower);
}

TEST_CASE("an autocast table row without a source is refused with its file and line", "[planner][autocast]") {
  const std::string table =
      "lists:\n"
      "  - device: cpu\n"
      "    class: lower\n"
      "    releases: \"2.0+\"\n"
      "    ops: [mm]\n";
  try {
    parse_autocast_lists(table, "lists.yaml", AutocastDevice::Cpu, 213);
    FAIL("no error");
  } catch (const oomcast::InputError& error) {
    CHECK_THAT(error.what(), Catch::Contains("lists.yaml:2") && Catch::Contains("source"));
  }
}

TEST_CASE("an autocast table row with an unknown class is refused naming the key", "[planner][autocast]") {
  const std::string table = "lists:\n  - {device: cpu, class: half, releases: \"2.0+\", source: s, ops: [mm]}\n";
  CHECK_THROWS_WITH(parse_autocast_lists(table, "lists.yaml", AutocastDevice::Cpu, 213),
                    Catch::Contains("lists.yaml:2") && Catch::Contains("class"));
}
