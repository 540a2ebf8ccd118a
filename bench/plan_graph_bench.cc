// Plan time of a 70B-shaped graph file against the llama-2-70b preset, side by side in one
// process: the body of tests/data/graphs/llama-tiny.graph.yaml with Llama-2-70B's dims (80
// layers through one `repeat`), amp_bf16, batch 1, seq_len 4096. Reports the best of nine
// rounds of reading the file (load_scenario_text: YAML + graph checks) and of plan_steps for
// each, their ratio, and whether the two schedules are identical. Prints one JSON line.
//   usage: plan_graph_bench [iterations=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "planner/families/families.h"
#include "planner/jobs/training_job.h"
#include "scenario/scenario_loader.h"

using namespace oomcast;

namespace {

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The llama-tiny graph file with the dims line swapped for Llama-2-70B's.
std::string write_70b_graph() {
  std::ifstream in(std::string(OOMCAST_SOURCE_DIR) + "/tests/data/graphs/llama-tiny.graph.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string graph = text.str();
  size_t start = graph.find("\ndims:");
  size_t end = graph.find('\n', start + 1);
  if (start == std::string::npos || end == std::string::npos) std::abort();
  graph.replace(start + 1, end - start - 1,
                "dims: {layers: 80, hidden: 8192, heads: 64, kv_heads: 8, head_dim: hidden/heads, ffn: 28672, "
                "vocab: 32000}");
  std::string path = (std::filesystem::temp_directory_path() / "oomcast-plan-graph-bench-70b.graph.yaml").string();
  std::ofstream(path) << graph;
  return path;
}

// The one step that differs between the two: writing the forward into a GraphBuilder.
double build_ms(const scenario::Scenario& scenario) {
  planner::BuildContext context;
  context.precision = planner::precision_rules(scenario.precision);
  context.attention = scenario.attention;
  context.batch = scenario.batch_size;
  context.seq_len = scenario.seq_len;
  auto start = std::chrono::steady_clock::now();
  planner::GraphBuilder builder(context);
  planner::families::build_forward(builder, scenario.model);
  planner::LayerGraph graph = builder.finish();
  double elapsed = milliseconds_since(start);
  if (graph.ops.empty()) std::abort();
  return elapsed;
}

bool same_events(const planner::PlannedTrace& a, const planner::PlannedTrace& b) {
  if (a.trace.events.size() != b.trace.events.size()) return false;
  for (size_t i = 0; i < a.trace.events.size(); ++i) {
    const auto& x = a.trace.events[i];
    const auto& y = b.trace.events[i];
    if (x.kind != y.kind || x.slot != y.slot || x.bytes != y.bytes) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 3;
  std::string graph_path = write_70b_graph();
  std::string rest = "\nbatch_size: 1\nseq_len: 4096\nprecision: amp_bf16\niterations: " + std::to_string(iterations) +
                     "\ndevice: {total_gib: 4096, compute_capability: 9.0}\n";
  std::string preset_yaml = "model: llama-2-70b" + rest;
  std::string graph_yaml = "model: " + graph_path + rest;
  double load_preset = 1e18, load_graph = 1e18, plan_preset = 1e18, plan_graph = 1e18;
  double build_preset = 1e18, build_graph = 1e18;
  bool identical = true;
  size_t events = 0;
  uint64_t parameters_preset = 0, parameters_graph = 0;
  for (int round = 0; round < 9; ++round) {
    auto start = std::chrono::steady_clock::now();
    scenario::Scenario preset = scenario::load_scenario_text(preset_yaml, "preset.yaml", {});
    load_preset = std::min(load_preset, milliseconds_since(start));
    start = std::chrono::steady_clock::now();
    scenario::Scenario graph = scenario::load_scenario_text(graph_yaml, "graph.yaml", {});
    load_graph = std::min(load_graph, milliseconds_since(start));

    build_preset = std::min(build_preset, build_ms(preset));
    build_graph = std::min(build_graph, build_ms(graph));

    start = std::chrono::steady_clock::now();
    planner::PlannedTrace planned_preset = planner::plan_steps(preset);
    plan_preset = std::min(plan_preset, milliseconds_since(start));
    start = std::chrono::steady_clock::now();
    planner::PlannedTrace planned_graph = planner::plan_steps(graph);
    plan_graph = std::min(plan_graph, milliseconds_since(start));

    identical = identical && same_events(planned_preset, planned_graph);
    events = planned_graph.trace.events.size();
    parameters_preset = planned_preset.parameter_count;
    parameters_graph = planned_graph.parameter_count;
  }
  std::filesystem::remove(graph_path);
  std::printf(
      "{\"model\": \"llama-2-70b\", \"iterations\": %d, \"events\": %zu, \"parameters_preset\": %llu, "
      "\"parameters_graph\": %llu, \"identical_schedule\": %s, \"load_preset_ms\": %.2f, \"load_graph_ms\": %.2f, "
      "\"build_preset_ms\": %.2f, \"build_graph_ms\": %.2f, \"plan_preset_ms\": %.1f, \"plan_graph_ms\": %.1f, "
      "\"plan_ratio\": %.3f, \"load_plus_plan_ratio\": %.3f}\n",
      iterations, events, static_cast<unsigned long long>(parameters_preset),
      static_cast<unsigned long long>(parameters_graph), identical ? "true" : "false", load_preset, load_graph,
      build_preset, build_graph, plan_preset, plan_graph, plan_graph / plan_preset, (load_graph + plan_graph) / (load_preset + plan_preset));
  return identical ? 0 : 1;
}
