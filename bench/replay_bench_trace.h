// The synthetic trace the replay benchmarks share: a training-like mix of allocation sizes
// and lifetimes, reproducible from a seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sim/trace.h"

namespace oomcast::sim {

// A realistic mix: mostly small tensors (biases, norms, scalars), some medium activations,
// a few large ones; half the frees LIFO (temporaries), half random (activations, grads).
inline Trace make_replay_bench_trace(size_t event_count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto log_uniform = [&](double low, double high) {
    return static_cast<uint64_t>(std::exp(std::log(low) + unit(random) * (std::log(high) - std::log(low))));
  };
  Trace trace;
  trace.strings.emplace_back();
  trace.events.reserve(event_count);
  std::vector<uint32_t> live;
  uint32_t next_slot = 0;
  const size_t target_live = 2000;
  while (trace.events.size() < event_count) {
    bool allocate = live.empty() || unit(random) < (live.size() < target_live ? 0.6 : 0.4);
    if (allocate) {
      double kind = unit(random);
      uint64_t bytes = kind < 0.70 ? log_uniform(4, 1 << 20)
                       : kind < 0.95 ? log_uniform(1 << 20, 10 << 20)
                                     : log_uniform(10 << 20, 200 << 20);
      trace.events.push_back(Event{EventKind::Alloc, next_slot, 0, bytes, 0});
      live.push_back(next_slot++);
    } else {
      size_t index = unit(random) < 0.5 ? live.size() - 1 : static_cast<size_t>(random() % live.size());
      trace.events.push_back(Event{EventKind::Free, live[index], 0, 0, 0});
      live[index] = live.back();
      live.pop_back();
    }
  }
  trace.slot_names.resize(next_slot);
  return trace;
}

}  // namespace oomcast::sim
