// Tests for planning a config.json of an architecture no family reads through the capture of
// transformers' own class (scenario/hf_capture.h). A stand-in "python" (a shell script) plays
// the capture, so these run without torch; validate/hf_capture.cmake runs the real one.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/input_error.h"
#include "scenario/hf_capture.h"
#include "scenario/model_catalog.h"

using namespace oomcast;
using namespace oomcast::scenario;

namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / "oomcast_hf_capture_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

// A stand-in python: writes a one-layer graph file to the path after -o, as the capture would.
std::string fake_capture(const fs::path& dir) {
  std::string script = write(dir / "python", R"(#!/bin/sh
while [ "$1" != "-o" ]; do shift; done
cat > "$2" <<'GRAPH'
oomcast_graph: 1
name: olmo-graph
parameters:
  - {name: fc.weight, shape: [8, 16]}
inputs:
  - {name: inputs, shape: [batch_size, 16], dtype: param}
  - {name: targets, shape: [batch_size], dtype: int64}
forward:
  - {op: linear, name: fc, x: inputs, weight: fc.weight, out: logits, shape: [batch_size, 8]}
  - {op: cross_entropy, name: loss, logits: logits, targets: targets, out: loss}
outputs: {loss: loss, logits: logits}
GRAPH
)");
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

InputError caught(const std::string& path) {
  try {
    resolve_model(path, "");
  } catch (const InputError& error) {
    return error;
  }
  FAIL("no InputError");
  return InputError({}, "", "");
}

}  // namespace

TEST_CASE("a config.json no family reads is planned from the captured graph of its class, cached, and says so",
          "[scenario][models]") {
  fs::path dir = fresh_dir("captured");
  setenv("OOMCAST_PYTHON", fake_capture(dir).c_str(), 1);
  setenv("OOMCAST_CACHE_DIR", (dir / "cache").c_str(), 1);
  fs::create_directories(dir / "olmo-2-1b");
  std::string config = write(dir / "olmo-2-1b" / "config.json", R"({"model_type": "olmo2", "hidden_size": 16})");
  ModelConfig first = resolve_model(config, "");
  CHECK(first.family == "graph");
  CHECK(first.name == "olmo-2-1b");
  REQUIRE(!first.warnings.empty());
  CHECK(first.warnings.back().find("model_type 'olmo2' has no oomcast family") != std::string::npos);
  CHECK(first.warnings.back().find("captured now") != std::string::npos);
  ModelConfig again = resolve_model(config, "");
  CHECK(again.warnings.back().find("(cached: ") != std::string::npos);
  unsetenv("OOMCAST_PYTHON");
  unsetenv("OOMCAST_CACHE_DIR");
}

TEST_CASE("without a python that can capture, an unknown model_type is one line naming the families and the capture",
          "[scenario][models][hostile]") {
  fs::path dir = fresh_dir("no-python");
  setenv("OOMCAST_PYTHON", (dir / "no-such-python").c_str(), 1);
  setenv("OOMCAST_CACHE_DIR", (dir / "cache").c_str(), 1);
  InputError error = caught(write(dir / "config.json", R"({"model_type": "olmo2"})"));
  CHECK(error.key() == "model_type");
  CHECK(error.message().find("unsupported model_type 'olmo2' (supported: ") == 0);
  CHECK(error.message().find("llama") != std::string::npos);
  CHECK(error.message().find("no-such-python could not be started") != std::string::npos);
  CHECK(error.message().find("capture/oomcast_capture.py") != std::string::npos);
  CHECK(error.message().find('\n') == std::string::npos);
  unsetenv("OOMCAST_PYTHON");
  unsetenv("OOMCAST_CACHE_DIR");
}

TEST_CASE("the capture's own refusal (no transformers, a model_type transformers lacks) is the error's reason",
          "[scenario][models][hostile]") {
  fs::path dir = fresh_dir("refused");
  std::string script = write(dir / "python", "#!/bin/sh\necho '[transformers] a warning' >&2\n"
                                             "echo 'oomcast_capture: error: x.json: model_type '\\''mamba9'\\'' is unknown "
                                             "to transformers 4.0.0 (a newer transformers may have it)' >&2\nexit 2\n");
  fs::permissions(script, fs::perms::owner_all);
  setenv("OOMCAST_PYTHON", script.c_str(), 1);
  setenv("OOMCAST_CACHE_DIR", (dir / "cache").c_str(), 1);
  InputError error = caught(write(dir / "config.json", R"({"model_type": "mamba9"})"));
  CHECK(error.message().find("could not be captured: x.json: model_type 'mamba9' is unknown to transformers 4.0.0") !=
        std::string::npos);
  const bool nothing_cached = !fs::exists(dir / "cache" / "hf-graphs") || fs::is_empty(dir / "cache" / "hf-graphs");
  CHECK(nothing_cached);
  unsetenv("OOMCAST_PYTHON");
  unsetenv("OOMCAST_CACHE_DIR");
}
