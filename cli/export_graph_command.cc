// `oomcast export-graph SCENARIO [--set key=value]... [-o FILE]`: writes the scenario's model
// (a preset, a config.json or a graph file) as a graph file of generic ops, built at the
// scenario's sizes and precision (docs/graph-format.md, "Exporting a model").
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "cli/commands.h"
#include "cli/environment.h"
#include "cli/output_files.h"
#include "planner/scenario_graph_export.h"
#include "scenario/scenario_loader.h"

namespace oomcast::cli {

namespace {

struct ExportGraphFlags {
  std::string scenario;
  std::vector<std::string> overrides;
  std::string output;
  std::string name;
};

int run_export_graph(const ExportGraphFlags& flags) {
  scenario::Scenario scenario =
      scenario::load_scenario(flags.scenario, with_environment_alloc_conf(flags.scenario, flags.overrides));
  const std::string name = flags.name.empty() ? scenario.model.name + "-export" : flags.name;
  const std::string text = planner::export_scenario_graph(scenario, name);
  if (flags.output.empty() || flags.output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  refuse_clobbering_outputs({{"-o", flags.output}}, scenario_input_files(scenario));
  std::ofstream out(flags.output, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw InputError({flags.output, 0, 0, -1}, "-o", "cannot write the graph file " + flags.output);
  std::fprintf(stderr, "wrote %s (%s at batch_size %lld, seq_len %lld)\n", flags.output.c_str(), name.c_str(),
               static_cast<long long>(scenario.batch_size), static_cast<long long>(scenario.seq_len));
  return 0;
}

}  // namespace

void add_export_graph_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ExportGraphFlags>();
  CLI::App* command = app.add_subcommand(
      "export-graph", "write the scenario's model as a graph file of generic ops, at the scenario's sizes and precision");
  command->add_option("scenario", flags->scenario, "scenario YAML file")->required();
  command->add_option("--set", flags->overrides, "override a scenario key, e.g. --set batch_size=4 (repeatable)")
      ->allow_extra_args(false);
  command->add_option("-o,--output", flags->output, "graph file to write (default: standard output)");
  command->add_option("--name", flags->name, "the graph's `name:` (default: the model's name + -export)");
  command->callback([flags, &exit_code] { exit_code = run_export_graph(*flags); });
}

}  // namespace oomcast::cli
