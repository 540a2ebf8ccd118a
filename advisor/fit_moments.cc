// One replay with a callback after every event, reading the allocator's allocated-bytes stat
// (block sizes, as torch.cuda.memory_allocated() counts them).
#include "advisor/fit_moments.h"

#include <algorithm>
#include <functional>

#include "sim/caching_allocator.h"
#include "sim/replay.h"

namespace oomcast::advisor {

using planner::PlannedTrace;
using scenario::Scenario;

std::string AllocatedSeries::phase_at(size_t event) const {
  auto after = std::upper_bound(marks.begin(), marks.end(), event,
                                [](size_t e, const std::pair<size_t, std::string>& mark) { return e < mark.first; });
  return after == marks.begin() ? std::string("setup") : std::prev(after)->second;
}

AllocatedSeries replay_allocated_series(const Scenario& scenario, const PlannedTrace& planned) {
  AllocatedSeries series;
  series.allocated.assign(planned.trace.events.size(), 0);
  series.identity.reserve(planned.trace.events.size());
  // A slot's name is two pieces (sim/slot_names.h): each piece's text is hashed once, and a
  // slot's hash combines its two.
  const sim::SlotNames& names = planned.trace.slot_names;
  std::vector<uint64_t> piece_hash(names.piece_count());
  for (uint32_t piece = 0; piece < piece_hash.size(); ++piece) piece_hash[piece] = std::hash<std::string>{}(names.piece(piece));
  auto slot_hash = [&](uint32_t slot) -> uint64_t {
    if (slot >= names.size()) return 0;
    const auto& parts = names.parts(slot);
    return piece_hash[parts[0]] * 0x9e3779b97f4a7c15ULL + piece_hash[parts[1]];
  };
  for (const sim::Event& event : planned.trace.events) {
    const uint64_t name = slot_hash(event.slot);
    series.identity.push_back(name * 31 + static_cast<uint64_t>(event.kind));
  }
  sim::ReplayOptions options;
  options.stop_at_first_oom = true;
  sim::Replayer replayer(scenario.allocator, scenario.device.model, options);
  replayer.on_event([&](size_t index) {
    series.allocated[index] = static_cast<uint64_t>(replayer.allocator().stats().allocated_bytes.all().current);
  });
  sim::ReplayResult result = replayer.run(planned.trace);
  series.peak_allocated = result.peak_allocated_bytes;
  series.peak_reserved = result.peak_reserved_bytes;
  auto peak = std::max_element(series.allocated.begin(), series.allocated.end());
  series.peak_event = peak == series.allocated.end() ? 0 : static_cast<size_t>(peak - series.allocated.begin());
  for (const sim::MarkReport& mark : result.marks) {
    series.marks.emplace_back(mark.event_index, mark.label);
    const bool step = mark.label.find("optimizer") != std::string::npos;
    uint64_t& regime = step ? series.regimes.optimizer_step : series.regimes.activations;
    regime = std::max<uint64_t>(regime, mark.peak_allocated_bytes);
  }
  return series;
}

}  // namespace oomcast::advisor
