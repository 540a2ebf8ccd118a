// `oomcast sweep SCENARIO --grid 'batch_size=1,2,4 precision=fp32,amp_bf16' [--jobs N]
// [--set k=v]... [--csv|--json]`: every combination, in parallel, as a table, CSV or JSON.
// A progress bar goes to stderr when it is a terminal and the sweep is long.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "cli/commands.h"
#include "cli/environment.h"
#include "advisor/sweep.h"

namespace oomcast::cli {

namespace {

constexpr size_t kLongSweep = 50;  // combinations above which a terminal gets a progress bar

struct SweepFlags {
  std::vector<std::string> grid;
  std::string scenario;
  std::vector<std::string> overrides;
  size_t jobs = 0;
  bool csv = false;
  bool json = false;
};

// Redraws only when the percentage changes, so a piped stderr gets ~100 updates, not one per row.
void draw_progress(size_t done, size_t total) {
  constexpr int kWidth = 40;
  static size_t last_percent = 101;
  size_t percent = 100 * done / total;
  if (percent == last_percent && done != total) return;
  last_percent = percent;
  int filled = static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r[%s%s] %zu/%zu", std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
               done, total);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

int run_sweep_command(const SweepFlags& flags) {
  if (flags.csv && flags.json) throw InputError(SourceLocation{}, "--csv", "give --csv or --json, not both");
  std::string grid_text;
  for (const auto& part : flags.grid) grid_text += part + " ";
  std::vector<planner::GridAxis> axes = planner::parse_grid(grid_text);
  planner::SweepOptions options;
  if (flags.jobs > 0) options.jobs = flags.jobs;
  if (isatty(STDERR_FILENO) && planner::combination_count(axes) > kLongSweep) options.progress = draw_progress;
  planner::SweepResult result =
      planner::run_sweep(
          planner::ScenarioSource::file(flags.scenario, with_environment_alloc_conf(flags.scenario, flags.overrides)),
          axes, options);
  std::string text = flags.json  ? planner::render_sweep_json(result)
                     : flags.csv ? planner::render_sweep_csv(result)
                                 : planner::render_sweep_text(result);
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
  command->add_option("--jobs", flags->jobs, "threads (default: every hardware thread)");
  command->add_option("--set", flags->overrides, "override a scenario key for every combination (repeatable)")
      ->allow_extra_args(false);
  command->add_flag("--csv", flags->csv, "print CSV");
  command->add_flag("--json", flags->json, "print JSON");
  command->callback([flags, &exit_code] { exit_code = run_sweep_command(*flags); });
}

}  // namespace oomcast::cli
