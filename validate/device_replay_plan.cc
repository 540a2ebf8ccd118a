// Builds the cudaMalloc/cudaFree/probe lists of device_replay_plan.h from a trace.
#include "validate/device_replay_plan.h"

#include <algorithm>
#include <unordered_map>

#include "base/input_error.h"
#include "sim/replay.h"

namespace oomcast::validate {

namespace {

DeviceAction probe(const std::string& label, size_t event_index) {
  DeviceAction action;
  action.kind = DeviceAction::Kind::Probe;
  action.label = label;
  action.event_index = event_index;
  return action;
}

}  // namespace

const char* replay_mode_name(ReplayMode mode) { return mode == ReplayMode::Segments ? "segments" : "raw"; }

DeviceReplayPlan plan_segment_replay(const sim::Trace& trace, const sim::AllocatorConfig& config) {
  if (config.expandable_segments) {
    throw InputError({}, "expandable_segments",
                     "cuda_replay --segments does not act out expandable segments (their map/unmap decisions need "
                     "the CUDA virtual memory API); replay without expandable_segments or use --raw");
  }
  sim::ReplayOptions options;
  options.record_segment_decisions = true;
  options.stop_at_first_oom = true;
  sim::ReplayResult result = sim::replay(trace, config, sim::DeviceModel::unlimited(), options);

  DeviceReplayPlan plan;
  plan.mode = ReplayMode::Segments;
  plan.predicted_peak_reserved_bytes = result.peak_reserved_bytes;
  size_t next_decision = 0;
  auto emit_decisions_before = [&](size_t event_index) {
    while (next_decision < result.segment_decisions.size() &&
           result.segment_decisions[next_decision].event_index < event_index) {
      const sim::SegmentDecision& decision = result.segment_decisions[next_decision++];
      DeviceAction action;
      action.handle = decision.address;
      action.bytes = decision.size;
      action.event_index = decision.event_index;
      if (decision.kind == sim::SegmentDecision::Kind::Alloc) {
        action.kind = DeviceAction::Kind::Malloc;
        ++plan.mallocs;
      } else if (decision.kind == sim::SegmentDecision::Kind::Free) {
        action.kind = DeviceAction::Kind::Free;
        ++plan.frees;
      } else {
        throw InputError({}, "", "the simulator mapped or unmapped expandable-segment memory; cuda_replay cannot act it out");
      }
      plan.actions.push_back(action);
    }
  };
  for (const sim::MarkReport& mark : result.marks) {
    emit_decisions_before(mark.event_index);
    DeviceAction action = probe(mark.label, mark.event_index);
    action.predicted_allocated_bytes = mark.allocated_bytes;
    action.predicted_reserved_bytes = mark.reserved_bytes;
    action.predicted_phase_peak_reserved_bytes = mark.peak_reserved_bytes;
    plan.actions.push_back(action);
  }
  emit_decisions_before(trace.events.size());
  DeviceAction end = probe("end", trace.events.size());
  end.predicted_allocated_bytes = static_cast<uint64_t>(result.final_stats.allocated_bytes.all().current);
  end.predicted_reserved_bytes = static_cast<uint64_t>(result.final_stats.reserved_bytes.all().current);
  end.predicted_phase_peak_reserved_bytes = end.predicted_reserved_bytes;
  plan.actions.push_back(end);
  return plan;
}

DeviceReplayPlan plan_raw_replay(const sim::Trace& trace) {
  DeviceReplayPlan plan;
  plan.mode = ReplayMode::Raw;
  std::unordered_map<uint32_t, uint64_t> live;  // slot -> bytes
  uint64_t live_bytes = 0;
  size_t open_probe = 0;
  bool has_probe = false;
  auto close_probe_peak = [&](uint64_t bytes) {
    if (has_probe) {
      auto& peak = plan.actions[open_probe].predicted_phase_peak_reserved_bytes;
      peak = std::max(peak, bytes);
    }
    plan.predicted_peak_reserved_bytes = std::max(plan.predicted_peak_reserved_bytes, bytes);
  };
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const sim::Event& event = trace.events[i];
    switch (event.kind) {
      case sim::EventKind::Alloc: {
        if (event.bytes == 0) break;  // cudaMalloc(0) hands out nothing; PyTorch skips it too
        if (!live.emplace(event.slot, event.bytes).second) {
          throw InputError({"", 0, 0, static_cast<int64_t>(i)}, "", "slot allocated twice");
        }
        DeviceAction action;
        action.kind = DeviceAction::Kind::Malloc;
        action.handle = event.slot;
        action.bytes = event.bytes;
        action.event_index = i;
        plan.actions.push_back(action);
        ++plan.mallocs;
        live_bytes += event.bytes;
        close_probe_peak(live_bytes);
        break;
      }
      case sim::EventKind::Free:
      case sim::EventKind::FreeCompleted: {  // a deferred free returns the memory when it completes
        auto found = live.find(event.slot);
        if (found == live.end()) break;  // a zero-byte allocation, never made
        DeviceAction action;
        action.kind = DeviceAction::Kind::Free;
        action.handle = event.slot;
        action.event_index = i;
        plan.actions.push_back(action);
        ++plan.frees;
        live_bytes -= found->second;
        live.erase(found);
        break;
      }
      case sim::EventKind::Mark: {
        DeviceAction action = probe(trace.strings[event.tag], i);
        action.predicted_allocated_bytes = live_bytes;
        action.predicted_reserved_bytes = live_bytes;
        action.predicted_phase_peak_reserved_bytes = live_bytes;
        plan.actions.push_back(action);
        open_probe = plan.actions.size() - 1;
        has_probe = true;
        break;
      }
      case sim::EventKind::EmptyCache:    // nothing is cached without the allocator
      case sim::EventKind::FreeRequested:  // the memory stays in use until FreeCompleted
      case sim::EventKind::RecordStream:
      case sim::EventKind::StreamSync:
      case sim::EventKind::DeviceSync:
      case sim::EventKind::CaptureBegin:  // graph pools are the simulator's business only
      case sim::EventKind::CaptureEnd:
      case sim::EventKind::GraphRelease:
      case sim::EventKind::CaptureJoin:
      case sim::EventKind::MemPoolEnter:  // so are user pools
      case sim::EventKind::MemPoolExit:
      case sim::EventKind::MemPoolRelease:
        break;
    }
  }
  DeviceAction end = probe("end", trace.events.size());
  end.predicted_allocated_bytes = live_bytes;
  end.predicted_reserved_bytes = live_bytes;
  end.predicted_phase_peak_reserved_bytes = live_bytes;
  plan.actions.push_back(end);
  return plan;
}

}  // namespace oomcast::validate
