// oomcast._core: the Python extension (nanobind). Thin by design: each function calls the
// library functions the matching CLI command calls (cli/plan_command.cc, replay_command.cc,
// search_command.cc, sweep_command.cc, whatif_command.cc) and returns their JSON rendering,
// which python/oomcast/ reads into typed results, so Python and the CLI print the same
// numbers. InputError becomes oomcast.InputError (a ValueError with file, line, key); the GIL
// is released while the simulator runs.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "advisor/global_batch_search.h"
#include "advisor/html_report_plan.h"
#include "advisor/html_report_replay.h"
#include "advisor/replay_device.h"
#include "advisor/plan_snapshot_export.h"
#include "advisor/predict.h"
#include "advisor/replay_json.h"
#include "advisor/report.h"
#include "advisor/search.h"
#include "advisor/search_margin.h"
#include "advisor/snapshot_analysis.h"
#include "advisor/sweep.h"
#include "advisor/whatif.h"
#include "base/input_error.h"
#include "planner/jobs/training_job.h"
#include "scenario/scenario_source.h"
#include "sim/allocator_config.h"
#include "sim/allocator_warnings.h"
#include "sim/replay.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"
#include "sim/trace_io.h"

namespace nb = nanobind;

namespace oomcast::python {
namespace {

// A scenario as Python gives it: a path, or YAML text (a dict, written as JSON) named `path`.
scenario::ScenarioSource scenario_source(const std::string& path, const std::optional<std::string>& text,
                                        const std::vector<std::string>& overrides) {
  return text ? scenario::ScenarioSource::yaml(*text, path, overrides) : scenario::ScenarioSource::file(path, overrides);
}

// One plan: the scenario and its prediction, as `oomcast plan` computes them.
struct PlanResult {
  scenario::Scenario scenario;
  advisor::Prediction prediction;

  std::string json() const { return advisor::render_json(prediction); }
  std::string text() const { return advisor::render_text(prediction); }
  // The HTML page and the snapshot need every event: the whole schedule, as `plan --html` plans it.
  std::string html() const {
    planner::PlannedTrace planned = planner::plan_steps(scenario);
    advisor::Prediction whole = advisor::predict_planned(scenario, planned);
    return advisor::render_html(advisor::plan_html_report(scenario, planned, whole));
  }
  void write_html(const std::string& path) const {
    planner::PlannedTrace planned = planner::plan_steps(scenario);
    advisor::Prediction whole = advisor::predict_planned(scenario, planned);
    advisor::write_html_report(advisor::plan_html_report(scenario, planned, whole), path, "to_html");
  }
  void write_snapshot(const std::string& path) const {
    advisor::export_plan_snapshot(path, scenario, planner::plan_steps(scenario));
  }
};

PlanResult plan(const std::string& path, const std::optional<std::string>& text,
                const std::vector<std::string>& overrides) {
  nb::gil_scoped_release unlocked;
  PlanResult result;
  result.scenario = scenario_source(path, text, overrides).load();
  result.prediction = advisor::predict(result.scenario);  // as `oomcast plan` without output files
  advisor::add_moe_routing_cases(result.prediction);
  return result;
}

// As `oomcast replay --device-memory`: the device's CUDA context is counted unless given.
std::optional<sim::DeviceModel> device_model(const std::optional<std::string>& device_memory,
                                             const std::optional<std::string>& context_memory) {
  advisor::ReplayDeviceRequest request;
  request.device_memory = device_memory.value_or("");
  request.context_memory = context_memory.value_or("");
  return advisor::replay_device(request, sim::AllocatorConfig{}.torch_version);
}

// `oomcast replay --json` of a snapshot (a file, or pickle bytes held in memory) or a trace file.
std::string replay(const std::string& name, const std::optional<nb::bytes>& pickle,
                   const std::optional<std::string>& alloc_conf, const std::optional<std::string>& device_memory,
                   const std::optional<std::string>& context_memory, int device_index) {
  const std::optional<sim::DeviceModel> given_device = device_model(device_memory, context_memory);
  const sim::DeviceModel device = given_device.value_or(sim::DeviceModel::unlimited());
  const bool bounded = given_device.has_value();
  std::optional<sim::Snapshot> snapshot;
  if (pickle) {
    std::string bytes(pickle->c_str(), pickle->size());
    nb::gil_scoped_release unlocked;
    snapshot = sim::parse_snapshot(name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                   {device_index});
  }
  nb::gil_scoped_release unlocked;
  if (!snapshot && sim::looks_like_snapshot_path(name)) snapshot = sim::read_snapshot(name, {device_index});
  if (!snapshot) {
    sim::AllocatorConfig config = sim::parse_alloc_conf(alloc_conf.value_or(""), sim::AllocatorConfig{});
    sim::ReplayResult result = sim::replay(sim::read_trace_file(name), config, device, sim::ReplayOptions{});
    nlohmann::json out = advisor::replay_result_json(result);
    out["marks"] = nlohmann::json::array();
    for (const sim::MarkReport& mark : result.marks) out["marks"].push_back(advisor::mark_json(mark));
    return out.dump();
  }
  // As cli/replay_command.cc: the recorded settings unless alloc_conf is given; the call sites
  // are those of the recorded run (a second replay without the limit when the device is bounded).
  sim::AllocatorConfig config = alloc_conf ? sim::parse_alloc_conf(*alloc_conf, sim::AllocatorConfig{})
                                           : sim::snapshot_allocator_config(*snapshot);
  config.torch_version = sim::AllocatorConfig{}.torch_version;
  sim::SnapshotReplayReport report = sim::replay_snapshot(*snapshot, config, name, device_index, false, {}, device);
  const bool starts_over = bounded && report.initial_reserved_bytes > device.usable_bytes();
  advisor::SnapshotFrameTable frames = advisor::frame_table_of(std::move(snapshot->frames));
  std::optional<sim::SnapshotReplayReport> recorded_run;
  if (bounded) recorded_run = sim::replay_snapshot(*snapshot, config, name, device_index);
  advisor::SnapshotAnalysis analysis =
      advisor::analyze_snapshot(name, *snapshot, config, device_index, recorded_run ? *recorded_run : report, frames);
  nlohmann::json out = advisor::snapshot_replay_json(report, analysis, device, bounded, starts_over);
  out["marks"] = nlohmann::json::array();
  for (const sim::MarkReport& mark : report.replay.marks) out["marks"].push_back(advisor::mark_json(mark));
  return out.dump();
}

// `oomcast search --json` (and its text): the largest value that fits, or with keep_global_batch
// the largest micro-batch of that global batch.
std::pair<std::string, std::string> search(const std::string& path, const std::optional<std::string>& text,
                 const std::vector<std::string>& overrides, const std::string& param, const std::string& margin_text,
                 int64_t max_value, int64_t keep_global_batch, bool fit, size_t jobs) {
  std::string json, report;
  {
    nb::gil_scoped_release unlocked;
    const advisor::SearchMargin margin = advisor::parse_search_margin(margin_text, "margin");
    const scenario::ScenarioSource source = scenario_source(path, text, overrides);
    if (keep_global_batch > 0) {
      advisor::GlobalBatchOptions options;
      options.global_batch = keep_global_batch;
      options.margin = margin.fraction;
      options.margin_bytes = margin.bytes;
      if (jobs > 0) options.jobs = jobs;
      advisor::GlobalBatchResult result = advisor::search_keep_global_batch(source, options);
      json = advisor::render_global_batch_json(result);
      report = advisor::render_global_batch_text(result);
    } else {
      advisor::SearchOptions options;
      options.param = advisor::parse_search_param(param);
      options.margin = margin.fraction;
      options.margin_bytes = margin.bytes;
      options.max_value = max_value;
      options.with_fit = fit;
      if (jobs > 0) options.jobs = jobs;
      advisor::SearchResult result = advisor::search_max_fitting(source, options);
      json = advisor::render_search_json(result);
      report = advisor::render_search_text(result);
    }
  }
  return {json, report};
}

// `oomcast sweep --json`: every combination of the grid.
std::string sweep(const std::string& path, const std::optional<std::string>& text,
                  const std::vector<std::string>& overrides, const std::string& grid, size_t jobs) {
  nb::gil_scoped_release unlocked;
  std::vector<advisor::GridAxis> axes = advisor::parse_grid(grid);
  advisor::SweepOptions options;
  if (jobs > 0) options.jobs = jobs;
  return advisor::render_sweep_json(advisor::run_sweep(scenario_source(path, text, overrides), axes, options));
}

// `oomcast whatif --json` (and its text): the OOM patterns and the simulated fixes.
std::pair<std::string, std::string> whatif(const std::string& path, const std::optional<std::string>& text,
                 const std::vector<std::string>& overrides, bool fit, size_t jobs) {
  std::string json, report;
  {
    nb::gil_scoped_release unlocked;
    advisor::DiagnoseOptions options;
    options.with_fit = fit;
    if (jobs > 0) options.jobs = jobs;
    advisor::Diagnosis diagnosis = advisor::diagnose(scenario_source(path, text, overrides), options);
    json = advisor::render_whatif_json(diagnosis);
    report = advisor::render_whatif_text(diagnosis);
  }
  return {json, report};
}

// InputError -> oomcast.InputError(message, file, line, column, event, key).
void translate_input_error(const std::exception_ptr& error, void*) {
  try {
    std::rethrow_exception(error);
  } catch (const InputError& input_error) {
    const SourceLocation& where = input_error.where();
    nb::object type = nb::module_::import_("oomcast._errors").attr("InputError");
    nb::object args = nb::make_tuple(format_input_error(where, input_error.message()), where.file, where.line,
                                     where.column, where.event, input_error.key());
    PyErr_SetObject(type.ptr(), args.ptr());
  }
}

}  // namespace
}  // namespace oomcast::python

NB_MODULE(_core, module) {
  using namespace oomcast::python;
  module.doc() = "oomcast's C++ core; use the oomcast package, not this module";
  nb::register_exception_translator(translate_input_error);
  nb::class_<PlanResult>(module, "PlanResult")
      .def("json", &PlanResult::json, "the prediction as `oomcast plan --json` prints it")
      .def("text", &PlanResult::text, "the report as `oomcast plan` prints it")
      .def("html", &PlanResult::html, nb::call_guard<nb::gil_scoped_release>(), "the HTML page of `plan --html`")
      .def("write_html", &PlanResult::write_html, nb::call_guard<nb::gil_scoped_release>(), nb::arg("path"))
      .def("write_snapshot", &PlanResult::write_snapshot, nb::call_guard<nb::gil_scoped_release>(),
           nb::arg("path"));
  module.def("plan", &plan, nb::arg("path"), nb::arg("text").none(), nb::arg("overrides"));
  module.def("replay", &replay, nb::arg("name"), nb::arg("pickle").none(), nb::arg("alloc_conf").none(),
             nb::arg("device_memory").none(), nb::arg("context_memory").none(), nb::arg("device_index"));
  module.def("search", &search, nb::arg("path"), nb::arg("text").none(), nb::arg("overrides"), nb::arg("param"),
             nb::arg("margin"), nb::arg("max_value"), nb::arg("keep_global_batch"), nb::arg("fit"), nb::arg("jobs"));
  module.def("sweep", &sweep, nb::arg("path"), nb::arg("text").none(), nb::arg("overrides"), nb::arg("grid"),
             nb::arg("jobs"));
  module.def("whatif", &whatif, nb::arg("path"), nb::arg("text").none(), nb::arg("overrides"), nb::arg("fit"),
             nb::arg("jobs"));
}
