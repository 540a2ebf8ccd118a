// Replay cost per event as workloads grow: the simulator must stay linear in events when a
// pool caches many free blocks of one size. Four traces, replayed side by side in one run:
//   plan-10, plan-320   `scenarios/gpt2-small-b8-amp-bf16.yaml` planned with 10 and 320 layers
//   layers-10, layers-100000   a snapshot-like synthetic trace of about 1 M events: per
//                       iteration each layer allocates three same-size activations (freed in
//                       reverse in the backward pass) around short-lived temporaries
// For each: events, ns per event, and the hash-map baseline of bench/replay_bench (one insert
// per alloc, one erase per free) over the same events. Wall times are noisy on a loaded
// machine; the claims rest on instruction counts, which callgrind gives for one trace:
//   valgrind --tool=callgrind --toggle-collect='*replay_measured*' build/bench/replay_scaling_bench plan-320
// (instructions per event = the Ir total / the printed events). Prints one JSON line.
//   usage: replay_scaling_bench [trace]    (no argument: all four, timed)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/jobs/training_job.h"
#include "scenario/scenario_loader.h"
#include "sim/replay.h"

using namespace oomcast;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

sim::Trace planned_trace(int layers) {
  const std::string path = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/gpt2-small-b8-amp-bf16.yaml";
  scenario::Scenario scenario = scenario::load_scenario(path, {"model.layers=" + std::to_string(layers)});
  return planner::plan_steps(scenario).trace;
}

// Iterations of a forward pass (per layer: a temporary, then three activations of fixed
// sizes that stay live) and a backward pass (per layer, last first: a gradient temporary,
// then the layer's activations freed), until about `target_events` events.
sim::Trace same_size_trace(size_t layers, size_t target_events) {
  const uint64_t activation_sizes[3] = {6 << 20, 2 << 20, 6 << 20};
  sim::Trace trace;
  trace.strings.emplace_back();
  uint32_t next_slot = 0;
  std::vector<uint32_t> live;
  auto alloc = [&](uint64_t bytes) {
    trace.events.push_back(sim::Event{sim::EventKind::Alloc, next_slot, 0, bytes, 0});
    return next_slot++;
  };
  auto free = [&](uint32_t slot) { trace.events.push_back(sim::Event{sim::EventKind::Free, slot, 0, 0, 0}); };
  while (trace.events.size() < target_events) {
    for (size_t layer = 0; layer < layers; ++layer) {
      free(alloc(12 << 20));
      for (uint64_t bytes : activation_sizes) live.push_back(alloc(bytes));
    }
    for (size_t layer = layers; layer-- > 0;) {
      free(alloc(8 << 20));
      for (int k = 2; k >= 0; --k) free(live[layer * 3 + static_cast<size_t>(k)]);
    }
    live.clear();
  }
  trace.slot_names.resize(next_slot);
  return trace;
}

sim::Trace trace_named(const std::string& name) {
  if (name == "plan-10") return planned_trace(10);
  if (name == "plan-320") return planned_trace(320);
  if (name == "layers-10") return same_size_trace(10, 1000000);
  if (name == "layers-100000") return same_size_trace(100000, 1000000);
  std::fprintf(stderr, "replay_scaling_bench: unknown trace %s\n", name.c_str());
  std::exit(2);
}

// The one function callgrind collects (--toggle-collect='*replay_measured*').
[[gnu::noinline]] size_t replay_measured(const sim::Trace& trace) {
  sim::ReplayResult result = sim::replay(trace, sim::AllocatorConfig{}, sim::DeviceModel::unlimited());
  return result.events_replayed;
}

double time_simulator(const sim::Trace& trace) {
  auto start = std::chrono::steady_clock::now();
  if (replay_measured(trace) != trace.events.size()) std::abort();
  return seconds_since(start);
}

double time_baseline(const sim::Trace& trace, size_t& checksum) {
  auto start = std::chrono::steady_clock::now();
  std::unordered_map<uint64_t, uint64_t> live;
  for (const sim::Event& event : trace.events) {
    if (event.kind == sim::EventKind::Alloc) {
      live.insert({event.slot, event.bytes});
    } else if (event.kind == sim::EventKind::Free) {
      live.erase(event.slot);
    }
  }
  checksum += live.size();
  return seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    sim::Trace trace = trace_named(argv[1]);
    size_t events = replay_measured(trace);
    std::printf("{\"trace\": \"%s\", \"events\": %zu}\n", argv[1], events);
    return 0;
  }
  std::string json = "{";
  size_t checksum = 0;
  for (const char* name : {"plan-10", "plan-320", "layers-10", "layers-100000"}) {
    sim::Trace trace = trace_named(name);
    double best_sim = 1e9, best_baseline = 1e9;
    for (int round = 0; round < 3; ++round) {
      best_baseline = std::min(best_baseline, time_baseline(trace, checksum));
      best_sim = std::min(best_sim, time_simulator(trace));
    }
    const double events = static_cast<double>(trace.events.size());
    char part[256];
    std::snprintf(part, sizeof part,
                  "%s\"%s\": {\"events\": %zu, \"sim_ns_per_event\": %.1f, \"baseline_ns_per_event\": %.1f, "
                  "\"ratio\": %.2f, \"events_per_second\": %.0f}",
                  json.size() > 1 ? ", " : "", name, trace.events.size(), best_sim / events * 1e9,
                  best_baseline / events * 1e9, best_sim / best_baseline, events / best_sim);
    json += part;
  }
  std::printf("%s}\n", json.c_str());
  return checksum == 0 ? 0 : 0;
}
