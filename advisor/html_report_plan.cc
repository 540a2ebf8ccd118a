// Pictures of a planned scenario: one more replay of the schedule with a TimelineRecorder
// (the only way to see every event's allocated and reserved bytes and the segments at the
// peak), the planner's names for hovers, and the categories of the prediction.
#include "advisor/html_report_plan.h"

#include <fmt/format.h>

#include "advisor/byte_text.h"
#include "advisor/report.h"
#include "scenario/model_families.h"
#include "scenario/scenario_loader.h"
#include "sim/replay.h"

namespace oomcast::advisor {

using planner::EventInfo;
using planner::PlannedTrace;
using planner::TensorCategory;
using planner::category_name;
using scenario::Scenario;
using scenario::checkpoint_mode_name;
using scenario::optimizer_impl_name;
using scenario::optimizer_type_name;
using scenario::precision_name;

namespace {

constexpr size_t kTimelineBuckets = 1600;

const std::string& name_at(const PlannedTrace& planned, uint32_t index) {
  static const std::string empty;
  return index < planned.names.size() ? planned.names[index] : empty;
}

std::string event_label(const PlannedTrace& planned, size_t event) {
  if (event >= planned.info.size()) return "";
  const EventInfo& info = planned.info[event];
  std::string text = name_at(planned, info.op);
  const std::string& tensor = name_at(planned, info.tensor);
  if (!tensor.empty()) text += (text.empty() ? "" : " · ") + tensor;
  if (event < planned.trace.events.size() && planned.trace.events[event].kind == sim::EventKind::Alloc) {
    text += fmt::format(" ({}, {})", category_name(info.category),
                        byte_text(planned.trace.events[event].bytes));
  }
  const std::string& phase = name_at(planned, info.phase);
  if (!phase.empty()) text += fmt::format(" in {} of iteration {}", phase, info.iteration);
  return text;
}

std::string location_label(const ScheduleLocation& where) {
  std::string text = where.op;
  if (!where.tensor.empty()) text += (text.empty() ? "" : " · ") + where.tensor;
  if (!where.phase.empty()) text += fmt::format(" ({}, iteration {})", where.phase, where.iteration);
  return text;
}

std::vector<std::pair<std::string, std::string>> scenario_facts(const Scenario& s, const Prediction& prediction) {
  std::vector<std::pair<std::string, std::string>> facts;
  facts.emplace_back("scenario", s.source_path);
  facts.emplace_back("model", fmt::format("{} ({} family, {} parameters)", s.model.name, s.model.family,
                                          prediction.parameters));
  facts.emplace_back("batch", fmt::format("{} × {} {}, grad_accum {}, {}", s.batch_size,
                                          scenario::families::is_vision(s.model) ? "image_size" : "seq_len",
                                          s.seq_len, s.grad_accum_steps, precision_name(s.precision)));
  facts.emplace_back("training", fmt::format("{} ({}), checkpointing {}, {} iterations",
                                             optimizer_type_name(s.optimizer.type), optimizer_impl_name(s.optimizer.impl),
                                             checkpoint_mode_name(s.checkpointing.mode), s.iterations));
  facts.emplace_back("device", s.device.is_cpu ? std::string("cpu (exact accounting: reserved = allocated)")
                                               : fmt::format("{}, {} total, {} usable{}", s.device.display_name,
                                                             byte_text(prediction.device_total_bytes),
                                                             byte_text(prediction.usable_bytes),
                                                             s.allocator.source_text.empty()
                                                                 ? ""
                                                                 : "; PYTORCH_CUDA_ALLOC_CONF=" + s.allocator.source_text));
  facts.emplace_back("events", fmt::format("{}", prediction.events));
  return facts;
}

const char* category_title(TensorCategory category) {
  switch (category) {
    case TensorCategory::Parameter: return "parameters";
    case TensorCategory::Gradient: return "gradients";
    case TensorCategory::OptimizerState: return "optimizer states";
    case TensorCategory::Activation: return "activations";
    case TensorCategory::Temporary: return "temporaries";
    case TensorCategory::Workspace: return "workspace";
    case TensorCategory::Input: return "inputs";
    case TensorCategory::Buffer: return "buffers";
    case TensorCategory::Communication: return "communication buffers";
  }
  return "other";
}

// From the bottom of the device up: what the allocator hands out, what it caches, what sits
// outside it, and what is left.
std::vector<HtmlCategory> peak_categories(const Scenario& scenario, const Prediction& prediction) {
  std::vector<HtmlCategory> categories;
  for (size_t i = 0; i < kNumTensorCategories; ++i)
    categories.push_back({category_title(static_cast<TensorCategory>(i)), prediction.breakdown[i]});
  categories.push_back({"allocator rounding", prediction.rounding_bytes});
  categories.push_back({"cached, not allocated", prediction.fragmentation_bytes()});
  if (scenario.device.is_cpu) return categories;
  const sim::DeviceModel& model = scenario.device.model;
  sim::Bytes outside = model.context_bytes + model.other_process_bytes;
  categories.push_back({"outside the allocator (CUDA context, other processes)", outside});
  sim::Bytes used = outside + std::max(prediction.reserved_at_peak_bytes, prediction.peak_allocated_bytes);
  if (prediction.device_total_bytes > used) categories.push_back({"free on the device", prediction.device_total_bytes - used});
  return categories;
}

}  // namespace

HtmlReport plan_html_report(const Scenario& scenario, const PlannedTrace& planned, const Prediction& prediction) {
  const sim::Trace& trace = planned.trace;
  HtmlReport report;
  report.kind = "plan";
  report.title = scenario.source_path.empty() ? scenario.model.name : scenario.source_path;
  report.facts = scenario_facts(scenario, prediction);
  report.verdict = verdict_line(prediction);
  report.fits = prediction.fits;
  report.oom_message = prediction.oom_message;
  report.peak_allocated_bytes = prediction.peak_allocated_bytes;
  report.peak_reserved_bytes = prediction.peak_reserved_bytes;
  report.device_total_bytes = scenario.device.is_cpu ? 0 : prediction.device_total_bytes;
  report.usable_bytes = prediction.usable_bytes < (1ull << 59) ? prediction.usable_bytes : 0;
  report.events = trace.events.size();
  report.peak_event = prediction.peak_at.event_index;
  report.peak_label = location_label(prediction.peak_at);
  if (!prediction.fits) report.oom_event = prediction.oom_at.event_index;
  report.categories = peak_categories(scenario, prediction);
  report.label_of = [&planned](size_t event) { return event_label(planned, event); };

  TimelineRecorder recorder(trace.events.size(), kTimelineBuckets, report.peak_event);
  if (scenario.device.is_cpu) {
    // No caching allocator: live requested bytes, as predict() counts them.
    std::vector<sim::Bytes> live(trace.slot_names.size(), 0);
    sim::Bytes total = 0;
    for (size_t i = 0; i < trace.events.size(); ++i) {
      const sim::Event& event = trace.events[i];
      if (event.slot >= live.size() && event.kind != sim::EventKind::Mark) live.resize(event.slot + 1, 0);
      if (event.kind == sim::EventKind::Alloc) {
        live[event.slot] = event.bytes;
        total += event.bytes;
      } else if (event.kind == sim::EventKind::Free || event.kind == sim::EventKind::FreeCompleted) {
        total -= live[event.slot];
        live[event.slot] = 0;
      } else if (event.kind == sim::EventKind::Mark) {
        report.phases.push_back({event.tag < trace.strings.size() ? trace.strings[event.tag] : "", i});
      }
      recorder.record(i, total, total);
    }
  } else {
    // The same device predict() took its peaks from.
    sim::DeviceModel device = scenario.device.model;
    if (!prediction.fits) {
      device = sim::DeviceModel::unlimited();
      device.context_bytes = scenario.device.model.context_bytes;
      device.other_process_bytes = scenario.device.model.other_process_bytes;
    }
    sim::ReplayOptions options;
    options.stop_at_first_oom = true;
    sim::Replayer replayer(scenario.allocator, device, options);
    replayer.on_event([&](size_t index) { recorder.after_event(index, trace, replayer); });
    sim::ReplayResult result = replayer.run(trace);
    for (const sim::MarkReport& mark : result.marks) report.phases.push_back({mark.label, mark.event_index});
  }
  TimelineRecording recording = recorder.finish();
  report.timeline = std::move(recording.buckets);
  report.segments = std::move(recording.segments);
  return report;
}

HtmlReport whatif_html_report(const Scenario& scenario, const PlannedTrace& planned, const Prediction& prediction,
                              const Diagnosis& diagnosis) {
  HtmlReport report = plan_html_report(scenario, planned, prediction);
  report.kind = "whatif";
  if (diagnosis.leak && diagnosis.fits_simulated_iterations) {
    // The iterations simulated fit, the job does not: it grows every iteration.
    report.fits = false;
    report.verdict = "grows: fits the iterations simulated, but " + diagnosis.leak->text();
  }
  if (!diagnosis.patterns.empty()) {
    HtmlTable patterns;
    patterns.title = "OOM patterns found";
    patterns.header = {"pattern", "evidence", "rule"};
    for (const OomPattern& pattern : diagnosis.patterns) patterns.rows.push_back({pattern.title, pattern.evidence, pattern.rule});
    report.tables.push_back(std::move(patterns));
  }
  HtmlTable fixes;
  fixes.title = "What if: single changes, simulated, largest saving first";
  fixes.header = {"change", "overrides", "peak reserved after", "saving", "fits after", "cost"};
  fixes.numeric = {false, false, true, true, false, false};
  for (const FixOutcome& fix : diagnosis.fixes) {
    std::string overrides;
    for (const std::string& item : fix.overrides) overrides += (overrides.empty() ? "" : " ") + ("--set " + item);
    if (!fix.alloc_conf.empty()) overrides += (overrides.empty() ? "" : " ") + ("PYTORCH_CUDA_ALLOC_CONF=" + fix.alloc_conf);
    if (!fix.valid) {
      fixes.rows.push_back({fix.title, overrides, "", "", "rejected", fix.error});
      continue;
    }
    fixes.rows.push_back({fix.title, overrides, byte_text(fix.peak_reserved_after), byte_text(fix.saving_bytes()),
                          fix.fits_after ? "yes" : fix.leak ? "grows" : "no", fix.cost});
  }
  report.tables.push_back(std::move(fixes));
  if (diagnosis.recommended_alloc_conf) {
    report.facts.emplace_back("recommended", "PYTORCH_CUDA_ALLOC_CONF=" + *diagnosis.recommended_alloc_conf);
  }
  // The recommendation the text ends with, and what was tried when nothing fits.
  if (diagnosis.recommendation) {
    const Recommendation& r = *diagnosis.recommendation;
    std::string overrides;
    for (const std::string& item : r.overrides) overrides += " --set " + item;
    report.facts.emplace_back("recommended change", r.title + (overrides.empty() ? std::string() : " (" + overrides.substr(1) + ")") + ": peak reserved " +
                                                        byte_text(r.peak_reserved_bytes_after) +
                                                        (r.changes_goal ? "; changes what trains" : ""));
  }
  for (const std::string& note : diagnosis.recommendation_notes) {
    report.facts.emplace_back(diagnosis.recommendation ? "note" : "nothing recommended", note);
  }
  return report;
}

}  // namespace oomcast::advisor
