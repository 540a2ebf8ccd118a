// Validators of flags that count something (--jobs): a whole number of at least 1, said so in
// words when it is not (CLI11's PositiveNumber answers "Value 0 not in range 0 to 1.8e308").
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace oomcast::cli {

// `what` names the unit: "threads". CLI11 puts the flag in front of the message.
CLI::Validator at_least_one(const std::string& what);

}  // namespace oomcast::cli
