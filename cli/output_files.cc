// Where a command may write: no output over an input, no two outputs on one path.
#include "cli/output_files.h"

#include <filesystem>

#include "base/input_error.h"
#include "scenario/scenario.h"

namespace oomcast::cli {

namespace {

bool is_file_output(const std::string& path) { return !path.empty() && path != "-"; }

// True when `a` and `b` name one file: the same inode where both exist, otherwise the same
// normalised absolute path (an output that does not exist yet).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (std::filesystem::exists(a, error) && std::filesystem::exists(b, error)) {
    return std::filesystem::equivalent(a, b, error) && !error;
  }
  const std::filesystem::path left = std::filesystem::weakly_canonical(a, error);
  if (error) return false;
  const std::filesystem::path right = std::filesystem::weakly_canonical(b, error);
  return !error && left == right;
}

}  // namespace

std::vector<std::string> scenario_input_files(const scenario::Scenario& scenario) {
  std::vector<std::string> inputs = {scenario.source_path, scenario.model.source};
  if (!scenario.parallel.deepspeed.config_file.empty()) {
    std::filesystem::path config = scenario.parallel.deepspeed.config_file;
    if (config.is_relative()) config = std::filesystem::path(scenario.source_path).parent_path() / config;
    inputs.push_back(config.string());
  }
  return inputs;
}

void refuse_clobbering_outputs(const std::vector<OutputFile>& outputs, const std::vector<std::string>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OutputFile& output = outputs[i];
    if (!is_file_output(output.path)) continue;
    for (const std::string& input : inputs) {
      if (input.empty() || !same_file(output.path, input)) continue;
      throw InputError({output.path, 0, 0, -1}, output.flag,
                       output.flag + " " + output.path + " would overwrite the input file " + input +
                           "; choose another path");
    }
    for (size_t j = 0; j < i; ++j) {
      if (!is_file_output(outputs[j].path) || !same_file(output.path, outputs[j].path)) continue;
      throw InputError({output.path, 0, 0, -1}, output.flag,
                       output.flag + " " + output.path + " is also the path of " + outputs[j].flag +
                           "; give each output its own file");
    }
  }
}

}  // namespace oomcast::cli
