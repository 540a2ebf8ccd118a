// Helpers shared by the planner tests (with those of scenario_test_support.h): a checker that replays a
// PlannedTrace's allocs and frees without the allocator (live bytes, double frees, peaks).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "planner/jobs/training_job.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::planner::testing {

struct ScheduleCheck {
  bool ok = true;
  std::string error;
  uint64_t peak_bytes = 0;
  uint64_t final_bytes = 0;
  std::map<std::string, uint64_t> live_at_end_by_category;
  std::map<std::string, uint64_t> live_at_mark;   // live bytes when each mark is reached
  std::vector<uint32_t> live_slots_at_end;
};

inline ScheduleCheck check_schedule(const PlannedTrace& planned) {
  ScheduleCheck check;
  const auto& events = planned.trace.events;
  std::vector<uint64_t> bytes(planned.trace.slot_names.size(), 0);
  std::vector<uint8_t> live(planned.trace.slot_names.size(), 0);
  std::vector<TensorCategory> category(planned.trace.slot_names.size(), TensorCategory::Activation);
  uint64_t current = 0;
  if (planned.info.size() != events.size()) {
    check.ok = false;
    check.error = "info and events differ in length";
    return check;
  }
  for (size_t i = 0; i < events.size(); ++i) {
    const sim::Event& event = events[i];
    if (event.kind == sim::EventKind::Alloc) {
      if (live[event.slot]) {
        check.ok = false;
        check.error = "slot allocated twice: " + planned.trace.slot_names[event.slot];
        return check;
      }
      live[event.slot] = 1;
      bytes[event.slot] = event.bytes;
      category[event.slot] = planned.info[i].category;
      current += event.bytes;
      check.peak_bytes = std::max(check.peak_bytes, current);
    } else if (event.kind == sim::EventKind::Free) {
      if (!live[event.slot]) {
        check.ok = false;
        check.error = "free of a dead slot: " + planned.trace.slot_names[event.slot];
        return check;
      }
      live[event.slot] = 0;
      current -= bytes[event.slot];
    } else if (event.kind == sim::EventKind::Mark) {
      check.live_at_mark[planned.trace.strings[event.tag]] = current;
    }
  }
  check.final_bytes = current;
  for (uint32_t slot = 0; slot < live.size(); ++slot) {
    if (!live[slot]) continue;
    check.live_at_end_by_category[category_name(category[slot])] += bytes[slot];
    check.live_slots_at_end.push_back(slot);
  }
  return check;
}

}  // namespace oomcast::planner::testing
