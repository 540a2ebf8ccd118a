// predict(): plan, replay, then one walk over the trace to attribute the live bytes at the
// peak to tensor categories. On the cpu device there is no caching allocator: the walk itself
// is the accounting (every block is exactly its request, reserved == allocated).
#include "advisor/auto_checkpointing.h"
#include "advisor/predict.h"

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cstring>
#include <limits>

#include "advisor/steady_state.h"
#include "sim/replay.h"

namespace oomcast::advisor {

using planner::EventInfo;
using planner::PlannedTrace;
using planner::TensorCategory;
using planner::plan_steps;
using scenario::CheckpointMode;
using scenario::DeviceConfig;
using scenario::Scenario;

namespace {

const std::string& name_at(const PlannedTrace& planned, uint32_t index) {
  static const std::string empty;
  return index < planned.names.size() ? planned.names[index] : empty;
}

ScheduleLocation location_of(const PlannedTrace& planned, size_t event_index) {
  ScheduleLocation where;
  where.event_index = event_index;
  if (event_index >= planned.info.size()) return where;
  const EventInfo& info = planned.info[event_index];
  where.iteration = info.iteration;
  where.phase = name_at(planned, info.phase);
  where.op = name_at(planned, info.op);
  where.tensor = name_at(planned, info.tensor);
  where.category = info.category;
  return where;
}

TensorCategory category_of(const PlannedTrace& planned, size_t event_index) {
  return event_index < planned.info.size() ? planned.info[event_index].category : TensorCategory::Activation;
}

// Requested live bytes per slot and per category, event by event.
class LiveTensors {
 public:
  explicit LiveTensors(const PlannedTrace& planned)
      : planned_(planned),
        bytes_(planned.trace.slot_names.size(), 0),
        categories_(planned.trace.slot_names.size(), TensorCategory::Activation) {}

  // Applies event `index` (marks and empty_cache change nothing).
  void apply(size_t index) {
    const sim::Event& event = planned_.trace.events[index];
    if (event.slot >= bytes_.size()) grow(event.slot + 1);
    if (event.kind == sim::EventKind::Alloc) {
      TensorCategory category = category_of(planned_, index);
      bytes_[event.slot] = event.bytes;
      categories_[event.slot] = category;
      by_category_[static_cast<size_t>(category)] += event.bytes;
      total_ += event.bytes;
    } else if (event.kind == sim::EventKind::Free) {
      sim::Bytes bytes = bytes_[event.slot];
      by_category_[static_cast<size_t>(categories_[event.slot])] -= bytes;
      total_ -= bytes;
      bytes_[event.slot] = 0;
    }
  }

  sim::Bytes total() const { return total_; }
  const std::array<sim::Bytes, kNumTensorCategories>& by_category() const { return by_category_; }

 private:
  void grow(size_t size) {
    bytes_.resize(size, 0);
    categories_.resize(size, TensorCategory::Activation);
  }

  const PlannedTrace& planned_;
  std::vector<sim::Bytes> bytes_;
  std::vector<TensorCategory> categories_;
  std::array<sim::Bytes, kNumTensorCategories> by_category_{};
  sim::Bytes total_ = 0;
};

sim::Bytes usable_bytes(const DeviceConfig& device) {
  const sim::DeviceModel& model = device.model;
  sim::Bytes outside = model.context_bytes + model.other_process_bytes;
  sim::Bytes usable = model.total_bytes > outside ? model.total_bytes - outside : 0;
  if (model.memory_fraction > 0.0) {
    // PyTorch caps reserved memory at fraction x total (allowed_memory_maximum).
    auto allowed = static_cast<sim::Bytes>(model.memory_fraction * static_cast<double>(model.total_bytes));
    usable = std::min(usable, allowed);
  }
  return usable;
}

std::vector<PhaseRow> phase_rows(const PlannedTrace& planned, const std::vector<sim::MarkReport>& marks) {
  std::vector<PhaseRow> rows;
  rows.reserve(marks.size());
  for (const auto& mark : marks) {
    PhaseRow row;
    row.name = mark.label;
    row.iteration = location_of(planned, mark.event_index).iteration;
    row.allocated_bytes = mark.allocated_bytes;
    row.reserved_bytes = mark.reserved_bytes;
    row.peak_allocated_bytes = mark.peak_allocated_bytes;
    row.peak_reserved_bytes = mark.peak_reserved_bytes;
    rows.push_back(row);
  }
  return rows;
}

// Fills the peak fields from a replay result, walking the trace once to the peak event.
void take_peak(const PlannedTrace& planned, const sim::ReplayResult& result, Prediction& prediction) {
  prediction.peak_allocated_bytes = result.peak_allocated_bytes;
  prediction.peak_reserved_bytes = result.peak_reserved_bytes;
  prediction.reserved_at_peak_bytes = result.reserved_at_peak_allocated;
  prediction.inactive_split_at_peak_bytes = result.inactive_split_at_peak_allocated;
  prediction.peak_at = location_of(planned, result.peak_allocated_event);
  prediction.phases = phase_rows(planned, result.marks);
  LiveTensors live(planned);
  size_t end = std::min(result.peak_allocated_event + 1, planned.trace.events.size());
  for (size_t i = 0; i < end; ++i) live.apply(i);
  prediction.breakdown = live.by_category();
  prediction.rounding_bytes = result.peak_allocated_bytes > live.total() ? result.peak_allocated_bytes - live.total() : 0;
}

// The cpu device: live tensor bytes straight from the trace, as PyTorch's CPU allocator has
// no cache and no rounding that would make a block bigger than its request.
void predict_exact(const PlannedTrace& planned, Prediction& prediction) {
  const sim::Trace& trace = planned.trace;
  LiveTensors live(planned);
  std::vector<sim::MarkReport> marks;
  sim::Bytes peak = 0;
  size_t peak_event = 0;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const sim::Event& event = trace.events[i];
    if (event.kind == sim::EventKind::Mark) {
      sim::MarkReport mark;
      mark.label = event.tag < trace.strings.size() ? trace.strings[event.tag] : std::string();
      mark.event_index = i;
      mark.allocated_bytes = mark.reserved_bytes = live.total();
      mark.peak_allocated_bytes = mark.peak_reserved_bytes = live.total();
      marks.push_back(mark);
      continue;
    }
    if (event.kind == sim::EventKind::Alloc && live.total() + event.bytes > prediction.usable_bytes &&
        prediction.fits) {
      // The message of c10's DefaultCPUAllocator when malloc fails.
      prediction.fits = false;
      prediction.oom_at = location_of(planned, i);
      prediction.oom_requested_bytes = event.bytes;
      prediction.oom_message = "DefaultCPUAllocator: can't allocate memory: you tried to allocate " +
                               std::to_string(event.bytes) + " bytes. Error code 12 (" + std::strerror(ENOMEM) + ")";
    }
    live.apply(i);
    if (!marks.empty()) {
      marks.back().peak_allocated_bytes = std::max(marks.back().peak_allocated_bytes, live.total());
      marks.back().peak_reserved_bytes = marks.back().peak_allocated_bytes;
    }
    if (live.total() > peak) {
      peak = live.total();
      peak_event = i;
      prediction.breakdown = live.by_category();
    }
  }
  prediction.phases = phase_rows(planned, marks);
  prediction.peak_allocated_bytes = prediction.peak_reserved_bytes = peak;
  prediction.reserved_at_peak_bytes = peak;
  prediction.peak_at = location_of(planned, peak_event);
}

}  // namespace

Prediction predict_planned(const Scenario& scenario, const PlannedTrace& planned) {
  Prediction prediction;
  prediction.scenario = scenario;
  prediction.parameters = planned.parameter_count;
  prediction.events = planned.trace.events.size();
  prediction.parallel = planned.parallel;
  prediction.activation_offload_host_bytes = planned.activation_offload_host_bytes;
  prediction.step_time = planned.step_time;
  prediction.device_total_bytes = scenario.device.model.total_bytes;
  prediction.usable_bytes = usable_bytes(scenario.device);
  if (scenario.device.is_cpu) {
    prediction.exact_accounting = true;
    predict_exact(planned, prediction);
    return prediction;
  }

  sim::ReplayOptions options;
  options.stop_at_first_oom = true;
  sim::ReplayResult result = sim::replay(planned.trace, scenario.allocator, scenario.device.model, options);
  prediction.memory_stats = result.final_stats.as_flat_map();
  if (!result.oom) {
    take_peak(planned, result, prediction);
    return prediction;
  }
  prediction.fits = false;
  prediction.oom_message = result.oom->message;
  prediction.oom_requested_bytes = result.oom->requested_bytes;
  prediction.oom_at = location_of(planned, result.oom->event_index);
  // Replay again on a device big enough for the whole step, to report what it needs.
  sim::DeviceModel unbounded = sim::DeviceModel::unlimited();
  unbounded.context_bytes = scenario.device.model.context_bytes;
  unbounded.other_process_bytes = scenario.device.model.other_process_bytes;
  take_peak(planned, sim::replay(planned.trace, scenario.allocator, unbounded, options), prediction);
  return prediction;
}

namespace {

// The device the reported peaks come from: the scenario's when the job fits, an unbounded
// one (as predict_planned's second replay) when it does not.
sim::DeviceModel demand_device(const Scenario& scenario) {
  sim::DeviceModel unbounded = sim::DeviceModel::unlimited();
  unbounded.context_bytes = scenario.device.model.context_bytes;
  unbounded.other_process_bytes = scenario.device.model.other_process_bytes;
  return unbounded;
}

}  // namespace

Prediction predict(const Scenario& scenario) {
  if (scenario.checkpointing.mode == CheckpointMode::Auto && scenario.checkpointing.units.empty()) {
    // Resolved: units set, or mode none. The choice's last round simulated the resolved
    // scenario already; its prediction is this one.
    std::optional<Prediction> simulated;
    Scenario resolved = resolve_auto_checkpointing(scenario, &simulated);
    return simulated ? std::move(*simulated) : predict(resolved);
  }
  if (scenario.iterations <= kPlanWholeUpToIterations || !steady_state_allowed(scenario)) {
    return predict_planned(scenario, plan_steps(scenario));
  }
  for (int64_t window : kSteadyStateWindows) {
    const bool last_window = window >= kSteadyStateWindows[std::size(kSteadyStateWindows) - 1];
    if (window >= scenario.iterations) break;
    Scenario prefix = scenario;
    prefix.iterations = window;
    PlannedTrace planned = plan_steps(prefix);
    // The replay whose figures the prediction reports must be the steady one: the device's
    // when the job fits, else the unbounded demand replay (an OOM inside the window stands
    // for every longer run). The cpu device has no caching allocator: an unbounded one stands
    // in, as its allocated blocks are the live tensors.
    bool hit_oom = false;
    std::optional<SteadyIteration> steady = find_steady_iteration(
        planned, scenario.allocator, scenario.device.is_cpu ? demand_device(scenario) : scenario.device.model,
        &hit_oom);
    if (hit_oom) steady = find_steady_iteration(planned, scenario.allocator, demand_device(scenario));
    // An approximate steady state only in the last window: a longer one may still settle.
    if (steady && (steady->exact || last_window)) {
      Prediction prediction = predict_planned(prefix, planned);
      prediction.scenario = scenario;
      extend_to_all_iterations(prediction, *steady, scenario.iterations);
      return prediction;
    }
  }
  return predict_planned(scenario, plan_steps(scenario));  // never settled: every iteration, within the work limit
}

}  // namespace oomcast::advisor
