// find_steady_iteration() and extend_to_all_iterations(); see steady_state.h. The replay
// watches three things at every iteration boundary: the allocator's layout (every block of
// every segment), which block each surviving tensor occupies (keyed by its role: "the 7th
// allocation of the previous iteration", or the tensor itself for older ones), and the
// iteration's schedule with its frees written in the same roles. When all three equal the
// previous iteration's, the next iteration starts from the same state and frees the same
// blocks, so it replays the same way, and so on by induction. With side streams the schedule
// includes its record_stream and syncs, and only boundaries where no free waits on another
// stream's events and no live tensor is record_stream'd are compared: there the blocks (and
// which of them wait only for the next malloc to return) are the allocator's whole state.
#include "advisor/steady_state.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/block.h"
#include "sim/caching_allocator.h"
#include "sim/replay.h"

namespace oomcast::advisor {

using planner::EventInfo;
using planner::PlannedTrace;
using scenario::Scenario;

namespace {

constexpr int32_t kSetupEpoch = -1;

struct BlockState {
  uint64_t address, size, requested, stream;
  bool allocated, mapped, pending;
  bool operator==(const BlockState& other) const {
    return std::tie(address, size, requested, stream, allocated, mapped, pending) ==
           std::tie(other.address, other.size, other.requested, other.stream, other.allocated, other.mapped,
                    other.pending);
  }
};

std::vector<BlockState> layout_of(const sim::CachingAllocator& allocator) {
  std::vector<BlockState> blocks;
  for (const sim::Block* head : allocator.segment_heads()) {
    for (const sim::Block* block = head; block; block = block->next) {
      blocks.push_back(BlockState{block->address, block->size, block->allocated ? block->requested_size : 0,
                                  block->stream, block->allocated, block->mapped, block->pending_free});
    }
  }
  return blocks;
}

// Whether a free still waits on a stream's events (one a sync has completed only waits for
// the next malloc, which the layout's pending flag and the schedule determine).
bool events_outstanding(const sim::CachingAllocator& allocator) {
  for (const sim::Block* head : allocator.segment_heads()) {
    for (const sim::Block* block = head; block; block = block->next) {
      if (block->pending_free && block->event_count > 0) return true;
    }
  }
  return false;
}

// A schedule step with its slot replaced by its role, comparable across iterations.
struct Step {
  uint8_t kind;
  uint64_t first, second;
  bool operator==(const Step& other) const {
    return kind == other.kind && first == other.first && second == other.second;
  }
};

// Everything the watch keeps of one iteration's end.
struct EpochRecord {
  std::vector<BlockState> layout;
  std::vector<std::pair<uint64_t, uint64_t>> roles;  // (role, address), sorted
  std::vector<Step> steps;
  std::map<std::string, int64_t> stats;
  size_t events = 0;
  bool settled = true;  // no free waiting on stream events, no recorded live tensor
};

class SteadyStateWatch {
 public:
  SteadyStateWatch(const PlannedTrace& planned, sim::Replayer* replayer)
      : planned_(planned),
        replayer_(replayer),
        alloc_epoch_(planned.trace.slot_names.size(), kSetupEpoch),
        alloc_rank_(planned.trace.slot_names.size(), 0),
        live_position_(planned.trace.slot_names.size(), -1),
        recorded_(planned.trace.slot_names.size(), 0) {
    loop_phase_.assign(planned.names.size(), 0);
    for (size_t i = 0; i < planned.names.size(); ++i) {
      if (planned.names[i] == "setup") setup_phase_ = static_cast<int64_t>(i);
      if (planned.names[i].rfind("iter", 0) == 0) loop_phase_[i] = 1;
    }
  }

  void after_event(size_t index) {
    const sim::Event& event = planned_.trace.events[index];
    const int32_t epoch = epoch_of(index);
    // The closing phase ("end") belongs to the last iteration but is not repeated by others.
    const uint32_t phase = planned_.info[index].phase;
    const bool in_loop = phase < loop_phase_.size() && loop_phase_[phase];
    if (epoch != kSetupEpoch && in_loop) {
      ++events_in_epoch_;
      switch (event.kind) {
        case sim::EventKind::Alloc: current_.push_back(Step{0, event.bytes, event.stream}); break;
        case sim::EventKind::Free:
          current_.push_back(alloc_epoch_[event.slot] == epoch ? Step{1, alloc_rank_[event.slot], 0}
                                                               : Step{2, role_of(event.slot, epoch - 1), 0});
          break;
        case sim::EventKind::Mark: current_.push_back(Step{3, 0, 0}); break;
        case sim::EventKind::EmptyCache: current_.push_back(Step{4, 0, 0}); break;
        case sim::EventKind::RecordStream:
          current_.push_back(alloc_epoch_[event.slot] == epoch ? Step{5, alloc_rank_[event.slot], event.stream}
                                                               : Step{6, role_of(event.slot, epoch - 1), event.stream});
          if (live_position_[event.slot] >= 0) recorded_[event.slot] = 1;
          break;
        case sim::EventKind::StreamSync: current_.push_back(Step{7, event.stream, 0}); break;
        case sim::EventKind::DeviceSync: current_.push_back(Step{8, 0, 0}); break;
        case sim::EventKind::FreeRequested:
        case sim::EventKind::FreeCompleted:
        case sim::EventKind::CaptureBegin:
        case sim::EventKind::CaptureEnd:
        case sim::EventKind::GraphRelease:
        case sim::EventKind::CaptureJoin:
        case sim::EventKind::MemPoolEnter:
        case sim::EventKind::MemPoolExit:
        case sim::EventKind::MemPoolRelease:
          // Recorded frees and graph pools make the allocator's state depend on when streams synchronise, which
          // the block comparison below does not capture: such a plan is replayed in full. (record_stream and
          // syncs are compared as schedule steps; a boundary with a free still waiting is not compared.)
          broken_ = true;
          break;
      }
    }
    if (event.kind == sim::EventKind::Alloc) {
      alloc_epoch_[event.slot] = epoch;
      alloc_rank_[event.slot] = allocs_in_epoch_++;
      live_position_[event.slot] = static_cast<int64_t>(live_.size());
      live_.push_back(event.slot);
    } else if (event.kind == sim::EventKind::Free && live_position_[event.slot] >= 0) {
      recorded_[event.slot] = 0;  // its recorded streams are now the pending free's events
      const auto position = static_cast<size_t>(live_position_[event.slot]);
      live_[position] = live_.back();
      live_position_[live_[position]] = static_cast<int64_t>(position);
      live_.pop_back();
      live_position_[event.slot] = -1;
    }
    const bool last_of_epoch = index + 1 == planned_.trace.events.size() || epoch_of(index + 1) != epoch;
    if (last_of_epoch) close_epoch(epoch);
  }

  // The cycle found, with the last `period` records of the plan as its template.
  std::optional<SteadyIteration> found() const {
    if (broken_) return std::nullopt;
    std::optional<SteadyIteration> cycle = found_;
    if (!cycle) cycle = approximate();
    if (!cycle) return std::nullopt;
    SteadyIteration steady = *cycle;
    const auto epochs = static_cast<int32_t>(records_.size());
    steady.planned_iterations = epochs;
    for (int32_t epoch = epochs - steady.period; epoch < epochs; ++epoch) {
      steady.template_events.push_back(records_[static_cast<size_t>(epoch)].events);
      steady.template_stats.push_back(records_[static_cast<size_t>(epoch)].stats);
    }
    const auto& last = records_.back().stats;
    const auto& period_before = records_[static_cast<size_t>(epochs - 1 - steady.period)].stats;
    for (const auto& [key, value] : last) {
      auto before = period_before.find(key);
      steady.period_stats_delta[key] = value - (before == period_before.end() ? 0 : before->second);
    }
    return steady;
  }

 private:
  // The last two iterations ran the same schedule and left the same tensors alive (the same
  // roles and bytes), only not in the same places.
  std::optional<SteadyIteration> approximate() const {
    if (broken_ || records_.size() < 3) return std::nullopt;
    const EpochRecord& last = records_.back();
    const EpochRecord& before = records_[records_.size() - 2];
    if (!last.settled || !before.settled) return std::nullopt;
    if (last.steps != before.steps || last.roles.size() != before.roles.size()) return std::nullopt;
    for (size_t i = 0; i < last.roles.size(); ++i) {
      if (last.roles[i].first != before.roles[i].first) return std::nullopt;
    }
    auto allocated = [](const EpochRecord& record) {
      auto found = record.stats.find("allocated_bytes.all.current");
      return found == record.stats.end() ? int64_t{-1} : found->second;
    };
    if (allocated(last) != allocated(before)) return std::nullopt;
    SteadyIteration steady;
    steady.exact = false;
    steady.iteration = static_cast<int32_t>(records_.size() - 1);
    steady.period = 1;
    return steady;
  }

  int32_t epoch_of(size_t index) const {
    const EventInfo& info = planned_.info[index];
    return static_cast<int64_t>(info.phase) == setup_phase_ ? kSetupEpoch : info.iteration;
  }

  // Who a live slot is, seen from the boundary after `epoch`.
  uint64_t role_of(uint32_t slot, int32_t epoch) const {
    const int32_t born = alloc_epoch_[slot];
    if (born == kSetupEpoch || epoch - born >= 2) return (uint64_t{2} << 62) | slot;
    return (static_cast<uint64_t>(epoch - born) << 62) | alloc_rank_[slot];
  }

  void close_epoch(int32_t epoch) {
    allocs_in_epoch_ = 0;
    if (epoch == kSetupEpoch) {
      current_.clear();
      return;
    }
    if (epoch != static_cast<int32_t>(records_.size())) {  // iterations out of order: never settle
      broken_ = true;
    }
    EpochRecord record;
    record.events = events_in_epoch_;
    events_in_epoch_ = 0;
    record.stats = replayer_->allocator().stats().as_flat_map();
    record.steps = std::move(current_);
    current_.clear();
    // A boundary is comparable only when no free waits on a stream's events and no live tensor
    // carries a record_stream that its later free would turn into one: then the blocks (with
    // their pending flags) are the whole of the allocator's state.
    record.settled = !events_outstanding(replayer_->allocator()) &&
                     std::none_of(live_.begin(), live_.end(), [&](uint32_t slot) { return recorded_[slot] != 0; });
    if (!found_ && !broken_) {
      record.roles.reserve(live_.size());
      for (uint32_t slot : live_) record.roles.emplace_back(role_of(slot, epoch), replayer_->address_of(slot));
      std::sort(record.roles.begin(), record.roles.end());
      record.layout = layout_of(replayer_->allocator());
    }
    records_.push_back(std::move(record));
    if (!found_ && !broken_) look_for_cycle(epoch);
    // Only the last 2 x kMaxSteadyPeriod iterations are compared: drop the bulk of older ones.
    if (records_.size() > static_cast<size_t>(2 * kMaxSteadyPeriod)) {
      EpochRecord& old = records_[records_.size() - 1 - 2 * kMaxSteadyPeriod];
      old.layout = {};
      old.roles = {};
      old.steps = {};
    }
  }

  void look_for_cycle(int32_t epoch) {
    const EpochRecord& now = records_.back();
    for (int32_t period = 1; period <= kMaxSteadyPeriod; ++period) {
      if (epoch - 2 * period + 1 < 0) break;
      const EpochRecord& then = records_[static_cast<size_t>(epoch - period)];
      if (!now.settled || !then.settled || now.layout != then.layout || now.roles != then.roles) continue;
      bool same_schedules = true;
      for (int32_t back = 0; back < period && same_schedules; ++back) {
        same_schedules = records_[static_cast<size_t>(epoch - back)].steps ==
                         records_[static_cast<size_t>(epoch - period - back)].steps;
      }
      if (!same_schedules) continue;
      found_ = SteadyIteration{};
      found_->iteration = epoch;
      found_->period = period;
      return;
    }
  }

  const PlannedTrace& planned_;
  sim::Replayer* replayer_;
  int64_t setup_phase_ = -1;
  std::vector<uint8_t> loop_phase_;  // by phase name: 1 for "iterN/..." phases
  std::vector<int32_t> alloc_epoch_;
  std::vector<uint32_t> alloc_rank_;
  std::vector<int64_t> live_position_;
  std::vector<uint32_t> live_;
  std::vector<uint8_t> recorded_;  // live slots with a record_stream
  uint32_t allocs_in_epoch_ = 0;
  size_t events_in_epoch_ = 0;
  std::vector<Step> current_;
  std::vector<EpochRecord> records_;  // records_[epoch]
  bool broken_ = false;
  std::optional<SteadyIteration> found_;
};

std::string relabelled(const std::string& label, int32_t from, int64_t to) {
  const std::string prefix = "iter" + std::to_string(from) + "/";
  if (label.compare(0, prefix.size(), prefix) != 0) return label;
  return "iter" + std::to_string(to) + "/" + label.substr(prefix.size());
}

}  // namespace

bool steady_state_allowed(const Scenario& scenario) {
  return scenario.allocator.garbage_collection_threshold <= 0.0 && !scenario.loop.keep_losses_across_iterations;
}

std::optional<SteadyIteration> find_steady_iteration(const PlannedTrace& planned, const sim::AllocatorConfig& config,
                                                     const sim::DeviceModel& device, bool* hit_oom) {
  if (hit_oom) *hit_oom = false;
  if (planned.info.size() != planned.trace.events.size()) return std::nullopt;
  sim::ReplayOptions options;
  options.stop_at_first_oom = true;
  sim::Replayer replayer(config, device, options);
  SteadyStateWatch watch(planned, &replayer);
  replayer.on_event([&watch](size_t index) { watch.after_event(index); });
  sim::ReplayResult result = replayer.run(planned.trace);
  if (result.oom) {
    if (hit_oom) *hit_oom = true;
    return std::nullopt;
  }
  return watch.found();
}

void extend_to_all_iterations(Prediction& prediction, const SteadyIteration& steady, int64_t iterations) {
  const int64_t planned = steady.planned_iterations;
  const int64_t period = steady.period;
  if (iterations <= planned) return;
  // Iteration i >= planned replays the template iteration t = planned - period + (i - planned) % period.
  auto template_of = [&](int64_t i) { return planned - period + (i - planned) % period; };
  for (int64_t i = planned; i < iterations; ++i) {
    prediction.events += steady.template_events[static_cast<size_t>(template_of(i) - (planned - period))];
  }
  // memory_stats() after the last iteration: its template's, plus one period's growth per cycle.
  const int64_t last_template = template_of(iterations - 1);
  const int64_t cycles = (iterations - 1 - last_template) / period;
  std::map<std::string, int64_t> stats = steady.template_stats[static_cast<size_t>(last_template - (planned - period))];
  for (auto& [key, value] : stats) {
    auto delta = steady.period_stats_delta.find(key);
    if (delta != steady.period_stats_delta.end()) value += delta->second * cycles;
  }
  if (!prediction.memory_stats.empty() && prediction.fits) prediction.memory_stats = std::move(stats);

  // Phase rows: the template iterations' rows, renumbered, then the closing rows ("end").
  std::vector<PhaseRow> rows = std::move(prediction.phases);
  size_t tail = rows.size();
  while (tail > 0 && rows[tail - 1].name.rfind("iter", 0) != 0) --tail;
  std::vector<PhaseRow> extended(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(tail));
  for (int64_t i = planned; i < iterations; ++i) {
    const auto source = static_cast<int32_t>(template_of(i));
    for (size_t r = 0; r < tail; ++r) {
      if (rows[r].iteration != source || rows[r].name.rfind("iter", 0) != 0) continue;
      PhaseRow row = rows[r];
      row.name = relabelled(row.name, source, i);
      row.iteration = static_cast<int32_t>(i);
      extended.push_back(std::move(row));
    }
  }
  // The closing rows hold the state after the last iteration: after its template, which is
  // what the first row of the iteration after the template shows (or the closing row itself).
  std::optional<PhaseRow> after_template;
  if (last_template + 1 < planned) {
    for (size_t r = 0; r < tail && !after_template; ++r) {
      if (rows[r].iteration == last_template + 1) after_template = rows[r];
    }
  }
  for (size_t r = tail; r < rows.size(); ++r) {
    PhaseRow row = rows[r];
    row.iteration = static_cast<int32_t>(iterations - 1);
    if (after_template) {
      row.allocated_bytes = row.peak_allocated_bytes = after_template->allocated_bytes;
      row.reserved_bytes = row.peak_reserved_bytes = after_template->reserved_bytes;
    }
    extended.push_back(std::move(row));
  }
  prediction.phases = std::move(extended);
  prediction.steady_state.extrapolated = true;
  prediction.steady_state.exact = steady.exact;
  prediction.steady_state.from_iteration = steady.iteration;
  prediction.steady_state.period = steady.period;
  prediction.steady_state.planned_iterations = planned;
  prediction.steady_state.iterations = iterations;
}

}  // namespace oomcast::advisor
