// Process-wide work counters: relaxed atomics, since only totals are read.
#include "sim/work_counters.h"

#include <atomic>

namespace oomcast::sim {
namespace {
std::atomic<uint64_t> replays{0};
std::atomic<uint64_t> events_replayed{0};
std::atomic<uint64_t> plans_built{0};
}  // namespace

WorkCounters work_counters() {
  return {replays.load(std::memory_order_relaxed), events_replayed.load(std::memory_order_relaxed),
          plans_built.load(std::memory_order_relaxed)};
}

void count_replay(uint64_t events) {
  replays.fetch_add(1, std::memory_order_relaxed);
  events_replayed.fetch_add(events, std::memory_order_relaxed);
}

void count_plan() { plans_built.fetch_add(1, std::memory_order_relaxed); }

}  // namespace oomcast::sim
