// `oomcast plan SCENARIO [--set key=value]... [--json]`: loads the scenario, predicts its
// memory and prints the report. Exit code 0 when it fits, 1 when it would hit OOM.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "cli/commands.h"
#include "advisor/html_report_plan.h"
#include "advisor/plan_snapshot_export.h"
#include "cli/environment.h"
#include "cli/print_scenario.h"
#include "cli/output_files.h"
#include "advisor/predict.h"
#include "advisor/report.h"
#include "scenario/scenario_loader.h"
#include "planner/jobs/training_job.h"
#include "sim/trace_io.h"

namespace oomcast::cli {

namespace {

struct PlanFlags {
  std::string scenario;
  std::vector<std::string> overrides;
  bool print_scenario = false;
  bool json = false;
  std::string emit_trace;
  std::string html;
  std::string export_snapshot;
};

int run_plan(const PlanFlags& flags) {
  scenario::Scenario scenario =
      scenario::load_scenario(flags.scenario, with_environment_alloc_conf(flags.scenario, flags.overrides));
  advisor::Prediction prediction;
  if (flags.emit_trace.empty() && flags.html.empty() && flags.export_snapshot.empty()) {
    prediction = advisor::predict(scenario);  // long jobs: a steady-state window, not every iteration
  } else {
    // The trace file, the HTML timeline and the snapshot need every event: the whole schedule is planned.
    refuse_clobbering_outputs(
        {{"--emit-trace", flags.emit_trace}, {"--html", flags.html}, {"--export-snapshot", flags.export_snapshot}},
        scenario_input_files(scenario));
    planner::PlannedTrace planned = planner::plan_steps(scenario);
    if (!flags.emit_trace.empty()) {
      std::ofstream out(flags.emit_trace);
      if (!out) {
        throw InputError({flags.emit_trace, 0, 0, -1}, "--emit-trace",
                         std::string("cannot write the trace file: ") + std::strerror(errno));
      }
      sim::write_trace(out, planned.trace);
      out.flush();
      out.close();
      if (out.fail()) {
        throw InputError({flags.emit_trace, 0, 0, -1}, "--emit-trace",
                         std::string("writing the trace file failed: ") + std::strerror(errno ? errno : EIO));
      }
    }
    prediction = advisor::predict_planned(scenario, planned);
    if (!flags.html.empty()) write_html_report(plan_html_report(scenario, planned, prediction), flags.html);
    if (!flags.export_snapshot.empty()) advisor::export_plan_snapshot(flags.export_snapshot, scenario, planned);
  }
  advisor::add_moe_routing_cases(prediction);
  std::string text = flags.json ? advisor::render_json(prediction) : advisor::render_text(prediction);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return prediction.fits ? 0 : 1;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<PlanFlags>();
  CLI::App* command = app.add_subcommand(
      "plan", "predict the memory of a training scenario (YAML; docs/scenario-format.md)");
  command->add_option("scenario", flags->scenario, "scenario YAML file, or a torchtune, torchtitan, Axolotl or Trainer config (docs/recipes.md)")->required();
  command->add_option("--set", flags->overrides,
                      "override a scenario key: --set batch_size=32 --set model.layers=4 (repeatable)")
      ->allow_extra_args(false);
  add_print_scenario_flag(*command, flags->print_scenario);
  command->add_flag("--json", flags->json, "print JSON (keys in docs/usage.md) instead of text");
  command->add_option("--emit-trace", flags->emit_trace,
                      "also write the planned allocation schedule as a trace (docs/trace-format.md)");
  command->add_option("--html", flags->html,
                      "also write a self-contained HTML report: timeline, categories and segments at the peak");
  command->add_option("--export-snapshot", flags->export_snapshot,
                      "also write the simulated run as a torch.cuda.memory._snapshot() pickle (.pickle, .pickle.gz) "
                      "for PyTorch's memory_viz and `oomcast replay`");
  command->callback([flags, &exit_code] {
    if (printed_scenario(flags->print_scenario, flags->scenario, flags->overrides, exit_code)) return;
    exit_code = run_plan(*flags);
  });
}

}  // namespace oomcast::cli
