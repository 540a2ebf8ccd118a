// Reads the scenario's `cuda_graphs` list: names, phases, batch sizes, pool sharing, and
// the job facts a captured graph needs (scenario/cuda_graphs_config_loader.h).
#include "scenario/cuda_graphs_config_loader.h"

#include <algorithm>
#include <functional>
#include <set>

#include "scenario/size_limits.h"

namespace oomcast::scenario {

namespace {

CudaGraphConfig read_graph(const YamlNode& node, const Scenario& scenario) {
  if (!node.is_map())
    node.fail("each cuda_graphs entry is a map: {name: decode, phase: decode, batch_sizes: [1, 2, 4, 8]}");
  node.reject_unknown_keys({"name", "phase", "batch_sizes", "share_pool"});
  CudaGraphConfig graph;
  YamlNode name = node.child("name");
  if (name.is_missing()) node.fail("a cuda_graphs entry needs a 'name'");
  graph.name = name.as_string();
  if (graph.name.empty() || graph.name.find_first_of(" \t#") != std::string::npos)
    name.fail("a graph name is one word without spaces or '#'");
  YamlNode phase = node.child("phase");
  if (phase.is_missing()) node.fail("a cuda_graphs entry needs a 'phase': decode | forward");
  graph.phase = phase.as_choice({"decode", "forward"}) == "decode" ? CapturedPhase::Decode : CapturedPhase::Forward;
  const JobKind kind = scenario.job.job.kind;
  if (graph.phase == CapturedPhase::Decode) {
    if (kind != JobKind::Generate) phase.fail("'decode' graphs need a generate job (job: {kind: generate, cache: static})");
    if (scenario.job.job.generate.cache != KvCacheKind::Static)
      phase.fail("a captured decode graph has fixed shapes, so it needs a static KV cache (job.cache: static); "
                 "a dynamic cache grows every step");
    if (scenario.job.job.generate.num_beams > 1) phase.fail("captured decode graphs with beam search are not planned");
  } else if (kind != JobKind::Inference) {
    phase.fail("'forward' graphs need an inference job (job: inference): a captured forward does not record "
               "autograd's graph");
  }
  YamlNode sizes = node.child("batch_sizes");
  if (sizes.is_missing()) node.fail("a cuda_graphs entry needs 'batch_sizes' (the batch sizes captured)");
  if (!sizes.is_sequence() || sizes.items().empty()) sizes.fail("'batch_sizes' is a non-empty list of integers");
  for (const YamlNode& size : sizes.items()) {
    int64_t batch = size.as_integer(1, kMaxBatchSize);
    if (std::find(graph.batch_sizes.begin(), graph.batch_sizes.end(), batch) != graph.batch_sizes.end())
      size.fail("batch size " + std::to_string(batch) + " is listed twice");
    graph.batch_sizes.push_back(batch);
  }
  std::sort(graph.batch_sizes.begin(), graph.batch_sizes.end(), std::greater<>());
  graph.share_pool = node.bool_or("share_pool", true);
  return graph;
}

}  // namespace

void read_cuda_graphs_section(const YamlNode& node, Scenario& scenario) {
  if (node.is_missing()) return;
  if (!node.is_sequence())
    node.fail("'cuda_graphs' is a list: [{name: decode, phase: decode, batch_sizes: [1, 2, 4, 8]}]");
  if (scenario.device.is_cpu) node.fail("CUDA graphs need a GPU device; the scenario runs on the cpu");
  std::set<std::string> names;
  std::set<CapturedPhase> phases;
  for (const YamlNode& item : node.items()) {
    CudaGraphConfig graph = read_graph(item, scenario);
    if (!names.insert(graph.name).second) item.child("name").fail("graph name '" + graph.name + "' is used twice");
    if (!phases.insert(graph.phase).second)
      item.child("phase").fail("only one cuda_graphs entry per phase: list every batch size in one entry");
    scenario.cuda_graphs.push_back(std::move(graph));
  }
}

}  // namespace oomcast::scenario
