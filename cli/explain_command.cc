// `oomcast explain MESSAGE|FILE|-`: reads PyTorch's "CUDA out of memory" message (the text
// itself, a file holding it, e.g. a log, or stdin) and prints what its numbers say.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>

#include "advisor/oom_explanation.h"
#include "advisor/oom_message_reader.h"
#include "base/input_error.h"
#include "cli/commands.h"

namespace oomcast::cli {
namespace {

struct ExplainFlags {
  std::string message;
  bool json = false;
};

// The text to read and its name for errors: stdin for "-", a file when one exists at the
// path, else the argument itself.
std::pair<std::string, std::string> message_text(const std::string& argument) {
  if (argument == "-") {
    std::ostringstream text;
    text << std::cin.rdbuf();
    return {text.str(), "<stdin>"};
  }
  std::error_code error;
  if (argument.size() < 4096 && std::filesystem::is_regular_file(argument, error)) {
    std::ifstream in(argument, std::ios::binary);
    if (!in) throw InputError({argument, 0, 0, -1}, "explain", "cannot read the file");
    return {std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), argument};
  }
  return {argument, ""};
}

int run_explain(const ExplainFlags& flags) {
  auto [text, name] = message_text(flags.message);
  std::optional<advisor::OomMessageFigures> figures = advisor::read_oom_message(text);
  if (!figures)
    throw InputError({name, 0, 0, -1}, "explain",
                     "no PyTorch 'CUDA out of memory. Tried to allocate ...' message in the text (errors such as "
                     "'CUDA error: out of memory' come from outside the caching allocator and carry no numbers)");
  advisor::OomExplanation explanation = advisor::explain_oom_message(*figures);
  std::string out = flags.json ? advisor::explanation_json(explanation).dump(2) + "\n"
                               : advisor::render_explanation_text(explanation);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

void add_explain_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ExplainFlags>();
  CLI::App* command = app.add_subcommand(
      "explain", "Explain PyTorch's 'CUDA out of memory' message: what its numbers say and what to try first");
  command->add_option("message", flags->message, "the message text, a file holding it (a log), or - for stdin")
      ->required();
  command->add_flag("--json", flags->json, "print JSON (keys in docs/usage.md)");
  command->callback([flags, &exit_code] { exit_code = run_explain(*flags); });
}

}  // namespace oomcast::cli
