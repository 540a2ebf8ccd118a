// `--print-scenario` on plan, whatif and search: prints the scenario a framework's config
// (torchtune, torchtitan, Axolotl, Trainer arguments) is planned as, with the keys it used and
// ignored and its warnings, instead of running the command.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace oomcast::cli {

// Adds the flag to `command`, writing into `flag`.
void add_print_scenario_flag(CLI::App& command, bool& flag);

// When `asked`, prints the mapped scenario of `path` (a scenario file is printed as it is,
// overrides listed) to stdout, sets `exit_code` to 0 and returns true; the command then stops.
// Throws InputError as loading would.
bool printed_scenario(bool asked, const std::string& path, const std::vector<std::string>& overrides, int& exit_code);

}  // namespace oomcast::cli
