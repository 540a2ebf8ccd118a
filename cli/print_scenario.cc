// --print-scenario (print_scenario.h).
#include "cli/print_scenario.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "base/bounded_file.h"
#include "scenario/recipe_translation.h"
#include "scenario/scenario_loader.h"

namespace oomcast::cli {

void add_print_scenario_flag(CLI::App& command, bool& flag) {
  command.add_flag("--print-scenario", flag,
                   "print the scenario the file is planned as (a torchtune, torchtitan, Axolotl or Trainer config "
                   "translated, with the keys used and ignored) and stop");
}

bool printed_scenario(bool asked, const std::string& path, const std::vector<std::string>& overrides, int& exit_code) {
  if (!asked) return false;
  std::string text;
  if (std::optional<std::string> mapped = scenario::recipe_scenario_text(path, overrides)) {
    text = *mapped;
  } else {
    scenario::load_scenario(path, overrides);  // errors first, as the command would report them
    text = "# " + path + " is a scenario already\n" + read_text_file(path, "", "scenario");
  }
  for (const auto& entry : overrides) text += "# --set " + entry + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  exit_code = 0;
  return true;
}

}  // namespace oomcast::cli
