// Per-rank planning of tensor, sequence, pipeline, context and expert parallelism: the
// schedules' microbatch orders and in-flight counts, the layers per stage, the rank's split
// model (heads, KV heads, MLP, vocabulary), the buffers each dimension adds, which rank is
// planned, and Megatron-LM's theoretical per-GPU formulas (megatron/training/
// theoretical_memory_usage.py) as a cross-check under their stated assumptions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "planner/jobs/training_job.h"
#include "planner/parallel/mesh_rank.h"
#include "planner/parallel/rank_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::MeshConfig;
using oomcast::scenario::PipelineSchedule;
using oomcast::scenario::Scenario;

namespace {

MeshConfig pipeline(int64_t stages, int64_t microbatches, PipelineSchedule schedule, int64_t virtual_stages = 1) {
  MeshConfig mesh;
  mesh.pipeline_parallel = stages;
  mesh.pipeline_microbatches = microbatches;
  mesh.pipeline_schedule = schedule;
  mesh.pipeline_virtual_stages = virtual_stages;
  return mesh;
}

int64_t in_flight(const std::vector<PipelineStep>& steps) {
  int64_t live = 0;
  int64_t most = 0;
  for (const PipelineStep& step : steps) {
    live += step.forward ? 1 : -1;
    most = std::max(most, live);
  }
  return most;
}

// llama-tiny (hidden 64, 4 heads, 2 KV heads, vocab 256) with 4 layers and an MLP of 172: a
// mesh job on the CPU profile.
Scenario tiny_job(int64_t world) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  scenario.model.dims["layers"] = 4;
  scenario.model.dims["ffn_hidden"] = 172;
  scenario.parallel.world_size = world;
  scenario.parallel.gpus_per_node = world;
  return scenario;
}

// The planned rank's peak of live tensor bytes, as the mesh job measured it.
uint64_t planned_peak(const PlannedTrace& planned) {
  return planned.parallel.mesh_ranks.at(static_cast<size_t>(planned.parallel.planned_stage)).peak_allocated_bytes;
}

}  // namespace

TEST_CASE("1F1B's first stage holds one microbatch per stage and its last stage one", "[parallel][mesh][pipeline]") {
  const MeshConfig mesh = pipeline(4, 8, PipelineSchedule::OneForwardOneBackward);
  const std::vector<PipelineStep> first = pipeline_steps(mesh, 0);
  CHECK(in_flight(first) == 4);
  CHECK(in_flight(pipeline_steps(mesh, 3)) == 1);
  // Warm-up of min(microbatches, stages - stage) forwards, then one backward, one forward.
  REQUIRE(first.size() == 16);
  CHECK((first[3].forward && first[3].micro_batch == 3));
  CHECK((!first[4].forward && first[4].micro_batch == 0));
  CHECK((first[5].forward && first[5].micro_batch == 4));
}

TEST_CASE("GPipe holds every microbatch on every stage", "[parallel][mesh][pipeline]") {
  const MeshConfig mesh = pipeline(4, 6, PipelineSchedule::GPipe);
  CHECK(in_flight(pipeline_steps(mesh, 0)) == 6);
  CHECK(in_flight(pipeline_steps(mesh, 3)) == 6);
}

TEST_CASE("interleaved 1F1B holds Megatron's penalty of (stages - 1) / virtual stages more", "[parallel][mesh][pipeline]") {
  // Megatron-LM: stages x (1 + (stages - 1) / (stages x virtual)) = 4 + 3 / 2 -> 6 (rounded up).
  CHECK(in_flight(pipeline_steps(pipeline(4, 16, PipelineSchedule::Interleaved1F1B, 2), 0)) == 6);
  CHECK(in_flight(pipeline_steps(pipeline(4, 16, PipelineSchedule::ZeroBubble), 0)) == 4);
}

TEST_CASE("layers split evenly across stages with the remainder on the first, or as given", "[parallel][mesh][pipeline]") {
  CHECK(chunk_layers(pipeline(4, 4, PipelineSchedule::GPipe), 30) == std::vector<int64_t>{8, 8, 7, 7});
  MeshConfig given = pipeline(2, 2, PipelineSchedule::GPipe);
  given.layers_per_stage = {3, 1};
  CHECK(chunk_layers(given, 4) == std::vector<int64_t>{3, 1});
}

TEST_CASE("a TP rank holds the heads, KV heads, MLP width and vocabulary divided by TP, head size kept",
          "[parallel][mesh][tensor]") {
  Scenario scenario = tiny_job(2);
  scenario.parallel.mesh.tensor_parallel = 2;
  const MeshRank rank = mesh_rank(scenario, 0);
  const Scenario run = rank_scenario(scenario, rank);
  CHECK(run.model.dims.at("heads") == 2);
  CHECK(run.model.dims.at("kv_heads") == 1);
  CHECK(run.model.dims.at("ffn_hidden") == 86);
  CHECK(run.model.dims.at("vocab") == 128);
  CHECK(run.model.dims.at("head_dim") == 16);
  // Every weight matrix is halved; the 2 x 4 + 1 RMSNorm weights of 64 stay whole.
  const uint64_t full = build_training_graph(scenario).parameter_count();
  const uint64_t norms = (2 * 4 + 1) * 64;
  CHECK(build_training_graph(run).parameter_count() == (full - norms) / 2 + norms);
}

TEST_CASE("a row-parallel linear's all-reduce and a column-parallel input gradient's add one activation each",
          "[parallel][mesh][tensor]") {
  Scenario scenario = tiny_job(2);
  scenario.parallel.mesh.tensor_parallel = 2;
  const MeshRank rank = mesh_rank(scenario, 0);
  LayerGraph graph = build_training_graph(rank_scenario(scenario, rank));
  apply_mesh_to_graph(graph, rank);
  const uint64_t activation = 2 * 32 * 64 * 4;  // [batch, seq, hidden] fp32
  int row = 0;
  int column = 0;
  for (const OpNode& op : graph.ops) {
    for (const Transient& t : op.forward_transients) row += graph.names[t.name] == "tp.all_reduce" && t.bytes == activation;
    for (const Transient& t : op.backward_transients) {
      column += graph.names[t.name] == "tp.grad_all_reduce" && t.bytes == activation;
    }
  }
  CHECK(row == 4 * 2 + 1);     // o_proj and down_proj per layer, and the vocab-parallel embedding
  CHECK(column == 4 * 5);      // q, k, v, gate and up per layer
}

TEST_CASE("sequence parallel splits the norms' and residuals' activations, not the gathered block inputs",
          "[parallel][mesh][sequence]") {
  Scenario scenario = tiny_job(2);
  scenario.parallel.mesh.tensor_parallel = 2;
  Scenario with_sp = scenario;
  with_sp.parallel.mesh.sequence_parallel = true;
  const uint64_t without = planned_peak(plan_steps(scenario));
  const uint64_t with = planned_peak(plan_steps(with_sp));
  CHECK(with < without);
}

TEST_CASE("a pipeline plans every stage and the schedule returned is the busiest stage's", "[parallel][mesh][pipeline]") {
  Scenario scenario = tiny_job(2);
  scenario.parallel.mesh.pipeline_parallel = 2;
  scenario.parallel.mesh.pipeline_microbatches = 4;
  const PlannedTrace planned = plan_steps(scenario);
  const auto& ranks = planned.parallel.mesh_ranks;
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].in_flight_microbatches == 2);
  CHECK(ranks[1].in_flight_microbatches == 1);
  CHECK(ranks[0].layers == 2);
  const auto busiest = std::max_element(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) {
    return a.peak_allocated_bytes < b.peak_allocated_bytes;
  });
  CHECK(planned.parallel.planned_stage == busiest->stage);
}

TEST_CASE("a later stage receives hidden states instead of token ids and has no embedding", "[parallel][mesh][pipeline]") {
  Scenario scenario = tiny_job(2);
  scenario.parallel.mesh.pipeline_parallel = 2;
  scenario.parallel.mesh.pipeline_microbatches = 2;
  const MeshRank last = mesh_rank(scenario, 1);
  const LayerGraph graph = build_training_graph(rank_scenario(scenario, last));
  REQUIRE(graph.inputs.size() == 2);  // received hidden states and the labels
  CHECK(graph.names[graph.tensors[graph.inputs[0]].name].find("received_hidden_states") != std::string::npos);
  CHECK(graph.tensors[graph.inputs[0]].numel == 2 * 32 * 64);
  const MeshRank first = mesh_rank(scenario, 0);
  const LayerGraph head = build_training_graph(rank_scenario(scenario, first));
  CHECK(head.named_outputs.count("hidden_states") == 1);
  CHECK(head.named_outputs.count("logits") == 0);
}

TEST_CASE("context parallel plans the rank's sequence chunk with the gathered K/V beside it", "[parallel][mesh][context]") {
  Scenario scenario = tiny_job(2);
  scenario.attention = AttentionImpl::Flash;
  scenario.parallel.mesh.context_parallel = 2;
  const MeshRank rank = mesh_rank(scenario, 0);
  CHECK(rank.tokens == 2 * 16);
  CHECK(rank_scenario(scenario, rank).seq_len == 16);
  LayerGraph graph = build_training_graph(rank_scenario(scenario, rank));
  apply_mesh_to_graph(graph, rank);
  int gathered = 0;
  for (const OpNode& op : graph.ops) {
    for (const Transient& t : op.forward_transients) gathered += graph.names[t.name] == "cp.gathered_kv";
  }
  CHECK(gathered == 4);  // one per attention
}

// Megatron-LM's compute_weight_and_optimizer_memory: the most loaded shard (the first stage)
// holds (transformer layers / pp + embedding) / tp parameters; its stated assumptions divide
// the norms by TP too, so the count agrees to the norms (0.02%).
TEST_CASE("the first stage's parameters match Megatron-LM's most loaded shard", "[parallel][mesh][megatron]") {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-3-8b", 1, 128);
  scenario.parallel.world_size = 32;
  scenario.parallel.mesh.tensor_parallel = 8;
  scenario.parallel.mesh.pipeline_parallel = 4;
  const double h = 4096, layers = 32, heads = 32, groups = 8, ffn = 14336, vocab = 128256;
  const double tp = 8, pp = 4;
  const double attention = 2 * h * h * (1 + groups / heads);
  const double layer = 2 * h * (ffn * 1.5 + 1) + attention;  // swiglu, RMSNorm
  const double block = layer * layers + h;                    // + final norm
  const double megatron = (block / pp + h * vocab) / tp;
  const MeshRank first = mesh_rank(scenario, 0);
  const double ours = static_cast<double>(build_training_graph(rank_scenario(scenario, first)).parameter_count());
  CHECK(std::abs(ours - megatron) / megatron < 5e-4);
}
