// The subcommands of the oomcast executable. Each add_*_command registers one CLI11
// subcommand whose callback stores the process exit code in `exit_code`:
// 0 fits / ok, 1 predicted OOM, 2 bad input or usage, 3 internal error.
#pragma once

#include <CLI/CLI.hpp>

namespace oomcast::cli {

void add_replay_command(CLI::App& app, int& exit_code);
void add_plan_command(CLI::App& app, int& exit_code);
void add_compare_command(CLI::App& app, int& exit_code);
void add_search_command(CLI::App& app, int& exit_code);
void add_sweep_command(CLI::App& app, int& exit_code);
void add_whatif_command(CLI::App& app, int& exit_code);
void add_diff_command(CLI::App& app, int& exit_code);
void add_export_graph_command(CLI::App& app, int& exit_code);
void add_explain_command(CLI::App& app, int& exit_code);
void add_doctor_command(CLI::App& app, int& exit_code);

}  // namespace oomcast::cli
