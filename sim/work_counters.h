// WorkCounters: how much simulation work this process has done (replays run, events replayed,
// schedules planned). Cheap to keep (relaxed atomic adds, one per replay or plan), and exact,
// so a regression guard can catch an accidental second replay or re-plan without timing
// anything: run a command, compare the counters' growth with what it should cost.
#pragma once

#include <cstdint>

namespace oomcast::sim {

struct WorkCounters {
  uint64_t replays = 0;          // Replayer::run calls (replay() and every Replayer)
  uint64_t events_replayed = 0;  // their events, summed
  uint64_t plans_built = 0;      // schedules planned (planner::plan_steps)

  // The work done between `before` and this reading.
  WorkCounters since(const WorkCounters& before) const {
    return {replays - before.replays, events_replayed - before.events_replayed, plans_built - before.plans_built};
  }
};

// The totals so far, over all threads.
WorkCounters work_counters();
void count_replay(uint64_t events);
void count_plan();

}  // namespace oomcast::sim
