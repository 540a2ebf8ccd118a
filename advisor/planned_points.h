// PlannedPoints: the schedules one answer has planned for a scenario at other batch sizes and
// sequence lengths, kept so that a later stage asking for the same point replays the schedule
// instead of planning it again. The doctor's pattern variants (2B, S/2, S/4) and its own
// baseline are points of the closed-form fit's grid; without sharing, each was planned twice.
// A schedule does not depend on the device's memory (the planner never reads
// DeviceConfig::model), so a point planned for the scenario's device stands for the same
// point on the fit's unbounded device.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "advisor/predict.h"

namespace oomcast::advisor {

class PlannedPoints {
 public:
  // Whether points of `scenario` may be shared: its schedule is planned whole, in one piece
  // (no steady-state window), and no checkpointing: auto choice, which depends on the device's
  // memory, is left to resolve.
  static bool shareable(const scenario::Scenario& scenario);

  // The schedule kept for (batch, seq_len), or null.
  std::shared_ptr<const planner::PlannedTrace> find(int64_t batch, int64_t seq_len) const;
  // Keeps `planned` as the schedule of (batch, seq_len); the first kept wins.
  void keep(int64_t batch, int64_t seq_len, std::shared_ptr<const planner::PlannedTrace> planned);
  // The schedule of `scenario` at its own (batch, seq_len): the kept one, else planned and kept.
  std::shared_ptr<const planner::PlannedTrace> plan(const scenario::Scenario& scenario);
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<const planner::PlannedTrace>> points_;
};

// predict(scenario), planned through `points` (kept there for later stages) when they may be
// shared; plain predict() otherwise or when `points` is null. The same answer either way.
Prediction predict_sharing(const scenario::Scenario& scenario, PlannedPoints* points);

}  // namespace oomcast::advisor
