// libFuzzer entry point for the scenario reader and, when the scenario is small, the planner
// and predictor behind it. One input holds up to five parts separated by lines "%%":
//   1. the scenario YAML            (read as <dir>/scenario.yaml)
//   2. a model YAML                 (<dir>/model.yaml: `model: model.yaml` reaches it)
//   3. a Hugging Face config.json   (<dir>/config.json)
//   4. a DeepSpeed JSON             (<dir>/ds.json: `deepspeed_config: ds.json`)
//   5. --set overrides, one a line
// InputError is the expected way to reject bad input; anything else (a crash, a sanitizer
// report, a hang, an out-of-memory) is a bug. The work limit: a scenario that loads is only
// planned when every size is tiny, so a valid but huge scenario costs a load, never a plan.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "advisor/predict.h"
#include "base/input_error.h"
#include "scenario/scenario_loader.h"

namespace {

const std::string& scratch_dir() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/oomcast-fuzz-XXXXXX";
    const char* made = mkdtemp(pattern);
    return std::string(made ? made : "/tmp");
  }();
  return dir;
}

std::vector<std::string> split_parts(const std::string& text) {
  std::vector<std::string> parts(1);
  size_t start = 0;
  while (start <= text.size() && parts.size() < 5) {
    size_t end = text.find("\n%%\n", start);
    if (end == std::string::npos) {
      parts.back() = text.substr(start);
      break;
    }
    parts.back() = text.substr(start, end - start);
    parts.emplace_back();
    start = end + 4;
  }
  parts.resize(5);
  return parts;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// The work limit: sizes small enough that planning and replaying take milliseconds.
bool small_enough_to_plan(const oomcast::scenario::Scenario& s) {
  if (s.batch_size > 4 || s.seq_len > 256 || s.iterations > 12 || s.grad_accum_steps > 2) return false;
  if (s.eval.enabled && s.eval.batches > 2) return false;
  if (s.parallel.world_size > 64) return false;
  for (const auto& [name, value] : s.model.dims) {
    if (name == "layers" ? value > 3 : value > 4096) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::vector<std::string> parts = split_parts(std::string(reinterpret_cast<const char*>(data), size));
  const std::string& dir = scratch_dir();
  write_file(dir + "/model.yaml", parts[1]);
  write_file(dir + "/config.json", parts[2]);
  write_file(dir + "/ds.json", parts[3]);
  std::vector<std::string> overrides;
  size_t start = 0;
  while (start < parts[4].size() && overrides.size() < 8) {
    size_t end = parts[4].find('\n', start);
    if (end == std::string::npos) end = parts[4].size();
    if (end > start) overrides.push_back(parts[4].substr(start, end - start));
    start = end + 1;
  }
  try {
    oomcast::scenario::Scenario scenario =
        oomcast::scenario::load_scenario_text(parts[0], dir + "/scenario.yaml", overrides);
    if (small_enough_to_plan(scenario)) oomcast::advisor::predict(scenario);
  } catch (const oomcast::InputError&) {
  }
  return 0;
}
