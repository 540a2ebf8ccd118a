// main(): the subcommand table and the one place that turns errors into exit codes.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "base/input_error.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "oomcast: predicts the GPU memory of a PyTorch training step, and whether it hits\n"
      "'CUDA out of memory', by replaying its allocations through a simulator of PyTorch's\n"
      "CUDA caching allocator.\n\n"
      "Exit codes: 0 fits / ok, 1 predicted OOM, 2 bad input or usage, 3 internal error."};
  app.require_subcommand(1);
  int exit_code = 0;
  oomcast::cli::add_replay_command(app, exit_code);
  oomcast::cli::add_plan_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);
    return code == 0 ? 0 : 2;
  } catch (const oomcast::InputError& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "internal error: %s\n", error.what());
    return 3;
  }
  return exit_code;
}
