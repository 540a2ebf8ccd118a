// Framework configs written from the published recipes (scenarios/recipes/) plan to the same
// prediction as the scenarios a user would write by hand for the same job
// (tests/data/recipes/*.scenario.yaml, and scenarios/ for the jobs that already had one).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "advisor/predict.h"
#include "scenario/scenario_loader.h"

namespace oomcast::advisor {
namespace {

namespace fs = std::filesystem;
using scenario::load_scenario;

const std::string kSource = OOMCAST_SOURCE_DIR;
const std::string kRecipes = kSource + "/scenarios/recipes/";
const std::string kByHand = kSource + "/tests/data/recipes/";

void check_same_plan(const scenario::Scenario& from_recipe, const scenario::Scenario& by_hand) {
  const Prediction recipe = predict(from_recipe);
  const Prediction hand = predict(by_hand);
  CHECK(recipe.parameters == hand.parameters);
  CHECK(recipe.peak_allocated_bytes == hand.peak_allocated_bytes);
  CHECK(recipe.peak_reserved_bytes == hand.peak_reserved_bytes);
  CHECK(recipe.fits == hand.fits);
  CHECK(recipe.peak_allocated_bytes > 0);
}

TEST_CASE("torchtune's Llama 3.1 8B LoRA single-device recipe plans as its hand-written scenario") {
  check_same_plan(load_scenario(kRecipes + "torchtune-llama3_1-8b-lora-single-device.yaml"),
                  load_scenario(kByHand + "torchtune-llama3_1-8b-lora-single-device.scenario.yaml"));
}

TEST_CASE("torchtune's Llama 3.1 8B full distributed recipe plans as its hand-written scenario") {
  check_same_plan(load_scenario(kRecipes + "torchtune-llama3_1-8b-full-distributed.yaml"),
                  load_scenario(kByHand + "torchtune-llama3_1-8b-full-distributed.scenario.yaml"));
}

TEST_CASE("torchtitan's Llama 3 8B config on 8 GPUs plans as its hand-written scenario") {
  check_same_plan(load_scenario(kRecipes + "torchtitan-llama3-8b.toml", {"parallel.world_size=8"}),
                  load_scenario(kByHand + "torchtitan-llama3-8b.scenario.yaml"));
}

TEST_CASE("a torchtitan FSDP2 x TP x PP config plans as scenarios/llama-3-8b-tp8-pp4.yaml") {
  check_same_plan(load_scenario(kRecipes + "torchtitan-llama3-8b-tp8-pp4.toml", {"device=h100-80gb"}),
                  load_scenario(kSource + "/scenarios/llama-3-8b-tp8-pp4.yaml"));
}

TEST_CASE("Axolotl's Llama 3 8B LoRA example plans as its hand-written scenario") {
  check_same_plan(load_scenario(kRecipes + "axolotl-llama-3-8b-lora.yaml", {"model=llama-3-8b"}),
                  load_scenario(kByHand + "axolotl-llama-3-8b-lora.scenario.yaml"));
}

TEST_CASE("TRL SFT arguments with a Hub id in the local cache plan as their hand-written scenario") {
  // The Hub id Qwen/Qwen3-0.6B resolved from a cache folder built here.
  const fs::path cache = fs::temp_directory_path() / "oomcast-recipe-plans-hub";
  const fs::path snapshot = cache / "models--Qwen--Qwen3-0.6B" / "snapshots" / "feedbeef";
  fs::create_directories(snapshot);
  fs::create_directories(cache / "models--Qwen--Qwen3-0.6B" / "refs");
  std::ofstream(cache / "models--Qwen--Qwen3-0.6B" / "refs" / "main") << "feedbeef\n";
  fs::copy_file(kSource + "/tests/data/hf/Qwen3-0.6B/config.json", snapshot / "config.json",
                fs::copy_options::overwrite_existing);
  ::setenv("HF_HUB_CACHE", cache.c_str(), 1);
  const scenario::Scenario from_recipe = load_scenario(kRecipes + "trl-sft-qwen3-0.6b.yaml");
  ::unsetenv("HF_HUB_CACHE");
  check_same_plan(from_recipe, load_scenario(kByHand + "trl-sft-qwen3-0.6b.scenario.yaml"));
}

TEST_CASE("a PEFT adapter_config.json as training.trainable plans as the LoRA written in the scenario") {
  check_same_plan(load_scenario(kSource + "/scenarios/llama-2-7b-lora-24gb.yaml",
                                {"training.trainable=../tests/data/recipes/adapter_config.json"}),
                  load_scenario(kSource + "/scenarios/llama-2-7b-lora-24gb.yaml"));
}

}  // namespace
}  // namespace oomcast::advisor
