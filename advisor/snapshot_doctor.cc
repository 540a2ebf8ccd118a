// diagnose_snapshot(): one unlimited replay reproduces the recording (allocated and reserved
// after every event), the failure is placed (the recorded `oom` entry, or the first
// allocation that fails on the given device), and the settings are re-simulated by replaying
// the same recording again with the failing request retried at its place.
#include "advisor/snapshot_doctor.h"

#include <algorithm>

#include <fmt/format.h>

#include "advisor/byte_text.h"
#include "base/input_error.h"
#include "sim/allocator_config.h"
#include "sim/caching_allocator.h"
#include "sim/size_class.h"

namespace oomcast::advisor {
namespace {

// The device a limit of `usable` allocator bytes means, keeping what the given device holds
// outside the allocator.
sim::DeviceModel device_with_usable(uint64_t usable, const std::optional<sim::DeviceModel>& given) {
  sim::DeviceModel device = given ? *given : sim::DeviceModel{};
  device.total_bytes = usable + device.context_bytes + device.other_process_bytes;
  device.memory_fraction = 0.0;
  return device;
}

// The trace event after which entry `entry` happened: the last event from an earlier entry.
size_t event_before_entry(const std::vector<int64_t>& entry_of_event, int64_t entry) {
  auto after = std::lower_bound(entry_of_event.begin(), entry_of_event.end(), entry);
  if (after == entry_of_event.begin()) return SIZE_MAX;
  return static_cast<size_t>(after - entry_of_event.begin()) - 1;
}

// The start of the phase run holding `event`: an empty_cache() there is the one a user would
// put at that phase boundary. SIZE_MAX when the run starts the recording.
size_t boundary_before(const RecordingTimeline& timeline, size_t event, std::string* label) {
  for (const PhaseRun& run : timeline.runs) {
    if (event < run.first_event || event > run.last_event) continue;
    if (run.first_event == 0) return SIZE_MAX;
    *label = run.label();
    return run.first_event - 1;
  }
  return SIZE_MAX;
}

}  // namespace

sim::AllocatorConfig with_setting(const sim::AllocatorConfig& recorded, const std::string& setting) {
  sim::AllocatorConfig parsed = sim::parse_alloc_conf(setting, recorded);
  sim::AllocatorConfig out = recorded;
  if (setting.find("expandable_segments") != std::string::npos) out.expandable_segments = parsed.expandable_segments;
  if (setting.find("max_split_size_mb") != std::string::npos) out.max_split_size = parsed.max_split_size;
  if (setting.find("garbage_collection_threshold") != std::string::npos)
    out.garbage_collection_threshold = parsed.garbage_collection_threshold;
  if (setting.find("roundup_power2_divisions") != std::string::npos)
    out.roundup_power2_divisions = parsed.roundup_power2_divisions;
  out.source_text = recorded.source_text.empty() ? setting : recorded.source_text + "," + setting;
  return out;
}

FixTrial replay_fix(const std::string& name, const sim::Snapshot& snapshot, int device_index, const FixReplay& setup) {
  FixTrial trial;
  const sim::DeviceModel device = setup.device ? *setup.device : sim::DeviceModel::unlimited();
  trial.usable_bytes = setup.device ? device.usable_bytes() : 0;
  bool request_failed = false;
  uint64_t peak_reserved = 0;
  auto observer = [&](size_t event, sim::Replayer& replayer) {
    sim::CachingAllocator& allocator = replayer.allocator();
    if (event == setup.empty_cache_after) allocator.empty_cache();
    if (event == setup.request_after && setup.request > 0) {
      sim::Block* block = allocator.malloc(setup.request, setup.stream);
      peak_reserved = std::max<uint64_t>(peak_reserved, allocator.stats().reserved_bytes.all().current);
      // What the job did with the tensor after is not recorded: it is given back at once.
      if (block) {
        allocator.free(block);
      } else {
        request_failed = true;
      }
    }
    peak_reserved = std::max<uint64_t>(peak_reserved, allocator.stats().reserved_bytes.all().current);
  };
  if (setup.trace_from_empty) {
    sim::ReplayOptions options;
    options.stop_at_first_oom = false;
    sim::Replayer replayer(setup.config, device, options);
    replayer.on_event([&](size_t event) { observer(event, replayer); });
    trial.ooms = replayer.run(*setup.trace_from_empty).num_ooms;
  } else {
    sim::SnapshotReplayReport report =
        sim::replay_snapshot(snapshot, setup.config, name, device_index, false, observer, device);
    trial.ooms = report.replay.num_ooms;
    peak_reserved = std::max(peak_reserved, report.initial_reserved_bytes);
  }
  trial.ooms += request_failed ? 1 : 0;
  trial.fits = trial.ooms == 0;
  trial.peak_reserved_bytes = peak_reserved;
  return trial;
}

DoctorReport diagnose_snapshot(const std::string& name, const sim::Snapshot& snapshot, const SnapshotFrameTable& frames,
                               const DoctorOptions& options) {
  DoctorReport out;
  out.name = name;
  out.device_index = options.device_index;
  out.has_frames = frames.has_frames();
  const sim::AllocatorConfig config = sim::snapshot_allocator_config(snapshot);
  out.recorded_alloc_conf = config.source_text;

  // The recording as it ran: allocated, reserved and split-off free bytes after each event.
  std::vector<uint64_t> allocated_after, reserved_after, inactive_split_after;
  sim::SnapshotReplayReport base = sim::replay_snapshot(
      snapshot, config, name, options.device_index, false, [&](size_t, sim::Replayer& replayer) {
        const sim::MemoryStats& stats = replayer.allocator().stats();
        allocated_after.push_back(static_cast<uint64_t>(stats.allocated_bytes.all().current));
        reserved_after.push_back(static_cast<uint64_t>(stats.reserved_bytes.all().current));
        inactive_split_after.push_back(static_cast<uint64_t>(stats.inactive_split_bytes.all().current));
      });
  out.reproduced = !base.first_mismatch;
  out.peak_allocated_bytes = base.replay.peak_allocated_bytes;
  out.peak_reserved_bytes = std::max(base.replay.peak_reserved_bytes, base.initial_reserved_bytes);
  out.peak_event = base.replay.peak_allocated_event;
  // Before the first event: what it left allocated, less what it allocated (a free first
  // leaves the freed block out: off by one block at most).
  uint64_t initial_allocated = 0;
  if (!allocated_after.empty()) {
    const sim::Event& first = base.trace.events.front();
    uint64_t added = first.kind == sim::EventKind::Alloc ? sim::round_size(first.bytes, config) : 0;
    initial_allocated = allocated_after.front() - std::min(allocated_after.front(), added);
  }
  out.initial_reserved_bytes = base.initial_reserved_bytes;
  out.timeline = split_recording(base.trace, base.entry_of_event, frames, allocated_after, initial_allocated);
  auto entry_of = [&](size_t event) {
    return event < base.entry_of_event.size() ? base.entry_of_event[event] : int64_t{-1};
  };
  if (out.peak_event < out.timeline.event_phase.size()) {
    out.peak_phase = out.timeline.event_phase[out.peak_event];
    out.peak_iteration = out.timeline.event_iteration[out.peak_event];
  }
  out.peak_site = call_site_of(frames, entry_of(out.peak_event));

  // Where it failed.
  static const std::vector<sim::SnapshotTraceEntry> no_entries;
  const auto& entries = options.device_index >= 0 && static_cast<size_t>(options.device_index) < snapshot.device_traces.size()
                            ? snapshot.device_traces[static_cast<size_t>(options.device_index)]
                            : no_entries;
  auto oom_entry = std::find_if(entries.begin(), entries.end(), [](const sim::SnapshotTraceEntry& entry) {
    return entry.action == sim::SnapshotTraceEntry::Action::Oom;
  });
  uint64_t request_stream = 0;
  if (options.device) {
    out.device_total_bytes = options.device->total_bytes;
    out.usable_bytes = options.device->usable_bytes();
  }
  if (oom_entry != entries.end()) {
    DoctorFailure failure;
    failure.recorded = true;
    failure.entry = oom_entry - entries.begin();
    failure.after_event = event_before_entry(base.entry_of_event, failure.entry);
    failure.request_bytes = oom_entry->size;
    failure.device_free_bytes = oom_entry->addr;
    request_stream = oom_entry->stream;
    if (failure.after_event != SIZE_MAX) {
      failure.allocated_bytes = allocated_after[failure.after_event];
      failure.reserved_bytes = reserved_after[failure.after_event];
      failure.inactive_split_bytes = inactive_split_after[failure.after_event];
    } else {
      failure.reserved_bytes = base.initial_reserved_bytes;
    }
    // What the allocator could reach when it failed: what it held plus what was free.
    uint64_t reachable = failure.reserved_bytes + failure.device_free_bytes;
    if (options.device) {
      out.outside_allocator_bytes = options.device->total_bytes > reachable ? options.device->total_bytes - reachable : 0;
    }
    out.usable_bytes = reachable;
    out.failure = failure;
  } else if (options.device) {
    std::vector<uint64_t> reserved_bounded;
    sim::SnapshotReplayReport bounded = sim::replay_snapshot(
        snapshot, config, name, options.device_index, false,
        [&](size_t, sim::Replayer& replayer) {
          reserved_bounded.push_back(static_cast<uint64_t>(replayer.allocator().stats().reserved_bytes.all().current));
        },
        *options.device);
    if (bounded.replay.oom) {
      DoctorFailure failure;
      const size_t event = bounded.replay.oom->event_index;
      failure.entry = entry_of(event);
      failure.after_event = event == 0 ? SIZE_MAX : event - 1;
      failure.request_bytes = bounded.replay.oom->requested_bytes;
      if (event > 0) {
        failure.allocated_bytes = allocated_after[event - 1];
        failure.reserved_bytes = reserved_bounded[event - 1];
      }
      failure.inactive_split_bytes = event > 0 ? inactive_split_after[event - 1] : 0;
      out.failure = failure;
    }
  }
  if (out.failure) {
    DoctorFailure& failure = *out.failure;
    size_t at = failure.after_event == SIZE_MAX ? 0 : failure.after_event;
    StepPhase own = phase_of_entry(frames, failure.entry);
    failure.phase = own != StepPhase::Unknown || at >= out.timeline.event_phase.size() ? own : out.timeline.event_phase[at];
    failure.iteration = at < out.timeline.event_iteration.size() ? out.timeline.event_iteration[at] : 0;
    failure.site = call_site_of(frames, failure.entry);
  }

  out.analysis = analyze_snapshot(name, snapshot, config, options.device_index, base, frames);
  out.patterns = find_patterns(out, base, frames, allocated_after);
  if (!options.simulate_fixes) return out;

  // Re-simulation. With a recorded failure the request is retried where it failed; with a
  // failure on the given device the recording's own allocation fails or not.
  const bool limited = out.usable_bytes > 0;
  FixReplay setup;
  setup.config = config;
  if (base.starts_empty) setup.trace_from_empty = &base.trace;
  if (limited) setup.device = device_with_usable(out.usable_bytes, options.device);
  if (out.failure && out.failure->recorded) {
    setup.request_after = out.failure->after_event;
    setup.request = out.failure->request_bytes;
    setup.stream = request_stream;
  }
  auto trial = [&](const std::string& label, const std::string& setting, FixReplay replay) {
    if (!setting.empty()) replay.config = with_setting(config, setting);
    FixTrial result;
    try {
      result = replay_fix(name, snapshot, options.device_index, replay);
    } catch (const InputError&) {
      // The rebuilt start of a mid-run window holds blocks rounded the recorded way.
      out.not_simulated.push_back(label + ": the window starts mid-run and its rebuilt blocks do not fit this setting");
      return;
    }
    result.name = label;
    result.alloc_conf = setting;
    FixReplay unlimited = replay;
    unlimited.device.reset();
    // What it needs: its peak when it fits; else the peak of the same replay without a limit.
    result.needed_bytes = result.fits ? result.peak_reserved_bytes
                                      : replay_fix(name, snapshot, options.device_index, unlimited).peak_reserved_bytes;
    int64_t usable = static_cast<int64_t>(result.usable_bytes);
    result.headroom_bytes = !limited ? 0
                            : result.fits ? usable - static_cast<int64_t>(result.peak_reserved_bytes)
                                          : usable - static_cast<int64_t>(result.needed_bytes);
    out.fixes.push_back(result);
  };
  trial("the recorded settings", "", setup);
  trial("expandable_segments:True", "expandable_segments:True", setup);
  uint64_t request_mib = ((out.failure ? out.failure->request_bytes : 0) + (1ull << 20) - 1) >> 20;
  for (uint64_t split_mib : {uint64_t{128}, std::max<uint64_t>(request_mib + 1, 512)}) {
    std::string setting = fmt::format("max_split_size_mb:{}", split_mib);
    trial(setting, setting, setup);
  }
  {
    // garbage_collection_threshold acts only with a memory fraction (spec §3.4).
    FixReplay gc = setup;
    if (gc.device) gc.device->memory_fraction = 1.0;
    trial("garbage_collection_threshold:0.8 (with set_per_process_memory_fraction(1.0))", "garbage_collection_threshold:0.8", gc);
  }
  trial("roundup_power2_divisions:4", "roundup_power2_divisions:4", setup);
  size_t failing_event = out.failure ? (out.failure->recorded ? out.failure->after_event : out.failure->after_event + 1)
                                     : out.peak_event;
  std::string boundary_label;
  size_t boundary = failing_event == SIZE_MAX ? SIZE_MAX : boundary_before(out.timeline, failing_event, &boundary_label);
  if (boundary != SIZE_MAX) {
    FixReplay flush = setup;
    flush.empty_cache_after = boundary;
    trial("torch.cuda.empty_cache() before " + boundary_label, "", flush);
  }
  // Fragmentation is the cause only if the setting that removes it avoids the OOM.
  const FixTrial* expandable = out.fixes.size() > 1 && out.fixes[1].alloc_conf == "expandable_segments:True" ? &out.fixes[1] : nullptr;
  for (DoctorPattern& pattern : out.patterns) {
    if (pattern.name != "fragmentation" || !limited || !expandable || expandable->fits) continue;
    pattern.causes_failure = false;
    pattern.evidence += fmt::format("; but with expandable segments it is still {} short, so it is not what ran out",
                                    byte_text(-expandable->headroom_bytes));
  }
  std::stable_sort(out.patterns.begin(), out.patterns.end(),
                   [](const DoctorPattern& a, const DoctorPattern& b) { return a.causes_failure && !b.causes_failure; });
  if (limited && !out.fixes.empty() && !out.fixes.front().fits) {
    // The device it needs: the recorded settings' peak without a limit, checked on a device
    // of exactly that size.
    uint64_t needed = out.fixes.front().needed_bytes;
    FixReplay larger = setup;
    larger.device = device_with_usable(needed, options.device);
    trial(fmt::format("a device with {} usable ({} more)", byte_text(needed), byte_text(needed - std::min(needed, out.usable_bytes))),
          "", larger);
  } else if (limited && !out.fixes.empty() && out.fixes.front().fits && out.fixes.front().needed_bytes < out.usable_bytes) {
    // A run that fits: the smallest device it needs, checked the same way (a cheaper GPU, or
    // room to share this one).
    uint64_t needed = out.fixes.front().needed_bytes;
    FixReplay smaller = setup;
    smaller.device = device_with_usable(needed, options.device);
    trial(fmt::format("a device with {} usable ({} less)", byte_text(needed), byte_text(out.usable_bytes - needed)), "",
          smaller);
  }
  return out;
}

}  // namespace oomcast::advisor
