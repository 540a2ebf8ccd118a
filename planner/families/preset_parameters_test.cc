// Tests for the model catalogue read by scenario/ and expanded by the families: preset parameter counts against the published numbers,
// preset lookup errors, model YAML validation and Hugging Face config.json reading.
#include <catch2/catch.hpp>

#include <cstdio>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/input_error.h"
#include "planner/families/families.h"
#include "scenario/model_catalog.h"

using namespace oomcast;
using namespace oomcast::planner;
using oomcast::scenario::ModelConfig;
using oomcast::scenario::preset_names;
using oomcast::scenario::resolve_model;
using oomcast::planner::families::parameter_count;

namespace {

uint64_t preset_parameters(const std::string& name) { return parameter_count(resolve_model(name, "")); }

std::string write_temp(const std::string& file_name, const std::string& text) {
  // One folder per process: ctest runs each TEST_CASE as its own process, in parallel, and
  // several write a file called config.json.
  auto dir = std::filesystem::temp_directory_path() / ("oomcast_model_catalog_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / file_name;
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST_CASE("every GPT-2 preset has its published parameter count", "[planner][models]") {
  // 50257*768 + 1024*768 + 12*(12*768^2 + 13*768) + 2*768 = 124,439,808 (lm_head tied to wte)
  CHECK(preset_parameters("gpt2") == 124439808ull);
  CHECK(preset_parameters("gpt2-medium") == 354823168ull);
  CHECK(preset_parameters("gpt2-large") == 774030080ull);
  CHECK(preset_parameters("gpt2-xl") == 1557611200ull);
}

TEST_CASE("every Llama and Mistral preset has its published parameter count", "[planner][models]") {
  // 7b: 2*32000*4096 + 32*(4*4096^2 + 3*4096*11008 + 2*4096) + 4096 = 6,738,415,616
  CHECK(preset_parameters("llama-2-7b") == 6738415616ull);
  CHECK(preset_parameters("llama-2-13b") == 13015864320ull);
  // 70b (GQA, kv dim 1024): 2*32000*8192 + 80*(2*8192^2 + 2*8192*1024 + 3*8192*28672 + 2*8192) + 8192
  CHECK(preset_parameters("llama-2-70b") == 68976648192ull);
  CHECK(preset_parameters("llama-3-8b") == 8030261248ull);
  CHECK(preset_parameters("mistral-7b") == 7241732096ull);
}

TEST_CASE("every encoder and vision preset has its published parameter count", "[planner][models]") {
  // bert-base: embeddings 23,837,184 + 12 layers * 7,087,872 + pooler 590,592
  CHECK(preset_parameters("bert-base") == 109482240ull);
  CHECK(preset_parameters("bert-large") == 335141888ull);
  // vit-b-16: conv 590,592 + cls 768 + pos 151,296 + 12*7,087,872 + ln 1,536 + head 769,000
  CHECK(preset_parameters("vit-b-16") == 86567656ull);
  CHECK(preset_parameters("resnet-18") == 11689512ull);
  CHECK(preset_parameters("resnet-50") == 25557032ull);
}

TEST_CASE("the tiny test presets and the mlp resolve and count their parameters", "[planner][models]") {
  // mlp: 784*1024+1024 + 1024*1024+1024 + 1024*10+10 = 1,863,690
  CHECK(preset_parameters("mlp") == 1863690ull);
  // gpt2-tiny: 256*64 + 128*64 + 2*(12*64^2 + 13*64) + 2*64 = 24,576 + 99,968 + 128 = 124,672
  CHECK(preset_parameters("gpt2-tiny") == 124672ull);
  auto names = preset_names();
  for (const char* expected : {"gpt2", "llama-2-70b", "bert-base", "vit-b-16", "resnet-50", "mlp", "llama-tiny"}) {
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  }
}

TEST_CASE("a misspelt preset name is an error with a did-you-mean", "[planner][models]") {
  try {
    resolve_model("lama-2-7b", "");
    FAIL("expected an InputError");
  } catch (const InputError& error) {
    CHECK(error.message() == "unknown model preset 'lama-2-7b' (did you mean 'llama-2-7b'?)");
  }
}

TEST_CASE("a model YAML with an unknown dimension names the file, line and key", "[planner][models]") {
  std::string path = write_temp("bad.yaml", "family: gpt2\ndims:\n  layers: 2\n  hiden: 64\n");
  try {
    resolve_model(path, "");
    FAIL("expected an InputError");
  } catch (const InputError& error) {
    CHECK(error.key() == "hiden");
    CHECK(error.where().line == 4);
    CHECK(error.message().find("did you mean 'hidden'") != std::string::npos);
  }
}

TEST_CASE("a relative model file is resolved against the base directory", "[planner][models]") {
  std::string path = write_temp("two-layer.yaml",
                                "family: mlp\ndims: {input: 4, hidden: 8, layers: 1, output: 3}\n");
  ModelConfig model = resolve_model("two-layer.yaml", std::filesystem::path(path).parent_path().string());
  CHECK(model.family == "mlp");
  CHECK(model.name == "two-layer");
  // 4*8+8 + 8*3+3 = 67
  CHECK(parameter_count(model) == 67);
}

TEST_CASE("a Hugging Face llama config.json reads as a llama model", "[planner][models]") {
  std::string path = write_temp("config.json", R"({
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": false})");
  ModelConfig model = resolve_model(path, "");
  CHECK(model.family == "llama");
  CHECK(parameter_count(model) == 6738415616ull);
}

TEST_CASE("a Hugging Face gpt2 config.json reads as a tied gpt2 model", "[planner][models]") {
  std::string path = write_temp("config.json", R"({"model_type": "gpt2", "n_layer": 12, "n_embd": 768,
    "n_head": 12, "vocab_size": 50257, "n_positions": 1024, "n_inner": null})");
  CHECK(parameter_count(resolve_model(path, "")) == 124439808ull);
}

TEST_CASE("an unsupported model_type in config.json is an error", "[planner][models]") {
  std::string path = write_temp("config.json", R"({"model_type": "t5"})");
  CHECK_THROWS_AS(resolve_model(path, ""), InputError);
}
