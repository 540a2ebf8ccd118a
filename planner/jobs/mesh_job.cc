// Plans each pipeline stage's rank and keeps the busiest (the highest peak of live tensor
// bytes; the allocator's reserved bytes follow it closely for one schedule shape), so the
// report names the rank that runs out of memory first, or the stage pipeline_planned_stage
// names (a per-rank comparison). Step time: the stage's compute for all microbatches plus
// the pipeline bubble, (stages - 1) / (virtual stages x microbatches) of it (Narayanan et
// al., SC'21, §2.2), a third of that under zero bubble (ZB-H1, Qi et al., ICLR 2024), plus
// the tensor-parallel all-reduces and expert-parallel all-to-alls the compute does not hide.
#include "planner/jobs/mesh_job.h"

#include <algorithm>

#include "base/input_error.h"
#include "planner/jobs/training_job.h"
#include "planner/families/moe_block.h"
#include "planner/parallel/mesh_rank.h"

namespace oomcast::planner {

using scenario::JobKind;
using scenario::MeshConfig;
using scenario::PipelineSchedule;
using scenario::Precision;
using scenario::Scenario;

namespace {

struct Peak {
  uint64_t bytes = 0;
  std::string phase;
};

// The highest live tensor bytes of a schedule and the phase it happens in.
Peak peak_of(const PlannedTrace& planned) {
  Peak peak;
  uint64_t live = 0;
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < planned.trace.events.size(); ++i) {
    const sim::Event& event = planned.trace.events[i];
    if (event.kind == sim::EventKind::Alloc) {
      if (sizes.size() <= event.slot) sizes.resize(event.slot + 1, 0);
      sizes[event.slot] = event.bytes;
      live += event.bytes;
      if (live > peak.bytes) {
        peak.bytes = live;
        peak.phase = planned.names[planned.info[i].phase];
      }
    } else if (event.kind == sim::EventKind::Free && event.slot < sizes.size()) {
      live -= sizes[event.slot];
      sizes[event.slot] = 0;
    }
  }
  return peak;
}

// Seconds of the TP all-reduces a step adds: four per layer and microbatch (two forward, two
// backward) of one [batch, seq, hidden] activation, ring all-reduce 2 (tp - 1) / tp of it per
// rank, over the device's intra-node link; exposed: compute does not hide them (eager DTensor
// TP waits on each collective before the next matmul).
double tensor_parallel_seconds(const Scenario& scenario, const MeshRank& rank, double link_bytes_per_second) {
  const MeshConfig& mesh = rank.mesh;
  if (mesh.tensor_parallel <= 1 || link_bytes_per_second <= 0.0) return 0.0;
  const double tp = static_cast<double>(mesh.tensor_parallel);
  const double activation = static_cast<double>(rank.tokens) * static_cast<double>(rank.hidden) *
                            (scenario.precision == Precision::Fp32 ? 4.0 : 2.0);
  const double per_collective = 2.0 * (tp - 1.0) / tp * activation / link_bytes_per_second;
  return per_collective * 4.0 * static_cast<double>(rank.layers) * static_cast<double>(mesh.microbatches());
}

// Seconds of the EP all-to-alls a step adds: four per sparse layer and microbatch (dispatch and
// combine, forward and backward) of the rank's tokens x top-k rows of hidden, (ep - 1) / ep of
// them leaving the rank, over the intra-node link (an estimate: EP across nodes is slower);
// exposed, as torchtitan's token dispatch waits on each before the experts run.
double expert_parallel_seconds(const Scenario& scenario, const MeshRank& rank, double link_bytes_per_second) {
  const MeshConfig& mesh = rank.mesh;
  if (mesh.expert_parallel <= 1 || link_bytes_per_second <= 0.0) return 0.0;
  const families::MoeShape shape = families::read_moe_shape(scenario.model);
  const int64_t layers = scenario.model.dims.count("layers") ? scenario.model.dims.at("layers") : 0;
  int64_t sparse = 0;
  for (int64_t layer = 0; layer < layers; ++layer) sparse += shape.sparse_layer(layer) ? 1 : 0;
  if (sparse == 0 || layers == 0) return 0.0;
  const double ep = static_cast<double>(mesh.expert_parallel);
  const double rows = static_cast<double>(rank.tokens) * static_cast<double>(std::min(shape.experts_per_token, shape.experts));
  const double bytes = rows * static_cast<double>(rank.hidden) * (scenario.precision == Precision::Fp32 ? 4.0 : 2.0);
  const double per_collective = (ep - 1.0) / ep * bytes / link_bytes_per_second;
  const double rank_sparse = static_cast<double>(sparse) * static_cast<double>(rank.layers) / static_cast<double>(layers);
  return per_collective * 4.0 * rank_sparse * static_cast<double>(mesh.microbatches());
}

void add_pipeline_time(const Scenario& scenario, const MeshRank& rank, StepTime& time) {
  if (!time.modelled) return;
  const MeshConfig& mesh = rank.mesh;
  const double link = scenario.device.throughput.interconnect_gbps * 1e9;
  const double collective_seconds = tensor_parallel_seconds(scenario, rank, link) + expert_parallel_seconds(scenario, rank, link);
  time.communication_seconds += collective_seconds;
  time.communication_exposed_seconds += collective_seconds;
  double bubble = 0.0;
  if (mesh.pipeline_parallel > 1) {
    bubble = static_cast<double>(mesh.pipeline_parallel - 1) /
             static_cast<double>(mesh.pipeline_virtual_stages * mesh.microbatches());
    if (mesh.pipeline_schedule == PipelineSchedule::ZeroBubble) bubble /= 3.0;
  }
  const double compute = time.forward_seconds + time.backward_seconds + time.recompute_seconds;
  time.step_seconds += compute * bubble + collective_seconds;
}

}  // namespace

PlannedTrace plan_mesh_job(const Scenario& scenario) {
  if (scenario.job.job.kind != JobKind::Train) {
    throw InputError(SourceLocation{}, "parallel",
                     "tensor, pipeline, context and expert parallelism are modelled for training jobs");
  }
  const MeshConfig& mesh = scenario.parallel.mesh;
  PlannedTrace busiest;
  std::vector<MeshRankSummary> ranks;
  uint64_t busiest_bytes = 0;
  for (int64_t stage = 0; stage < mesh.pipeline_parallel; ++stage) {
    const MeshRank rank = mesh_rank(scenario, stage);
    const Scenario rank_run = rank_scenario(scenario, rank);
    PlannedTrace planned = plan_training_rank(rank_run, rank);
    const Peak peak = peak_of(planned);
    MeshRankSummary summary;
    summary.stage = stage;
    summary.layers = rank.layers;
    summary.in_flight_microbatches = rank.in_flight;
    summary.parameters = planned.parameter_count;
    summary.peak_allocated_bytes = peak.bytes;
    summary.peak_phase = peak.phase;
    ranks.push_back(summary);
    const bool chosen = mesh.planned_stage >= 0 ? stage == mesh.planned_stage : stage == 0 || peak.bytes > busiest_bytes;
    if (chosen) {
      busiest_bytes = peak.bytes;
      add_pipeline_time(rank_run, rank, planned.step_time);
      busiest = std::move(planned);
      busiest.parallel.planned_stage = stage;
    }
  }
  busiest.parallel.mesh = describe_mesh(scenario);
  busiest.parallel.mesh_ranks = std::move(ranks);
  busiest.parallel.world_size = scenario.parallel.world_size;
  return busiest;
}

}  // namespace oomcast::planner
