// Expert parallelism per rank: the rank's experts and the whole router, the rows its experts
// receive from the group, and the dispatch and combine all-to-alls in the graph
// (planner/families/expert_parallel_moe.h; measured against real gloo runs by
// validate/expert_parallel_capture.py).
#include <catch2/catch.hpp>

#include "planner/jobs/mesh_job.h"
#include "planner/jobs/training_job.h"
#include "planner/families/expert_parallel_moe.h"
#include "planner/parallel/mesh_rank.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::Scenario;

namespace {

// llama-tiny with 4 experts of width 96, top-2, on 2 ranks.
Scenario tiny_moe(int64_t expert_parallel) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32);
  scenario.model.dims["experts"] = 4;
  scenario.model.dims["experts_per_token"] = 2;
  scenario.model.dims["expert_ffn_hidden"] = 96;
  scenario.model.dims["transformers_version"] = 456;  // one module per expert
  scenario.parallel.world_size = 2;
  scenario.parallel.gpus_per_node = 2;
  scenario.parallel.mesh.expert_parallel = expert_parallel;
  return scenario;
}

int count_named(const LayerGraph& graph, const std::string& suffix) {
  int found = 0;
  for (const OpNode& op : graph.ops) {
    const std::string& name = graph.names[op.name];
    found += name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  return found;
}

}  // namespace

TEST_CASE("an expert-parallel rank holds experts / EP of the experts and the whole router", "[parallel][mesh][expert]") {
  const Scenario whole = tiny_moe(1);
  const Scenario split = tiny_moe(2);
  const uint64_t full = build_training_graph(whole).parameter_count();
  const uint64_t rank = build_training_graph(rank_scenario(split, mesh_rank(split, 0))).parameter_count();
  const int64_t layers = whole.model.dims.at("layers");
  const uint64_t expert = 3 * 96 * 64;  // w1, w2, w3 of one expert
  CHECK(full - rank == static_cast<uint64_t>(layers) * 2 * expert);
}

TEST_CASE("balanced routing sends a rank's experts tokens x top-k rows; the worst case more", "[parallel][mesh][expert]") {
  CHECK(families::expert_parallel_received_rows(64, 4, 2, 2, true) == 128);
  CHECK(families::expert_parallel_received_rows(64, 2, 2, 2, true) == 128);  // top-2 of 2: every token both
  CHECK(families::expert_parallel_received_rows(64, 4, 2, 2, false) > 128);
}

TEST_CASE("every MoE layer of an expert-parallel rank dispatches and combines with an all-to-all each",
          "[parallel][mesh][expert]") {
  const Scenario split = tiny_moe(2);
  const MeshRank rank = mesh_rank(split, 0);
  LayerGraph graph = build_training_graph(rank_scenario(split, rank));
  apply_mesh_to_graph(graph, rank);
  const int layers = static_cast<int>(split.model.dims.at("layers"));
  CHECK(count_named(graph, "ep.dispatch_all_to_all") == layers);
  CHECK(count_named(graph, "ep.combine_all_to_all") == layers);
  CHECK(count_named(build_training_graph(tiny_moe(1)), "ep.dispatch_all_to_all") == 0);
}

TEST_CASE("the expert-parallel all-to-alls are priced in the step time over the intra-node link",
          "[parallel][mesh][expert]") {
  auto communication = [](double link_gbps) {
    Scenario scenario = tiny_moe(2);
    scenario.device.throughput.fp32_tflops = 10.0;
    scenario.device.throughput.hbm_gbps = 1000.0;
    scenario.device.throughput.interconnect_gbps = link_gbps;
    return plan_mesh_job(scenario).step_time.communication_exposed_seconds;
  };
  const double slow = communication(10.0);
  REQUIRE(slow > 0.0);
  CHECK(communication(20.0) == Approx(slow / 2));
}
