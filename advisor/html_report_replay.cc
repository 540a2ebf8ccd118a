// Pictures of a replay. A trace names its events by id and tag; a snapshot by its device
// trace entries (and their frames when the caller has them). Categories are what the
// allocator alone knows: allocated, cached, and on a sized device what is outside it.
#include "advisor/html_report_replay.h"

#include <fmt/format.h>

#include "advisor/byte_text.h"

namespace oomcast::advisor {
namespace {

constexpr size_t kTimelineBuckets = 1600;

std::vector<HtmlPhase> phases_of(const sim::ReplayResult& result) {
  std::vector<HtmlPhase> phases;
  for (const sim::MarkReport& mark : result.marks) phases.push_back({mark.label, mark.event_index});
  return phases;
}

void fill_peaks(HtmlReport& report, const sim::ReplayResult& result) {
  report.fits = !result.oom;
  report.oom_message = result.oom ? result.oom->message : "";
  if (result.oom) report.oom_event = result.oom->event_index;
  report.peak_allocated_bytes = result.peak_allocated_bytes;
  report.peak_reserved_bytes = result.peak_reserved_bytes;
  report.peak_event = result.peak_allocated_event;
  report.phases = phases_of(result);
  report.categories.push_back({"allocated", result.peak_allocated_bytes});
  report.categories.push_back({"cached, not allocated", result.reserved_at_peak_allocated > result.peak_allocated_bytes
                                                             ? result.reserved_at_peak_allocated - result.peak_allocated_bytes
                                                             : 0});
  report.verdict = result.oom ? fmt::format("OOM at event {}: {}", result.oom->event_index, result.oom->message)
                              : fmt::format("no OOM: peak allocated {}, peak reserved {}",
                                            byte_text(result.peak_allocated_bytes), byte_text(result.peak_reserved_bytes));
}

void take_recording(HtmlReport& report, TimelineRecorder& recorder) {
  TimelineRecording recording = recorder.finish();
  report.timeline = std::move(recording.buckets);
  report.segments = std::move(recording.segments);
}

}  // namespace

HtmlReport trace_html_report(const std::string& file, const sim::Trace& trace, const sim::AllocatorConfig& config,
                             const sim::DeviceModel& device, const sim::ReplayOptions& options,
                             const sim::ReplayResult& first) {
  HtmlReport report;
  report.kind = "replay";
  report.title = file;
  report.events = trace.events.size();
  fill_peaks(report, first);
  const bool sized = device.total_bytes < sim::DeviceModel::unlimited().total_bytes;
  if (sized) {
    report.device_total_bytes = device.total_bytes;
    sim::Bytes outside = device.context_bytes + device.other_process_bytes;
    report.usable_bytes = device.total_bytes > outside ? device.total_bytes - outside : 0;
    if (device.memory_fraction > 0.0)
      report.usable_bytes = std::min<sim::Bytes>(
          report.usable_bytes, static_cast<sim::Bytes>(device.memory_fraction * static_cast<double>(device.total_bytes)));
    report.categories.push_back({"outside the allocator (CUDA context, other processes)", outside});
    sim::Bytes used = outside + std::max(first.reserved_at_peak_allocated, first.peak_allocated_bytes);
    if (device.total_bytes > used) report.categories.push_back({"free on the device", device.total_bytes - used});
  }
  report.facts.emplace_back("trace", file);
  report.facts.emplace_back("device", sized ? byte_text(device.total_bytes) : std::string("unlimited (no OOM)"));
  report.facts.emplace_back("events", fmt::format("{}", trace.events.size()));
  report.label_of = [&trace](size_t event) -> std::string {
    if (event >= trace.events.size()) return "";
    const sim::Event& e = trace.events[event];
    std::string tag = e.tag > 0 && e.tag < trace.strings.size() ? trace.strings[e.tag] : "";
    // Only these events name a tensor by `slot`; the graph and MemPool events keep a pool
    // name or option bits there, so their label is their kind and graph or pool name.
    const bool names_tensor = e.kind == sim::EventKind::Alloc || e.kind == sim::EventKind::Free ||
                              e.kind == sim::EventKind::RecordStream || e.kind == sim::EventKind::FreeRequested ||
                              e.kind == sim::EventKind::FreeCompleted;
    if (!names_tensor) {
      const std::string kind = sim::action_name(e.kind);
      return tag.empty() ? kind : kind + " " + tag;
    }
    std::string id = e.slot < trace.slot_names.size() ? trace.slot_names[e.slot] : "";
    if (e.kind != sim::EventKind::Alloc) return tag.empty() ? id : id + " (" + tag + ")";
    return fmt::format("alloc {} {}{}", id, byte_text(e.bytes), tag.empty() ? "" : " (" + tag + ")");
  };
  report.peak_label = report.label_of(report.peak_event);

  TimelineRecorder recorder(trace.events.size(), kTimelineBuckets, first.peak_allocated_event);
  sim::ReplayOptions recording_options = options;
  recording_options.check_invariants = false;
  recording_options.record_segment_decisions = false;
  sim::Replayer replayer(config, device, recording_options);
  replayer.on_event([&](size_t index) { recorder.after_event(index, trace, replayer); });
  replayer.run(trace);
  take_recording(report, recorder);
  return report;
}

HtmlReport snapshot_html_report(const std::string& file, const sim::Snapshot& snapshot,
                                const sim::AllocatorConfig& config, int device_index,
                                const sim::SnapshotReplayReport& first,
                                std::function<std::string(int64_t entry)> entry_label) {
  HtmlReport report;
  report.kind = "replay";
  report.title = file;
  report.events = first.trace.events.size();
  fill_peaks(report, first.replay);
  report.facts.emplace_back("snapshot", file);
  report.facts.emplace_back("window", first.starts_empty
                                          ? std::string("starts on an empty allocator")
                                          : fmt::format("starts mid-run: {} segments ({}) and {} blocks rebuilt",
                                                        first.initial_segments, byte_text(first.initial_reserved_bytes),
                                                        first.initial_allocated_blocks));
  report.facts.emplace_back(
      "reproduced", fmt::format("{} of {} recorded segment decisions; recorded peak reserved {}",
                                first.segment_decisions_matched, first.recorded_segment_decisions,
                                byte_text(first.recorded_peak_reserved_bytes)));
  report.facts.emplace_back("events", fmt::format("{} allocator events", first.trace.events.size()));
  const sim::Trace& trace = first.trace;
  const std::vector<int64_t>& entries = first.entry_of_event;
  report.label_of = [&trace, &entries, entry_label](size_t event) -> std::string {
    if (event >= trace.events.size()) return "";
    int64_t entry = event < entries.size() ? entries[event] : -1;
    std::string where = entry_label && entry >= 0 ? entry_label(entry) : "";
    const sim::Event& e = trace.events[event];
    std::string what = e.kind == sim::EventKind::Alloc       ? fmt::format("alloc {}", byte_text(e.bytes))
                       : e.kind == sim::EventKind::EmptyCache ? std::string("empty_cache")
                                                              : std::string("free");
    if (entry >= 0) what += fmt::format(" (trace entry {})", entry);
    return where.empty() ? what : what + " at " + where;
  };
  report.peak_label = report.label_of(report.peak_event);

  TimelineRecorder recorder(trace.events.size(), kTimelineBuckets, first.replay.peak_allocated_event);
  sim::replay_snapshot(snapshot, config, file, device_index, false,
                       [&](size_t event, sim::Replayer& replayer) { recorder.after_event(event, trace, replayer); });
  take_recording(report, recorder);
  return report;
}

}  // namespace oomcast::advisor
