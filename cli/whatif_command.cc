// `oomcast whatif SCENARIO [--set k=v]... [--no-fit] [--json]`: the doctor. Names the OOM
// patterns the scenario shows and ranks simulated fixes. Exit code 0 when the scenario fits,
// 1 when it does not (whatever the fixes say).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/count_flags.h"
#include "advisor/html_report_plan.h"
#include "cli/environment.h"
#include "cli/print_scenario.h"
#include "cli/output_files.h"
#include "advisor/whatif.h"
#include "scenario/scenario_loader.h"
#include "planner/jobs/training_job.h"

namespace oomcast::cli {

namespace {

struct WhatifFlags {
  std::string scenario;
  std::vector<std::string> overrides;
  bool print_scenario = false;
  size_t jobs = 0;
  bool no_fit = false;
  bool json = false;
  std::string html;
};

int run_whatif(const WhatifFlags& flags) {
  advisor::DiagnoseOptions options;
  if (flags.jobs > 0) options.jobs = flags.jobs;
  options.with_fit = !flags.no_fit;
  if (!flags.html.empty()) {  // refused before the long diagnosis, not after it
    refuse_clobbering_outputs({{"--html", flags.html}},
                              scenario_input_files(scenario::load_scenario(flags.scenario, flags.overrides)));
  }
  advisor::Diagnosis diagnosis = advisor::diagnose(
      scenario::ScenarioSource::file(flags.scenario, with_environment_alloc_conf(flags.scenario, flags.overrides)), options);
  std::string text = flags.json ? advisor::render_whatif_json(diagnosis) : advisor::render_whatif_text(diagnosis);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!flags.html.empty()) {
    scenario::Scenario scenario = scenario::load_scenario(flags.scenario, flags.overrides);
    planner::PlannedTrace planned = planner::plan_steps(scenario);
    advisor::Prediction prediction = advisor::predict_planned(scenario, planned);
    write_html_report(whatif_html_report(scenario, planned, prediction, diagnosis), flags.html);
  }
  return diagnosis.fits ? 0 : 1;
}

}  // namespace

void add_whatif_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<WhatifFlags>();
  CLI::App* command = app.add_subcommand(
      "whatif", "the doctor: which OOM patterns the scenario shows, and which simulated change saves most");
  command->add_option("scenario", flags->scenario, "scenario YAML file, or a torchtune, torchtitan, Axolotl or Trainer config (docs/recipes.md)")->required();
  command->add_option("--set", flags->overrides, "override a scenario key first (repeatable)")->allow_extra_args(false);
  add_print_scenario_flag(*command, flags->print_scenario);
  command->add_option("--jobs", flags->jobs, "simulations at once (default: every hardware thread)")
      ->check(at_least_one("simulations at once"));
  command->add_flag("--no-fit", flags->no_fit, "skip the closed-form fit peak ≈ a + b·B + c·B·S + d·B·S²");
  command->add_flag("--json", flags->json, "print JSON");
  command->add_option("--html", flags->html, "also write a self-contained HTML report with the fixes table");
  command->callback([flags, &exit_code] {
    if (printed_scenario(flags->print_scenario, flags->scenario, flags->overrides, exit_code)) return;
    exit_code = run_whatif(*flags);
  });
}

}  // namespace oomcast::cli
