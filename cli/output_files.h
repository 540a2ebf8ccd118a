// Where a command may write. An output file must not be one of the command's input files (a GPU
// snapshot replaced by HTML is lost for good) nor the path of another output of the same run
// (the second would silently replace the first). Every output flag of every command goes
// through refuse_clobbering_outputs before anything is written.
#pragma once

#include <string>
#include <vector>

namespace oomcast::scenario {
struct Scenario;
}

namespace oomcast::cli {

struct OutputFile {
  std::string flag;  // "--html", "-o", ...
  std::string path;  // empty or "-" (standard output): not a file, never checked
};

// The files a scenario was read from: the YAML, the model's source (config.json or graph file)
// and a DeepSpeed config.
std::vector<std::string> scenario_input_files(const scenario::Scenario& scenario);

// Throws InputError (naming the flag) when an output is one of `inputs`, or when two outputs
// name one file. Paths are compared as files (hard links, symlinks, ./a and a are one file),
// and lexically after normalisation where a file does not exist yet.
void refuse_clobbering_outputs(const std::vector<OutputFile>& outputs, const std::vector<std::string>& inputs);

}  // namespace oomcast::cli
