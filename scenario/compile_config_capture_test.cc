// Tests of planning a Hugging Face config.json with `compile:`: the config (a family's or not)
// is replaced by the graph file of its compiled capture (capture_compiled_config), the one path
// a model file takes too. A stand-in "python" (a shell script) plays the capture, so these run
// without torch; validate/compiled/hf-llama-tiny.yaml runs the real one against PyTorch.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "scenario/compile_config_loader.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / "oomcast_compile_capture_test" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string write(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A stand-in python: records its arguments in args.txt and writes the bundled mlp graph with a
// compiled: key (the device kind it was asked for) to the path after -o.
std::string fake_compiled_capture(const fs::path& dir) {
  const std::string mlp = std::string(OOMCAST_SOURCE_DIR) + "/tests/data/graphs/mlp.graph.yaml";
  std::string script = write(dir / "python", "#!/bin/sh\necho \"$@\" > " + (dir / "args.txt").string() +
                                                 "\ndevice=cuda\nwhile [ \"$1\" != \"-o\" ]; do\n"
                                                 "  [ \"$1\" = --for-device ] && device=$2\n  shift\ndone\n"
                                                 "{ cat " + mlp + "; echo \"compiled: {mode: default, scope: [model, "
                                                 "loss], graphs: 2, graph_breaks: 0, for_device: $device}\"; } > \"$2\"\n");
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

const char* kLlamaConfig = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
 "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 1, "num_hidden_layers": 2,
 "vocab_size": 128, "max_position_embeddings": 256, "rms_norm_eps": 1e-05, "tie_word_embeddings": true})";

}  // namespace

TEST_CASE("a family's config.json with compile is planned from its compiled capture for the scenario's device",
          "[scenario][compile]") {
  fs::path dir = fresh_dir("family");
  setenv("OOMCAST_PYTHON", fake_compiled_capture(dir).c_str(), 1);
  setenv("OOMCAST_CACHE_DIR", (dir / "cache").c_str(), 1);
  const std::string config = write(dir / "config.json", kLlamaConfig);
  Scenario s = load_scenario_text(
      "model: " + config + "\nbatch_size: 4\nseq_len: 32\ndevice: cpu\ncompile: {scope: [model, loss]}\n", "s.yaml");
  CHECK(s.model.family == "graph");
  CHECK(s.compile.enabled);
  CHECK(s.compile.graphs == 2);
  const std::string args = read(dir / "args.txt");
  CHECK(args.find("--compile {mode: default, fullgraph: false, dynamic: false, scope: [model, loss]") !=
        std::string::npos);
  CHECK(args.find("--for-device cpu") != std::string::npos);
  unsetenv("OOMCAST_PYTHON");
  unsetenv("OOMCAST_CACHE_DIR");
}

TEST_CASE("a config.json compiled without its loss is refused at compile.scope", "[scenario][compile]") {
  fs::path dir = fresh_dir("no-loss");
  setenv("OOMCAST_PYTHON", fake_compiled_capture(dir).c_str(), 1);
  setenv("OOMCAST_CACHE_DIR", (dir / "cache").c_str(), 1);
  const std::string config = write(dir / "config.json", kLlamaConfig);
  const std::string error = testing::error_of([&] {
    load_scenario_text("model: " + config + "\nbatch_size: 4\nseq_len: 32\ndevice: cpu\ncompile: {scope: [model]}\n",
                       "s.yaml");
  });
  CHECK(error.find("scope: [model, loss]") != std::string::npos);
  CHECK(!fs::exists(dir / "args.txt"));
  unsetenv("OOMCAST_PYTHON");
  unsetenv("OOMCAST_CACHE_DIR");
}

TEST_CASE("a config.json the compiled capture refuses is one line at compile with the capture's reason",
          "[scenario][compile][hostile]") {
  fs::path dir = fresh_dir("refused");
  std::string script = write(dir / "python", "#!/bin/sh\necho 'oomcast_capture: error: config.json: torch.compile "
                                             "could not run the step: Unsupported: data-dependent branch' >&2\nexit 2\n");
  fs::permissions(script, fs::perms::owner_all);
  setenv("OOMCAST_PYTHON", script.c_str(), 1);
  setenv("OOMCAST_CACHE_DIR", (dir / "cache").c_str(), 1);
  const std::string config = write(dir / "config.json", kLlamaConfig);
  const std::string error = testing::error_of([&] {
    load_scenario_text(
        "model: " + config + "\nbatch_size: 4\nseq_len: 32\ndevice: cpu\ncompile: {scope: [model, loss]}\n", "s.yaml");
  });
  CHECK(error.find("torch.compile could not run the step: Unsupported: data-dependent branch") != std::string::npos);
  CHECK(error.find('\n') == std::string::npos);
  unsetenv("OOMCAST_PYTHON");
  unsetenv("OOMCAST_CACHE_DIR");
}

}  // namespace oomcast::scenario
