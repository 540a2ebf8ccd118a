// unknown_flag_message(): for a command line CLI11 rejected, the first `--flag` the chosen
// subcommand does not know, with a did-you-mean from the flags it does; "" when none.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace oomcast::cli {

std::string unknown_flag_message(const CLI::App& app, int argc, char** argv);

}  // namespace oomcast::cli
