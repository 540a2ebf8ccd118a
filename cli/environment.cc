// with_environment_alloc_conf(); see environment.h.
#include "cli/environment.h"

#include <cstdio>
#include <cstdlib>

#include "base/input_error.h"
#include "scenario/scenario_loader.h"

namespace oomcast::cli {

std::optional<std::string> environment_alloc_conf() {
  const char* value = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

std::vector<std::string> with_environment_alloc_conf(const std::string& path, std::vector<std::string> overrides) {
  std::optional<std::string> conf = environment_alloc_conf();
  if (!conf) return overrides;
  try {
    if (!scenario::load_scenario(path, overrides).allocator.source_text.empty()) {
      std::fprintf(stderr, "note: PYTORCH_CUDA_ALLOC_CONF=%s in the environment is not used: the scenario sets "
                           "its own allocator configuration\n", conf->c_str());
      return overrides;
    }
  } catch (const InputError&) {
    return overrides;  // the command's own load reports the error
  }
  std::string quoted;
  for (char c : *conf) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  overrides.push_back("allocator.conf='" + quoted + "'");
  std::fprintf(stderr, "note: using PYTORCH_CUDA_ALLOC_CONF=%s from the environment (the scenario sets no allocator "
                       "configuration)\n", conf->c_str());
  return overrides;
}

}  // namespace oomcast::cli
