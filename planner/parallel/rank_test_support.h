// Test helper for the per-rank schedules: bytes live per category when a phase mark is
// reached, replayed from a PlannedTrace without the allocator.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "planner/planner_test_support.h"

namespace oomcast::planner::testing {

struct CategoryBytes {
  std::map<TensorCategory, uint64_t> at_mark;      // live when the mark is reached
  uint64_t max_gradient_in_iteration1 = 0;        // most Gradient bytes live during iteration 1
};

inline CategoryBytes live_by_category(const PlannedTrace& planned, const std::string& mark) {
  CategoryBytes result;
  std::map<uint32_t, std::pair<TensorCategory, uint64_t>> live;
  std::map<TensorCategory, uint64_t> totals;
  bool reached = false;
  for (size_t i = 0; i < planned.trace.events.size(); ++i) {
    const auto& event = planned.trace.events[i];
    const EventInfo& info = planned.info[i];
    if (event.kind == oomcast::sim::EventKind::Mark && planned.trace.strings[event.tag] == mark && !reached) {
      reached = true;
      result.at_mark = totals;
    }
    if (event.kind == oomcast::sim::EventKind::Alloc) {
      live[event.slot] = {info.category, event.bytes};
      totals[info.category] += event.bytes;
    } else if (event.kind == oomcast::sim::EventKind::Free) {
      auto found = live.find(event.slot);
      totals[found->second.first] -= found->second.second;
      live.erase(found);
    }
    if (info.iteration == 1) {
      result.max_gradient_in_iteration1 =
          std::max(result.max_gradient_in_iteration1, totals[TensorCategory::Gradient]);
    }
  }
  REQUIRE(reached);
  return result;
}

}  // namespace oomcast::planner::testing
