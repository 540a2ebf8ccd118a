// The doctor's report as text, JSON and the replay page (timeline with iterations and phases
// shaded, segments at the peak, call sites) with the doctor's tables added.
#include <memory>

#include <fmt/format.h>

#include "advisor/byte_text.h"
#include "advisor/html_report_replay.h"
#include "advisor/snapshot_doctor.h"

namespace oomcast::advisor {
namespace {

std::string signed_bytes(int64_t bytes) { return (bytes >= 0 ? "+" : "") + byte_text(bytes); }

std::string fix_outcome(const FixTrial& fix, bool limited) {
  if (!limited) return fmt::format("peak reserved {}", byte_text(fix.peak_reserved_bytes));
  if (fix.fits) return fmt::format("avoids the OOM: peak reserved {}, {} spare", byte_text(fix.peak_reserved_bytes),
                                   byte_text(fix.headroom_bytes));
  return fmt::format("still OOM ({} failed allocations): needs {}, {} short", fix.ooms, byte_text(fix.needed_bytes),
                     byte_text(-fix.headroom_bytes));
}

std::string where_text(StepPhase phase, int iteration, const CallSite& site) {
  return fmt::format("iteration {}, {}, at {}", iteration, phase_name(phase), call_site_text(site));
}

nlohmann::json sites_json(const std::vector<SiteBytes>& sites) {
  nlohmann::json out = nlohmann::json::array();
  for (const SiteBytes& row : sites)
    out.push_back({{"site", row.where.site}, {"via", row.where.via}, {"bytes", row.bytes}, {"blocks", row.blocks}});
  return out;
}

}  // namespace

std::string render_doctor_text(const DoctorReport& r) {
  std::string text = fmt::format("doctor of {} (device {})\n", r.name, r.device_index);
  text += fmt::format("  replay {} the recorded segment decisions{}\n", r.reproduced ? "reproduced" : "did NOT reproduce",
                      r.has_frames ? "" : "; the snapshot has no frames (record with stacks=\"python\" for call sites)");
  text += fmt::format("  recorded peak: {} allocated, {} reserved, {}\n", byte_text(r.peak_allocated_bytes),
                      byte_text(r.peak_reserved_bytes), where_text(r.peak_phase, r.peak_iteration, r.peak_site));
  if (r.failure) {
    const DoctorFailure& f = *r.failure;
    text += fmt::format("  {}: a request of {} {}\n", f.recorded ? "the run failed (recorded oom)" : "on the given device it fails",
                        byte_text(f.request_bytes), where_text(f.phase, f.iteration, f.site));
    text += fmt::format("    then {} allocated, {} reserved ({} reserved but unallocated){}\n", byte_text(f.allocated_bytes),
                        byte_text(f.reserved_bytes), byte_text(f.reserved_bytes - std::min(f.reserved_bytes, f.allocated_bytes)),
                        f.recorded ? fmt::format(", {} free on the device", byte_text(f.device_free_bytes)) : std::string());
  } else {
    text += r.usable_bytes > 0 ? fmt::format("  no allocation fails on the given device ({} usable)\n", byte_text(r.usable_bytes))
                               : "  no OOM recorded (give --device-memory to ask about a device)\n";
  }
  if (r.usable_bytes > 0) text += fmt::format("  allocator limit {}", byte_text(r.usable_bytes));
  if (r.outside_allocator_bytes) text += fmt::format(", {} outside the allocator", byte_text(*r.outside_allocator_bytes));
  if (r.usable_bytes > 0) text += "\n";
  if (r.usable_bytes > 0 && r.initial_reserved_bytes > r.usable_bytes)
    text += fmt::format("  the recording starts mid-run with {} reserved, more than the limit: the job would have run "
                        "out before the window; what follows is the first failure inside it\n",
                        byte_text(r.initial_reserved_bytes));

  text += fmt::format("  iterations (from the frames{}):\n", r.timeline.has_phases ? "" : ": none named a phase");
  text += fmt::format("    {:>5} {:>14} {:>14} {:>14}  {}\n", "iter", "start", "peak", "end", "peak in");
  for (const IterationSpan& span : r.timeline.iterations) {
    StepPhase phase = span.peak_event < r.timeline.event_phase.size() ? r.timeline.event_phase[span.peak_event] : StepPhase::Unknown;
    text += fmt::format("    {:>5} {:>14} {:>14} {:>14}  {}{}\n", span.index, byte_text(span.allocated_at_start),
                        byte_text(span.peak_allocated), byte_text(span.allocated_at_end), phase_name(phase),
                        span.complete ? "" : " (recording ends)");
  }
  text += "  patterns:\n";
  if (r.patterns.empty()) text += "    none of the known patterns fits the recording\n";
  for (const DoctorPattern& p : r.patterns) {
    text += fmt::format("  - {}{}: {}\n", p.name, p.causes_failure ? " [at the failure]" : "", p.evidence);
    for (const SiteBytes& site : p.sites)
      text += fmt::format("      {:>12} {:>6} blocks  {}\n", byte_text(site.bytes), site.blocks, call_site_text(site.where));
    text += fmt::format("      change: {}\n", p.change);
  }
  if (!r.fixes.empty()) {
    const bool limited = r.usable_bytes > 0;
    text += limited ? "  re-simulated on the same recording (no code change):\n"
                    : "  re-simulated on the same recording (no limit known: peaks only):\n";
    for (const FixTrial& fix : r.fixes) text += fmt::format("    {:<58} {}\n", fix.name, fix_outcome(fix, limited));
  }
  for (const std::string& line : r.not_simulated) text += fmt::format("    not re-simulated: {}\n", line);
  return text;
}

nlohmann::json doctor_json(const DoctorReport& r) {
  nlohmann::json out;
  out["snapshot"] = r.name;
  out["device_index"] = r.device_index;
  out["reproduced"] = r.reproduced;
  out["has_frames"] = r.has_frames;
  out["usable_bytes"] = r.usable_bytes;
  out["initial_reserved_bytes"] = r.initial_reserved_bytes;
  out["device_total_bytes"] = r.device_total_bytes ? nlohmann::json(*r.device_total_bytes) : nlohmann::json(nullptr);
  out["outside_allocator_bytes"] = r.outside_allocator_bytes ? nlohmann::json(*r.outside_allocator_bytes) : nlohmann::json(nullptr);
  out["peak"] = {{"allocated_bytes", r.peak_allocated_bytes}, {"reserved_bytes", r.peak_reserved_bytes},
                 {"event", r.peak_event}, {"phase", phase_name(r.peak_phase)}, {"iteration", r.peak_iteration},
                 {"site", call_site_text(r.peak_site)}};
  if (r.failure) {
    const DoctorFailure& f = *r.failure;
    out["failure"] = {{"recorded", f.recorded}, {"after_event", f.after_event == SIZE_MAX ? -1 : static_cast<int64_t>(f.after_event)},
                      {"entry", f.entry}, {"request_bytes", f.request_bytes}, {"device_free_bytes", f.device_free_bytes},
                      {"allocated_bytes", f.allocated_bytes}, {"reserved_bytes", f.reserved_bytes},
                      {"inactive_split_bytes", f.inactive_split_bytes}, {"phase", phase_name(f.phase)},
                      {"iteration", f.iteration}, {"site", call_site_text(f.site)}};
  } else {
    out["failure"] = nullptr;
  }
  nlohmann::json iterations = nlohmann::json::array();
  for (const IterationSpan& span : r.timeline.iterations)
    iterations.push_back({{"index", span.index}, {"first_event", span.first_event}, {"last_event", span.last_event},
                          {"allocated_at_start_bytes", span.allocated_at_start}, {"peak_allocated_bytes", span.peak_allocated},
                          {"allocated_at_end_bytes", span.allocated_at_end}, {"complete", span.complete}});
  out["iterations"] = iterations;
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseRun& run : r.timeline.runs)
    phases.push_back({{"label", run.label()}, {"phase", phase_name(run.phase)}, {"iteration", run.iteration},
                      {"first_event", run.first_event}, {"last_event", run.last_event},
                      {"allocated_at_start_bytes", run.allocated_at_start}, {"peak_allocated_bytes", run.peak_allocated}});
  out["phases"] = phases;
  nlohmann::json patterns = nlohmann::json::array();
  for (const DoctorPattern& p : r.patterns)
    patterns.push_back({{"name", p.name}, {"evidence", p.evidence}, {"bytes", p.bytes}, {"causes_failure", p.causes_failure},
                        {"sites", sites_json(p.sites)}, {"change", p.change}});
  out["patterns"] = patterns;
  nlohmann::json fixes = nlohmann::json::array();
  for (const FixTrial& fix : r.fixes)
    fixes.push_back({{"name", fix.name}, {"alloc_conf", fix.alloc_conf}, {"usable_bytes", fix.usable_bytes},
                     {"fits", fix.fits}, {"ooms", fix.ooms}, {"peak_reserved_bytes", fix.peak_reserved_bytes},
                     {"needed_bytes", fix.needed_bytes}, {"headroom_bytes", fix.headroom_bytes}});
  out["fixes"] = fixes;
  out["not_simulated"] = r.not_simulated;
  out["analysis"] = analysis_json(r.analysis, 20);
  return out;
}

HtmlReport doctor_html_report(const DoctorReport& r, const sim::Snapshot& snapshot, const SnapshotFrameTable& frames) {
  const sim::AllocatorConfig config = sim::snapshot_allocator_config(snapshot);
  // The page's hover labels read the replay's trace: it lives as long as the page.
  auto base = std::make_shared<sim::SnapshotReplayReport>(sim::replay_snapshot(snapshot, config, r.name, r.device_index));
  HtmlReport page = snapshot_html_report(r.name, snapshot, config, r.device_index, *base, [&frames](int64_t entry) {
    return call_site_text(call_site_of(frames, entry));
  });
  page.label_of = [base, label = page.label_of](size_t event) { return label(event); };
  add_snapshot_analysis(page, r.analysis, 20);
  page.kind = "doctor";
  page.phases.clear();
  for (const PhaseRun& run : r.timeline.runs) page.phases.push_back({run.label(), run.first_event});
  if (r.usable_bytes > 0) page.usable_bytes = r.usable_bytes;
  if (r.device_total_bytes) page.device_total_bytes = *r.device_total_bytes;
  if (r.failure) {
    page.fits = false;
    page.oom_event = r.failure->after_event == SIZE_MAX ? 0 : r.failure->after_event;
    page.verdict = fmt::format("OOM: a request of {} in {}", byte_text(r.failure->request_bytes),
                               where_text(r.failure->phase, r.failure->iteration, r.failure->site));
  } else {
    page.verdict = "no allocation failed";
  }
  HtmlTable patterns;
  patterns.title = "Patterns in the recording";
  patterns.header = {"pattern", "bytes", "at the failure", "evidence", "change"};
  patterns.numeric = {false, true, false, false, false};
  for (const DoctorPattern& p : r.patterns)
    patterns.rows.push_back({p.name, byte_text(p.bytes), p.causes_failure ? "yes" : "", p.evidence, p.change});
  page.tables.insert(page.tables.begin(), std::move(patterns));
  HtmlTable fixes;
  fixes.title = "Re-simulated on the same recording";
  fixes.header = {"change", "outcome", "peak reserved", "spare (+) or short (-)"};
  fixes.numeric = {false, false, true, true};
  for (const FixTrial& fix : r.fixes)
    fixes.rows.push_back({fix.name, fix_outcome(fix, r.usable_bytes > 0), byte_text(fix.peak_reserved_bytes),
                          r.usable_bytes > 0 ? signed_bytes(fix.headroom_bytes) : ""});
  page.tables.insert(page.tables.begin() + 1, std::move(fixes));
  return page;
}

}  // namespace oomcast::advisor
