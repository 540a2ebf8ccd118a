// Graph files plan through the same code path as the presets: the hand-written gpt2-tiny and mlp
// graph files (tests/data/graphs/) give the presets' schedules event for event, across
// precisions, attention backends, checkpointing, dropout, eval and gradient accumulation.
#include <catch2/catch.hpp>

#include <sstream>

#include "planner/planner_test_support.h"
#include "sim/trace_io.h"

using namespace oomcast::planner;

namespace {

const std::string kGraphs = std::string(OOMCAST_SOURCE_DIR) + "/tests/data/graphs/";

// The whole schedule as text: every event, and each event's phase, op, tensor and category.
std::string schedule_text(const PlannedTrace& planned) {
  std::ostringstream out;
  oomcast::sim::write_trace(out, planned.trace);
  for (const EventInfo& info : planned.info) {
    out << info.iteration << ' ' << planned.names[info.phase] << ' ' << planned.names[info.op] << ' '
        << planned.names[info.tensor] << ' ' << category_name(info.category) << '\n';
  }
  return out.str();
}

Scenario with_model(Scenario scenario, const std::string& reference) {
  scenario.model = resolve_model(reference, "");
  return scenario;
}

void require_same_schedule(const Scenario& preset, const std::string& graph_file) {
  PlannedTrace expected = plan_steps(preset);
  PlannedTrace actual = plan_steps(with_model(preset, kGraphs + graph_file));
  REQUIRE(testing::check_schedule(actual).ok);
  CHECK(actual.parameter_count == expected.parameter_count);
  REQUIRE(actual.trace.events.size() == expected.trace.events.size());
  CHECK(schedule_text(actual) == schedule_text(expected));
}

}  // namespace

TEST_CASE("the gpt2-tiny graph file plans to the preset's schedule event for event", "[graph_file]") {
  Scenario scenario = testing::cpu_scenario("gpt2-tiny", 2, 64);
  SECTION("fp32, SDPA math, CPU") {}
  SECTION("amp_bf16, eager attention with its mask buffers, dropout") {
    scenario.precision = Precision::AmpBf16;
    scenario.attention = AttentionImpl::Eager;
    scenario.dropout = 0.1;
  }
  SECTION("pure_bf16 on a GPU with flash attention and cuBLAS workspaces") {
    scenario.precision = Precision::PureBf16;
    scenario.attention = AttentionImpl::Flash;
    scenario.device.is_cpu = false;
    scenario.device.profile = "a100-80gb";
    scenario.device.cublas_workspace_bytes = 4 << 20;
    scenario.device.cublas_workspaces = 2;
  }
  SECTION("amp_fp16, memory-efficient attention, full checkpointing, grad accumulation") {
    scenario.precision = Precision::AmpFp16;
    scenario.attention = AttentionImpl::MemEfficient;
    scenario.checkpointing.mode = CheckpointMode::Full;
    scenario.grad_accum_steps = 2;
    scenario.device.is_cpu = false;
  }
  SECTION("selective checkpointing of attention and gelu, eval under grad mode") {
    scenario.checkpointing.mode = CheckpointMode::Selective;
    scenario.checkpointing.recompute_ops = {"attention", "gelu"};
    scenario.eval.enabled = true;
    scenario.eval.no_grad = false;
    scenario.loop.caller_held_outputs = {"loss", "logits"};
  }
  require_same_schedule(scenario, "gpt2-tiny.graph.yaml");
}

TEST_CASE("the mlp graph file plans to the preset's schedule event for event", "[graph_file]") {
  Scenario scenario = testing::cpu_scenario("mlp", 8, 1);
  SECTION("fp32 adamw") {}
  SECTION("amp_bf16 sgd with momentum, eval") {
    scenario.precision = Precision::AmpBf16;
    scenario.optimizer.type = OptimizerType::Sgd;
    scenario.optimizer.momentum = 0.9;
    scenario.eval.enabled = true;
  }
  require_same_schedule(scenario, "mlp.graph.yaml");
}

TEST_CASE("the llama-tiny graph file plans to the preset's schedule event for event", "[graph_file]") {
  Scenario scenario = testing::cpu_scenario("llama-tiny", 2, 32);
  SECTION("fp32, SDPA math, CPU") {}
  SECTION("amp_bf16, eager attention, dropout, torch 1.13 formulas") {
    scenario.precision = Precision::AmpBf16;
    scenario.attention = AttentionImpl::Eager;
    scenario.dropout = 0.1;
    scenario.allocator.torch_version = 113;
  }
  SECTION("pure_bf16 on a GPU, flash attention, selective checkpointing of rms-norm pieces") {
    scenario.precision = Precision::PureBf16;
    scenario.attention = AttentionImpl::Flash;
    scenario.device.is_cpu = false;
    scenario.checkpointing.mode = CheckpointMode::Selective;
    scenario.checkpointing.recompute_ops = {"mul", "pow", "silu"};
  }
  SECTION("amp_fp16, every-2nd block checkpointed, eval") {
    scenario.precision = Precision::AmpFp16;
    scenario.device.is_cpu = false;
    scenario.checkpointing.mode = CheckpointMode::EveryN;
    scenario.checkpointing.every_n = 2;
    scenario.eval.enabled = true;
  }
  require_same_schedule(scenario, "llama-tiny.graph.yaml");
}
