// A captured graph's generic ops planned under another torch than the capture's, and under
// autocast: what autograd saves follows the planned release (planner/torch_release_facts.yaml),
// and autocast's weight cache takes a parameter itself but not a view of it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "planner/jobs/training_job.h"
#include "scenario/scenario_loader.h"

using namespace oomcast::planner;
using oomcast::scenario::Scenario;
using oomcast::scenario::load_scenario_text;

namespace {

// An RMSNorm-like mean of squares as a generic `mean.dim`, captured under `release` (which saves
// the input under 1.x only, so a 1.13 capture writes `saves: [squared]`).
std::string mean_graph(const std::string& release, bool saves_input) {
  return R"(oomcast_graph: 1
name: mean_saves
torch_version: ")" + release + R"("
sizes: {seq_len: {default: 8}}
parameters:
  - {name: embed.weight, shape: [16, 8]}
  - {name: head.weight, shape: [16, 8]}
inputs:
  - {name: ids, shape: [batch_size, seq_len], dtype: int64}
  - {name: target, shape: [batch_size, seq_len], dtype: int64}
forward:
  - {op: embedding, name: embed, indices: ids, weight: embed.weight, out: x}
  - {op: mul, name: square, a: x, b: x, out: squared}
  - {op: generic, name: mean, aten: mean.dim, inputs: [squared], outputs: [{name: m, shape: [batch_size, seq_len, 1]}], )" +
         std::string(saves_input ? "saves: [squared], " : "") + R"(grads: [new]}
  - {op: mul, name: scaled, a: x, b: m, out: y}
  - {op: linear, name: head, x: y, weight: head.weight, out: logits}
  - {op: generic, name: flat, aten: view, inputs: [logits], outputs: [{name: flat_logits, shape: ["batch_size*seq_len", 16], view_of: logits}], grads: [pass]}
  - {op: generic, name: flat_t, aten: view, inputs: [target], outputs: [{name: flat_target, shape: ["batch_size*seq_len"], view_of: target}], grads: [none]}
  - {op: cross_entropy, name: loss, logits: flat_logits, targets: flat_target, out: loss}
outputs: {loss: loss, logits: logits}
)";
}

LayerGraph plan_graph(const std::string& text, const std::string& file, const std::string& settings) {
  const std::string path = (std::filesystem::temp_directory_path() / file).string();
  std::ofstream(path) << text;
  return build_training_graph(
      load_scenario_text("model: " + path + "\nbatch_size: 2\nseq_len: 8\niterations: 1\ndevice: cpu\n" + settings, "s.yaml"));
}

const OpNode& op_named(const LayerGraph& graph, const std::string& name) {
  auto found = std::find_if(graph.ops.begin(), graph.ops.end(), [&](const OpNode& op) { return graph.names[op.name] == name; });
  REQUIRE(found != graph.ops.end());
  return *found;
}

bool saves_its_input(const LayerGraph& graph, const std::string& name) {
  const OpNode& op = op_named(graph, name);
  return std::find(op.saved.begin(), op.saved.end(), op.inputs.front()) != op.saved.end();
}

}  // namespace

TEST_CASE("a mean captured under torch 2.13 and planned for 1.13 saves its input as 1.13's MeanBackward1 does",
          "[graph_file][torch_release]") {
  const std::string text = mean_graph("2.13", false);
  CHECK_FALSE(saves_its_input(plan_graph(text, "mean_213.graph.yaml", ""), "mean"));
  CHECK(saves_its_input(plan_graph(text, "mean_213.graph.yaml", "allocator: {torch_version: \"1.13\"}\n"), "mean"));
}

TEST_CASE("a mean captured under torch 1.13 and planned for 2.13 no longer saves its input", "[graph_file][torch_release]") {
  const std::string text = mean_graph("1.13", true);
  CHECK(saves_its_input(plan_graph(text, "mean_113.graph.yaml", ""), "mean"));
  CHECK_FALSE(saves_its_input(plan_graph(text, "mean_113.graph.yaml", "allocator: {torch_version: \"2.13\"}\n"), "mean"));
}

TEST_CASE("autocast caches a parameter's low-precision copy but casts a view of a parameter at every call",
          "[graph_file][autocast]") {
  // torch 2.13 autocast_mode.cpp cached_cast: the cache takes a leaf that requires grad and is
  // not a view, so `x @ self.W.T` and einsum's reshaped weight are cast per call (measured on the
  // CPU: under no_grad the view's bf16 copy dies with the op, the parameter's stays cached).
  const std::string text = R"(oomcast_graph: 1
name: autocast_views
sizes: {seq_len: {default: 8}}
parameters:
  - {name: embed.weight, shape: [16, 8]}
  - {name: W, shape: [8, 8]}
  - {name: E, shape: [8, 16]}
inputs:
  - {name: ids, shape: [batch_size, seq_len], dtype: int64}
  - {name: target, shape: [batch_size, seq_len], dtype: int64}
forward:
  - {op: embedding, name: embed, indices: ids, weight: embed.weight, out: x}
  - {op: generic, name: x2, aten: view, inputs: [x], outputs: [{name: x2, shape: ["batch_size*seq_len", 8], view_of: x}], grads: [pass]}
  - {op: generic, name: wt, aten: permute, inputs: [W], outputs: [{name: wt, shape: [8, 8], view_of: W}], grads: [pass]}
  - {op: generic, name: through_view, aten: mm, inputs: [x2, wt], outputs: [{name: h, shape: ["batch_size*seq_len", 8]}], saves: [x2, wt], grads: [new, new]}
  - {op: generic, name: direct, aten: mm, inputs: [h, E], outputs: [{name: flat_logits, shape: ["batch_size*seq_len", 16]}], saves: [h, E], grads: [new, new]}
  - {op: generic, name: flat_t, aten: view, inputs: [target], outputs: [{name: flat_target, shape: ["batch_size*seq_len"], view_of: target}], grads: [none]}
  - {op: cross_entropy, name: loss, logits: flat_logits, targets: flat_target, out: loss}
outputs: {loss: loss}
)";
  LayerGraph graph = plan_graph(text, "autocast_views.graph.yaml", "precision: amp_bf16\n");
  const OpNode& through_view = op_named(graph, "through_view");
  const OpNode& direct = op_named(graph, "direct");
  CHECK(graph.tensors[through_view.inputs[1]].role == TensorRole::Activation);
  CHECK(graph.tensors[through_view.inputs[1]].dtype == DType::BFloat16);
  CHECK(graph.tensors[direct.inputs[1]].role == TensorRole::AutocastWeight);
}
