// main(): the subcommand table and the one place that turns errors into exit codes.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/edit_distance.h"
#include "base/input_error.h"
#include "cli/commands.h"
#include "cli/flag_suggestions.h"
#include "cli/terminal_progress.h"

int main(int argc, char** argv) {
  CLI::App app{
      "oomcast: predicts the GPU memory of a PyTorch training step, and whether it hits\n"
      "'CUDA out of memory', by replaying its allocations through a simulator of PyTorch's\n"
      "CUDA caching allocator.\n\n"
      "Exit codes: 0 fits / ok, 1 predicted OOM, 2 bad input or usage, 3 internal error."};
  app.set_version_flag("--version", std::string("oomcast ") + OOMCAST_VERSION);
  app.require_subcommand(1);
  int exit_code = 0;
  oomcast::cli::add_replay_command(app, exit_code);
  oomcast::cli::add_plan_command(app, exit_code);
  oomcast::cli::add_compare_command(app, exit_code);
  oomcast::cli::add_search_command(app, exit_code);
  oomcast::cli::add_sweep_command(app, exit_code);
  oomcast::cli::add_whatif_command(app, exit_code);
  oomcast::cli::add_diff_command(app, exit_code);
  oomcast::cli::add_export_graph_command(app, exit_code);
  oomcast::cli::add_explain_command(app, exit_code);
  oomcast::cli::add_doctor_command(app, exit_code);
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
    std::string word = argv[1];
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      std::fprintf(stderr, "error: unknown subcommand '%s'%s; run 'oomcast --help' for the list\n", word.c_str(),
                   oomcast::did_you_mean(word, names).c_str());
      return 2;
    }
  }
  oomcast::cli::install_terminal_progress();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() != 0) {
      std::string unknown = oomcast::cli::unknown_flag_message(app, argc, argv);
      if (!unknown.empty()) {
        std::fprintf(stderr, "%s\n", unknown.c_str());
        return 2;
      }
    }
    if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
    // Bad flags are bad input: one line, exit 2, as for every other input error.
    std::fprintf(stderr, "error: %s\n", error.what());
    return 2;
  } catch (const oomcast::InputError& error) {
    oomcast::cli::erase_terminal_progress();
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    oomcast::cli::erase_terminal_progress();
    std::fprintf(stderr, "internal error: %s\n", error.what());
    return 3;
  }
  oomcast::cli::erase_terminal_progress();
  // A report that could not be written (a full disk, /dev/full) is not a success.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "error: writing the output failed: %s\n", std::strerror(errno ? errno : EIO));
    return 2;
  }
  return exit_code;
}
