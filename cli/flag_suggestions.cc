// unknown_flag_message(): see flag_suggestions.h.
#include "cli/flag_suggestions.h"

#include <algorithm>
#include <vector>

#include "base/edit_distance.h"

namespace oomcast::cli {

std::string unknown_flag_message(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return "";
  const CLI::App* command = nullptr;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == argv[1]) command = sub;
  }
  const CLI::App* scope = command ? command : &app;
  std::vector<std::string> known;
  for (const CLI::Option* option : scope->get_options({})) {
    for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
  }
  if (command) known.push_back("--help");
  for (int i = command ? 2 : 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.rfind("--", 0) != 0 || word == "--") continue;
    word = word.substr(0, word.find('='));
    if (std::find(known.begin(), known.end(), word) != known.end()) continue;
    std::string where = command ? "'oomcast " + command->get_name() + "'" : "oomcast";
    return "error: unknown flag '" + word + "' for " + where + did_you_mean(word, known) + "; run " +
           (command ? "'oomcast " + command->get_name() + " --help'" : "'oomcast --help'") + " for the list";
  }
  return "";
}

}  // namespace oomcast::cli
