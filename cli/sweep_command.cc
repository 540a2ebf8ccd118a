// `oomcast sweep SCENARIO --grid 'batch_size=1,2,4 precision=fp32,amp_bf16' [--jobs N]
// [--set k=v]... [--csv|--json]`: every combination, in parallel, as a table, CSV or JSON.
// Its progress goes to the terminal line (cli/terminal_progress.h).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "base/progress.h"
#include "cli/commands.h"
#include "cli/count_flags.h"
#include "cli/environment.h"
#include "advisor/sweep.h"

namespace oomcast::cli {

namespace {

struct SweepFlags {
  std::vector<std::string> grid;
  std::string scenario;
  std::vector<std::string> overrides;
  size_t jobs = 0;
  bool csv = false;
  bool json = false;
};

int run_sweep_command(const SweepFlags& flags) {
  if (flags.csv && flags.json) throw InputError(SourceLocation{}, "--csv", "give --csv or --json, not both");
  std::string grid_text;
  for (const auto& part : flags.grid) grid_text += part + " ";
  std::vector<advisor::GridAxis> axes = advisor::parse_grid(grid_text);
  advisor::SweepOptions options;
  if (flags.jobs > 0) options.jobs = flags.jobs;
  // The sweep reports first, so the progress line follows it rather than one row's plan.
  constexpr std::string_view kTask = "sweep combinations";
  report_progress(kTask, 0, advisor::combination_count(axes));
  options.progress = [kTask](size_t done, size_t total) { report_progress(kTask, done, total); };
  advisor::SweepResult result =
      advisor::run_sweep(
          scenario::ScenarioSource::file(flags.scenario, with_environment_alloc_conf(flags.scenario, flags.overrides)),
          axes, options);
  end_progress(kTask);
  std::string text = flags.json  ? advisor::render_sweep_json(result)
                     : flags.csv ? advisor::render_sweep_csv(result)
                                 : advisor::render_sweep_text(result);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<SweepFlags>();
  CLI::App* command = app.add_subcommand("sweep", "predict every combination of a grid of scenario settings");
  command->add_option("scenario", flags->scenario, "scenario YAML file")->required();
  command->add_option("--grid", flags->grid,
                      "axes 'key=v1,v2 key2=a..b' (keys as for --set; a..b is an integer range; repeatable)")
      ->required()
      ->allow_extra_args(false);
  command->add_option("--jobs", flags->jobs, "threads (default: every hardware thread)")
      ->check(at_least_one("threads"));
  command->add_option("--set", flags->overrides, "override a scenario key for every combination (repeatable)")
      ->allow_extra_args(false);
  command->add_flag("--csv", flags->csv, "print CSV");
  command->add_flag("--json", flags->json, "print JSON");
  command->callback([flags, &exit_code] { exit_code = run_sweep_command(*flags); });
}

}  // namespace oomcast::cli
