// Graph files plan through the same code path as the presets: the hand-written gpt2-tiny and mlp
// graph files (tests/data/graphs/) give the presets' schedules event for event, across
// precisions, attention backends, checkpointing, dropout, eval and gradient accumulation.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "planner/families/families.h"
#include "planner/families/graph_file_export.h"
#include "planner/planner_test_support.h"
#include "sim/trace_io.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::CheckpointMode;
using oomcast::scenario::OptimizerType;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::resolve_model;

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
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("gpt2-tiny", 2, 64);
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
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("mlp", 8, 1);
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
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  SECTION("fp32, SDPA math, CPU") {}
  SECTION("amp_bf16, eager attention, dropout, torch 1.13 formulas") {
    scenario.precision = Precision::AmpBf16;
    scenario.attention = AttentionImpl::Eager;
    scenario.dropout = 0.1;
    scenario.allocator.torch_version = 113;
  }
  // Memory-efficient, not flash: under flash the preset follows transformers 5.24's enable_gqa
  // (no repeat_kv copies) while this graph file, written with repeat_kv, keeps them.
  SECTION("pure_bf16 on a GPU, memory-efficient attention, selective checkpointing of rms-norm pieces") {
    scenario.precision = Precision::PureBf16;
    scenario.attention = AttentionImpl::MemEfficient;
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

namespace {

// Builds `scenario`'s training graph as plan_steps does, exports it as generic ops only, and
// plans the export: the events (kind, slot, size, in order) must be the preset's.
void require_export_plans_like_preset(const Scenario& scenario) {
  BuildContext context;
  context.precision = precision_rules(scenario.precision);
  context.attention = scenario.attention;
  context.dropout = scenario.dropout;
  context.batch = scenario.batch_size;
  context.seq_len = scenario.seq_len;
  context.cpu_kernels = scenario.device.is_cpu;
  context.torch_version = scenario.allocator.torch_version;
  GraphBuilder builder(context);
  families::build_forward(builder, scenario.model);
  LayerGraph graph = builder.finish();
  std::string path = (std::filesystem::temp_directory_path() / ("oomcast-export-" + scenario.model.name + ".yaml")).string();
  std::ofstream(path) << families::export_graph_file(graph, scenario.model.name + "-export");

  PlannedTrace expected = plan_steps(scenario);
  PlannedTrace actual = plan_steps(with_model(scenario, path));
  CHECK(actual.parameter_count == expected.parameter_count);
  REQUIRE(actual.trace.events.size() == expected.trace.events.size());
  size_t differing = 0;
  for (size_t i = 0; i < expected.trace.events.size(); ++i) {
    const auto& a = actual.trace.events[i];
    const auto& e = expected.trace.events[i];
    if (a.kind != e.kind || a.slot != e.slot || a.bytes != e.bytes) ++differing;
  }
  CHECK(differing == 0);
}

}  // namespace

TEST_CASE("a family exported as generic ops plans to the preset's events", "[graph_file]") {
  std::string preset = GENERATE(as<std::string>{}, "gpt2-tiny", "llama-tiny", "mlp");
  Scenario scenario = oomcast::scenario::testing::cpu_scenario(preset, 2, preset == "mlp" ? 1 : 32);
  SECTION("fp32, dropout, CPU") { scenario.dropout = 0.1; }
  SECTION("fp32, full checkpointing, GPU") {
    scenario.checkpointing.mode = CheckpointMode::Full;
    scenario.device.is_cpu = false;
    scenario.device.cublas_workspace_bytes = 4 << 20;
    scenario.device.cublas_workspaces = 2;
  }
  SECTION("pure_bf16, selective checkpointing") {
    scenario.precision = Precision::PureBf16;
    scenario.checkpointing.mode = CheckpointMode::Selective;
    scenario.checkpointing.recompute_ops = {"gelu", "mul", "relu"};
  }
  require_export_plans_like_preset(scenario);
}

TEST_CASE("generic ops named by their aten ops follow autocast as the catalogue's ops do", "[graph_file]") {
  // Within an op the generic addmm casts its inputs in argument order (bias first), the
  // catalogue's linear x first: the same bytes live at every phase boundary and the same peak.
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("mlp", 8, 1);
  SECTION("fp32") {}
  SECTION("amp_bf16: matmuls in bf16 through the weight cache, log_softmax in fp32") {
    // On a GPU: CUDA's lists put _log_softmax itself in fp32. On the CPU the fp32 policy sits on
    // cross_entropy_loss (planner/autocast_lists.yaml), which this graph's inner _log_softmax and
    // nll_loss_forward do not name; a captured CPU graph carries autocast's cast explicitly.
    scenario.precision = Precision::AmpBf16;
    scenario.device.is_cpu = false;
  }
  SECTION("pure_bf16") { scenario.precision = Precision::PureBf16; }
  PlannedTrace expected_plan = plan_steps(scenario);
  PlannedTrace actual_plan = plan_steps(with_model(scenario, kGraphs + "mlp-generic.graph.yaml"));
  testing::ScheduleCheck expected = testing::check_schedule(expected_plan);
  testing::ScheduleCheck actual = testing::check_schedule(actual_plan);
  REQUIRE(actual.ok);
  CHECK(actual_plan.parameter_count == expected_plan.parameter_count);
  CHECK(actual.live_at_mark == expected.live_at_mark);
  CHECK(actual.peak_bytes == expected.peak_bytes);
  CHECK(actual_plan.trace.events.size() == expected_plan.trace.events.size());
}
