// [hostile] tests of the scenario reader: each class of bad or extreme input of issue 10 is
// refused where it enters, with the key and the limit (or the fix) in the message.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include <unistd.h>

#include "scenario/device_profiles.h"
#include "scenario/model_catalog.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"
#include "scenario/size_limits.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;

const std::string kTiny = "model: gpt2-tiny\nbatch_size: 1\nseq_len: 64\n";
const std::string kHostile = std::string(OOMCAST_SOURCE_DIR) + "/tests/data/hostile/";

Scenario load(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return load_scenario_text(yaml, "s.yaml", overrides);
}

TEST_CASE("A model depth beyond the limit is refused naming model.layers and the limit", "[hostile]") {
  std::string error = error_of([] { load(kTiny, {"model.layers=1000000000"}); });
  CHECK(error.find("'model.layers' 1,000,000,000") != std::string::npos);
  CHECK(error.find("exceeds the limit of 1,024 layers") != std::string::npos);
}

TEST_CASE("A model width beyond the limit is refused naming the dimension", "[hostile]") {
  std::string error = error_of([] { load(kTiny, {"model.vocab=100000000"}); });
  CHECK(error.find("'model.vocab' 100,000,000") != std::string::npos);
  CHECK(error.find("exceeds the limit of 16,777,216") != std::string::npos);
}

TEST_CASE("Sizes whose product is one tensor beyond any device are refused before planning", "[hostile]") {
  std::string error = error_of([] { load(kTiny, {"batch_size=16777216", "model.vocab=16777216"}); });
  CHECK(error.find("batch_size 16,777,216 x seq_len 64 x model.vocab 16,777,216") != std::string::npos);
  CHECK(error.find("2^44 elements") != std::string::npos);
}

TEST_CASE("Eager attention scores beyond the limit are refused with the attention that avoids them", "[hostile]") {
  std::string error = error_of([] {
    load("model: llama-tiny\nbatch_size: 4096\nseq_len: 1048576\nattention: eager\ndevice: a100-80gb\n");
  });
  CHECK(error.find("attention scores are more than 2^44 elements") != std::string::npos);
  CHECK(error.find("attention flash/mem_efficient") != std::string::npos);
}

TEST_CASE("eval.batches beyond its limit is refused naming the key", "[hostile]") {
  std::string error = error_of([] { load(kTiny, {"eval.batches=1000000000"}); });
  CHECK(error.find("eval.batches") != std::string::npos);
  CHECK(error.find("1048576") != std::string::npos);
}

TEST_CASE("A model file whose key is a sequence is bad input naming the file, not a crash", "[hostile]") {
  std::string error = error_of([] { load_scenario(kHostile + "model_key_is_a_sequence.yaml"); });
  CHECK(error.find("model_with_a_sequence_key.yaml:2") != std::string::npos);
  CHECK(error.find("a model file's keys are names") != std::string::npos);
}

TEST_CASE("gradient_accumulation_steps in a DeepSpeed JSON obeys the grad_accum_steps limit", "[hostile]") {
  std::string error = error_of([] { load_scenario(kHostile + "ds_accum_2m.yaml"); });
  CHECK(error.find("ds_accum_2m.json:1: error: 'gradient_accumulation_steps' 2000000 exceeds the limit of 1048576") !=
        std::string::npos);
}

TEST_CASE("A deepspeed_config that is a directory is bad input, not an internal error", "[hostile]") {
  std::string error = error_of([] { load_scenario(kHostile + "ds_config_is_a_directory.yaml"); });
  CHECK(error.find("cannot read the DeepSpeed config file: it is a directory") != std::string::npos);
}

TEST_CASE("A scenario path that never ends is refused after a bounded read", "[hostile]") {
  std::string error = error_of([] { load_scenario("/dev/zero"); });
  CHECK(error.find("/dev/zero: error: the YAML file holds more than 64 MiB") != std::string::npos);
}

TEST_CASE("A scenario path that is a directory is refused", "[hostile]") {
  std::string error = error_of([] { load_scenario(kHostile); });
  CHECK(error.find("cannot read the YAML file: it is a directory") != std::string::npos);
}

TEST_CASE("HF Trainer's bf16 auto in a DeepSpeed JSON is resolved from the scenario and said", "[hostile]") {
  Scenario scenario = load_scenario(kHostile + "ds_bf16_auto.yaml");
  REQUIRE(scenario.precision == Precision::Fp32);
  REQUIRE_FALSE(scenario.parallel.warnings.empty());
  CHECK(scenario.parallel.warnings.back().find("bf16.enabled is \"auto\"") != std::string::npos);
  Scenario half = load_scenario(kHostile + "ds_bf16_auto.yaml", {"precision=pure_bf16"});
  CHECK(half.precision == Precision::PureBf16);
}

TEST_CASE("A conflict an override causes is reported at the override with the fix", "[hostile]") {
  const std::string flash = kTiny + "precision: amp_bf16\nattention: flash\ndevice: a100-80gb\n";
  std::string error = error_of([&] { load(flash, {"precision=fp32"}); });
  CHECK(error.find("--set precision=fp32: fp32 clashes with 'attention: flash' (line 5)") != std::string::npos);
  CHECK(error.find("add --set attention=mem_efficient") != std::string::npos);
  CHECK(error_of([&] { load(flash, {"precision=fp32", "attention=mem_efficient"}); }) == "no error");
}

TEST_CASE("A GPU without a profile is never suggested as a typo of another model", "[hostile]") {
  CHECK(device_did_you_mean("a5000").find("no profile for that GPU") != std::string::npos);
  CHECK(device_did_you_mean("rtx-4080").find("rtx-4090") == std::string::npos);
  CHECK(device_did_you_mean("rtx3090").find("rtx-4090") == std::string::npos);
  CHECK(device_did_you_mean("a100").find("a100-80gb") != std::string::npos);
  CHECK(device_did_you_mean("h100").find("h100-80gb") != std::string::npos);
  CHECK(device_did_you_mean("a100-80gv").find("a100-80gb") != std::string::npos);
}

TEST_CASE("A bare name that is a local folder says to write it as a path, never a preset that looks alike",
          "[hostile]") {
  // Issue 33: 'llama33-70b' (a folder of the user's) was answered "did you mean 'llama-2-70b'".
  const std::filesystem::path base =
      std::filesystem::temp_directory_path() / ("oomcast-local-folder-" + std::to_string(::getpid()));
  std::filesystem::create_directories(base / "llama33-70b");
  const std::string error = error_of([&] { resolve_model("llama33-70b", base.string()); });
  std::filesystem::remove_all(base);
  CHECK_THAT(error, Catch::Contains("'llama33-70b' is a local folder: write 'model: ./llama33-70b'"));
  CHECK_THAT(error, !Catch::Contains("llama-2-70b"));
}

TEST_CASE("Products of sizes saturate instead of wrapping", "[hostile]") {
  CHECK(saturating_product(int64_t{1} << 40, int64_t{1} << 40) == INT64_MAX);
  CHECK(saturating_product(3, 5) == 15);
}

}  // namespace
}  // namespace oomcast::scenario
