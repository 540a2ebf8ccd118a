// Tests that a tensor an op's grad node saves counts as a read of that op (op_reads.h): the
// execution order, the forward's release points and the plan keep it alive until the op has
// saved it, even when no op takes it as an input (an in-place op's saved copy of the value
// it overwrites, as in the captured MoE routers of Mixtral, Qwen3-MoE and DeepSeek-V3).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "planner/planner_test_support.h"
#include "scenario/scenario_loader.h"

using namespace oomcast::planner;
using oomcast::scenario::Scenario;
using oomcast::scenario::load_scenario_text;

namespace {

// A graph file whose `div_` divides its input in place and saves `saved_copy`, a copy of the
// input that nothing reads: the router of transformers' MoE models, as the capture writes it.
const char* kInPlaceSavesACopy = R"(oomcast_graph: 1
name: in_place_saves_a_copy
sizes: {seq_len: {default: 8}}
parameters:
  - {name: embedding.weight, shape: [16, 8]}
  - {name: head.weight, shape: [16, 8]}
inputs:
  - {name: inputs.input_ids, shape: [batch_size, seq_len], dtype: int64}
forward:
  - {op: embedding, name: embedding, indices: inputs.input_ids, weight: embedding.weight, out: hidden}
  - {op: generic, name: sum, aten: sum.dim_IntList, inputs: [hidden], outputs: [{name: total, shape: [batch_size, seq_len, 1]}], grads: [new]}
  - {op: copy, name: copy, x: hidden, out: saved_copy}
  - {op: generic, name: div_, aten: div_.Tensor, inputs: [hidden, total], outputs: [{name: divided, shape: [batch_size, seq_len, 8], view_of: hidden}], saves: [total, saved_copy], grads: [pass, new]}
  - {op: mul, name: square, a: divided, b: divided, out: squared}
  - {op: linear, name: head, x: squared, weight: head.weight, out: logits}
  - {op: generic, name: loss.view, aten: view, inputs: [logits], outputs: [{name: flat_logits, shape: ["batch_size*seq_len", 16], view_of: logits}], grads: [pass]}
  - {op: generic, name: loss.view_2, aten: view, inputs: [inputs.input_ids], outputs: [{name: flat_ids, shape: ["batch_size*seq_len"], view_of: inputs.input_ids}], grads: [none]}
  - {op: cross_entropy, name: loss.cross_entropy, logits: flat_logits, targets: flat_ids, out: loss}
outputs: {loss: loss, logits: logits}
)";

Scenario in_place_saves_a_copy_scenario() {
  const std::string path = (std::filesystem::temp_directory_path() / "in_place_saves_a_copy.graph.yaml").string();
  std::ofstream(path) << kInPlaceSavesACopy;
  return load_scenario_text("model: " + path + "\nbatch_size: 3\nseq_len: 8\niterations: 2\ndevice: cpu\n", "s.yaml");
}

// Index of the first event of `kind` on the slot named `slot_name` at or after `from`.
size_t event_of(const PlannedTrace& planned, oomcast::sim::EventKind kind, const std::string& slot_name, size_t from = 0) {
  for (size_t i = from; i < planned.trace.events.size(); ++i) {
    const oomcast::sim::Event& event = planned.trace.events[i];
    if (event.kind == kind && planned.trace.slot_names[event.slot].find(slot_name) != std::string::npos) return i;
  }
  return SIZE_MAX;
}

size_t mark_of(const PlannedTrace& planned, const std::string& label) {
  for (size_t i = 0; i < planned.trace.events.size(); ++i) {
    const oomcast::sim::Event& event = planned.trace.events[i];
    if (event.kind == oomcast::sim::EventKind::Mark && planned.trace.strings[event.tag] == label) return i;
  }
  return SIZE_MAX;
}

}  // namespace

TEST_CASE("a tensor that only a later op's grad node saves is a read of that op", "[planner][saved_reads]") {
  LayerGraph graph = build_training_graph(in_place_saves_a_copy_scenario());
  ExecutionOrder order = compute_execution_order(graph);
  size_t copy_op = SIZE_MAX, divide_op = SIZE_MAX;
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    if (graph.names[graph.ops[op].name] == "copy") copy_op = op;
    if (graph.names[graph.ops[op].name] == "div_") divide_op = op;
  }
  REQUIRE(copy_op != SIZE_MAX);
  REQUIRE(divide_op != SIZE_MAX);
  TensorId saved_copy = graph.ops[copy_op].outputs[0];
  CHECK(order.last_use[saved_copy] == order.position[divide_op]);
}

TEST_CASE("a copy that only an in-place op saves lives from its op into the backward", "[planner][saved_reads]") {
  PlannedTrace planned = plan_steps(in_place_saves_a_copy_scenario());
  REQUIRE(testing::check_schedule(planned).ok);
  size_t allocated = event_of(planned, oomcast::sim::EventKind::Alloc, "/copy");
  REQUIRE(allocated != SIZE_MAX);
  size_t backward = mark_of(planned, "iter0/backward");
  REQUIRE(backward != SIZE_MAX);
  size_t freed = event_of(planned, oomcast::sim::EventKind::Free, "/copy", allocated);
  REQUIRE(freed != SIZE_MAX);
  CHECK(allocated < backward);
  CHECK(freed > backward);  // div_'s grad node frees it once its backward has run
}
