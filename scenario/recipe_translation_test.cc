// The framework readers (recipe_translation.h), the Hub id lookup and PEFT adapter configs:
// what each maps, what it warns about and what it refuses. The plans of the published-recipe
// configs against their hand-written scenarios are in advisor/recipe_plans_test.cc.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "scenario/hub_model_resolver.h"
#include "scenario/recipe_translation.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

const std::string kSource = OOMCAST_SOURCE_DIR;
const std::string kRecipes = kSource + "/scenarios/recipes/";

// Writes `text` to a file of its own in the temp directory and returns the path.
std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path directory = fs::temp_directory_path() / "oomcast-recipe-test";
  fs::create_directories(directory);
  const std::string path = (directory / name).string();
  std::ofstream(path) << text;
  return path;
}

// A Hugging Face cache folder as huggingface_hub lays it out, holding `repo_id`'s config.json.
std::string hub_cache_with(const std::string& repo_id, const std::string& config_json) {
  const fs::path cache = fs::temp_directory_path() / "oomcast-recipe-test-hub";
  std::string folder = "models--" + repo_id;
  folder.replace(folder.find('/'), 1, "--");
  const fs::path repo = cache / folder;
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / "0123abcd");
  std::ofstream(repo / "refs" / "main") << "0123abcd";
  fs::copy_file(config_json, repo / "snapshots" / "0123abcd" / "config.json", fs::copy_options::overwrite_existing);
  return cache.string();
}

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

const char* kTorchtuneHead =
    "model:\n"                                                         // 1
    "  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n"      // 2
    "  lora_attn_modules: [q_proj, v_proj]\n"                          // 3
    "tokenizer: {max_seq_len: 1024}\n"                                 // 4
    "batch_size: 2\n";                                                 // 5

TEST_CASE("a Hub id is read from the config.json of refs/main's snapshot in HF_HUB_CACHE") {
  const std::string config = kSource + "/tests/data/hf/Qwen3-0.6B/config.json";
  ::setenv("HF_HUB_CACHE", hub_cache_with("Qwen/Qwen3-0.6B", config).c_str(), 1);
  const Scenario by_id = load_scenario_text("model: Qwen/Qwen3-0.6B\nbatch_size: 1\nseq_len: 128\n", "hub.yaml");
  const Scenario by_path = load_scenario_text("model: " + config + "\nbatch_size: 1\nseq_len: 128\n", "path.yaml");
  ::unsetenv("HF_HUB_CACHE");
  CHECK(by_id.model.family == by_path.model.family);
  CHECK(by_id.model.dims == by_path.model.dims);
  CHECK(by_id.model.options == by_path.model.options);
}

TEST_CASE("a Hub id missing from the cache is refused with the command that fetches its config") {
  ::setenv("HF_HUB_CACHE", (fs::temp_directory_path() / "oomcast-recipe-test-empty-hub").c_str(), 1);
  const std::string error =
      error_of([] { load_scenario_text("model: meta-llama/Llama-3.1-8B\nbatch_size: 1\nseq_len: 8\n", "x.yaml"); });
  ::unsetenv("HF_HUB_CACHE");
  CHECK(error.find("huggingface-cli download meta-llama/Llama-3.1-8B config.json") != std::string::npos);
  CHECK(error.find("x.yaml:1:") != std::string::npos);
}

TEST_CASE("a recipe's Hub id missing from the cache is refused at the recipe's own line and key") {
  ::setenv("HF_HUB_CACHE", (fs::temp_directory_path() / "oomcast-recipe-test-empty-hub").c_str(), 1);
  const std::string path = temp_file("trainer_hub.yaml", "max_length: 512\nmodel_name_or_path: Org/Not-Cached\n");
  const std::string error = error_of([&] { load_scenario(path); });
  ::unsetenv("HF_HUB_CACHE");
  CHECK(error.find("trainer_hub.yaml:2:") != std::string::npos);
  CHECK(error.find("'model_name_or_path'") != std::string::npos);
  CHECK(error.find("huggingface-cli download Org/Not-Cached config.json") != std::string::npos);
}

TEST_CASE("the Hub cache is HF_HUB_CACHE, else HF_HOME/hub") {
  ::unsetenv("HF_HUB_CACHE");
  ::setenv("HF_HOME", "/somewhere/hf", 1);
  CHECK(hub_cache_directory() == "/somewhere/hf/hub");
  ::setenv("HF_HUB_CACHE", "/elsewhere", 1);
  CHECK(hub_cache_directory() == "/elsewhere");
  ::unsetenv("HF_HUB_CACHE");
  ::unsetenv("HF_HOME");
}

TEST_CASE("a PEFT adapter_config.json given as training.trainable is read as its LoRA") {
  const std::string adapter = kSource + "/tests/data/recipes/adapter_config.json";
  const Scenario scenario =
      load_scenario_text("model: llama-2-7b\nbatch_size: 1\nseq_len: 64\ntraining: {trainable: " + adapter + "}\n", "a.yaml");
  const LoraConfig& lora = scenario.job.training.lora;
  CHECK(lora.enabled);
  CHECK(lora.r == 16);
  CHECK(lora.alpha == 32.0);
  CHECK(lora.dropout == 0.05);
  CHECK(lora.target_modules == std::vector<std::string>{"q_proj", "v_proj"});
  CHECK(scenario.model.warnings.empty());
}

TEST_CASE("an adapter_config.json with modules_to_save warns that the trained copies are not planned") {
  const std::string adapter = temp_file("adapter_config.json",
      "{\"peft_type\": \"LORA\", \"r\": 8, \"target_modules\": [\"q_proj\"], \"modules_to_save\": [\"lm_head\"]}");
  const Scenario scenario =
      load_scenario_text("model: llama-2-7b\nbatch_size: 1\nseq_len: 64\ntraining: {trainable: " + adapter + "}\n", "a.yaml");
  CHECK(any_contains(scenario.model.warnings, "'modules_to_save' is not modelled"));
}

TEST_CASE("an adapter_config.json with DoRA is refused at the file, line and key") {
  const std::string adapter = temp_file("dora_adapter_config.json",
      "{\n\"peft_type\": \"LORA\",\n\"target_modules\": [\"q_proj\"],\n\"use_dora\": true\n}\n");
  const std::string error = error_of([&] {
    load_scenario_text("model: llama-2-7b\nbatch_size: 1\nseq_len: 64\ntraining: {trainable: " + adapter + "}\n", "a.yaml");
  });
  CHECK(error.find("dora_adapter_config.json:4:") != std::string::npos);
  CHECK(error.find("use_dora") != std::string::npos);
}

TEST_CASE("each framework's file is recognised by its keys, a scenario is not") {
  CHECK(recipe_kind(kRecipes + "torchtune-llama3_1-8b-lora-single-device.yaml") == "torchtune");
  CHECK(recipe_kind(kRecipes + "torchtitan-llama3-8b.toml") == "torchtitan");
  CHECK(recipe_kind(kRecipes + "axolotl-llama-3-8b-lora.yaml") == "axolotl");
  CHECK(recipe_kind(kRecipes + "trl-sft-qwen3-0.6b.yaml") == "hf_trainer");
  CHECK_FALSE(recipe_kind(kSource + "/scenarios/gpt2-small-b8-amp-bf16.yaml").has_value());
}

TEST_CASE("a translation lists the keys it used and those it ignored") {
  const RecipeTranslation translation = translate_recipe(kRecipes + "torchtune-llama3_1-8b-lora-single-device.yaml", {});
  CHECK(any_contains(translation.used_keys, "model.lora_rank"));
  CHECK(any_contains(translation.used_keys, "tokenizer.max_seq_len"));
  CHECK(any_contains(translation.ignored_keys, "lr_scheduler"));
  CHECK(any_contains(translation.ignored_keys, "optimizer.lr"));
  CHECK(translation.scenario_text().find("# used: ") != std::string::npos);
}

TEST_CASE("torchtune's activation offloading is a warning, not silence") {
  const std::string path = temp_file("offload.yaml", std::string(kTorchtuneHead) + "enable_activation_offloading: true\n");
  const Scenario scenario = load_scenario(path);
  CHECK(any_contains(scenario.model.warnings, "'enable_activation_offloading' true is not modelled"));
}

TEST_CASE("a torchtune key the reader does not know is listed in a warning") {
  const std::string path = temp_file("unknown.yaml", std::string(kTorchtuneHead) + "activation_offload_stream: true\n");
  const Scenario scenario = load_scenario(path);
  CHECK(any_contains(scenario.model.warnings, "does not know, not planned (they may change memory): activation_offload_stream"));
}

TEST_CASE("a torchtune optimizer with no model is refused at its file, line and key") {
  const std::string path = temp_file("optimizer.yaml", std::string(kTorchtuneHead) +
                                                           "optimizer:\n"                          // 6
                                                           "  _component_: torch.optim.RAdam\n");  // 7
  const std::string error = error_of([&] { load_scenario(path); });
  CHECK(error.find("optimizer.yaml:7:") != std::string::npos);
  CHECK(error.find("optimizer._component_") != std::string::npos);
}

TEST_CASE("a distributed torchtune recipe without its process count asks for the world size") {
  const std::string path = temp_file("distributed.yaml", std::string(kTorchtuneHead) + "fsdp_cpu_offload: false\n");
  CHECK(error_of([&] { load_scenario(path); }).find("--set parallel.world_size=N") != std::string::npos);
  const Scenario scenario = load_scenario(path, {"parallel.world_size=4"});
  CHECK(scenario.parallel.world_size == 4);
}

TEST_CASE("a torchtune recipe without max_seq_len takes the length from --set") {
  const std::string path = temp_file("no_length.yaml",
      "model: {_component_: torchtune.models.llama2.llama2_7b}\ntokenizer: {max_seq_len: null}\nbatch_size: 1\n");
  CHECK(error_of([&] { load_scenario(path); }).find("--set seq_len=N") != std::string::npos);
  CHECK(load_scenario(path, {"seq_len=512"}).seq_len == 512);
}

TEST_CASE("torchtitan's float8 converter is a warning") {
  const std::string path = temp_file("float8.toml",
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"float8\"]\n"
      "[training]\nlocal_batch_size = 1\nseq_len = 1024\n[parallelism]\ndata_parallel_shard_degree = 2\n");
  const Scenario scenario = load_scenario(path);
  CHECK(any_contains(scenario.model.warnings, "'model.converters'"));
  CHECK(scenario.parallel.world_size == 2);
}

TEST_CASE("a bad torchtitan value is refused at its file, line and key") {
  const std::string path = temp_file("bad_ac.toml",
      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n"                       // 1-3
      "[parallelism]\ndata_parallel_shard_degree = 1\n"                     // 4-5
      "[activation_checkpoint]\nmode = \"selective\"\n"                     // 6-7
      "selective_ac_option = \"often\"\n");                                 // 8
  const std::string error = error_of([&] { load_scenario(path); });
  CHECK(error.find("bad_ac.toml:8:") != std::string::npos);
  CHECK(error.find("activation_checkpoint.selective_ac_option") != std::string::npos);
}

TEST_CASE("Axolotl's offloaded gradient checkpointing is a warning") {
  const std::string path = temp_file("axolotl_offload.yaml",
      "base_model: NousResearch/Llama-2-7b-hf\nmicro_batch_size: 1\nsequence_len: 512\ngradient_checkpointing: offload\n");
  const Scenario scenario = load_scenario(path, {"model=llama-2-7b"});
  CHECK(any_contains(scenario.model.warnings, "'gradient_checkpointing' offload"));
  CHECK(scenario.checkpointing.mode == CheckpointMode::Full);
}

TEST_CASE("a Trainer optim with no model is refused naming the key and the names that are modelled") {
  const std::string path = temp_file("trainer_optim.json",
      "{\n  \"model_name_or_path\": \"llama-2-7b\",\n  \"max_length\": 512,\n  \"optim\": \"lion_32bit\"\n}\n");
  const std::string error = error_of([&] { load_scenario(path); });
  CHECK(error.find("trainer_optim.json:4:") != std::string::npos);
  CHECK(error.find("adamw_torch_fused") != std::string::npos);
}

TEST_CASE("Trainer arguments with Liger kernels and evaluation warn about both") {
  const std::string path = temp_file("trainer_liger.yaml",
      "model_name_or_path: llama-2-7b\nmax_length: 512\nuse_liger_kernel: true\neval_strategy: steps\n");
  const Scenario scenario = load_scenario(path);
  CHECK(any_contains(scenario.model.warnings, "'use_liger_kernel'"));
  CHECK(any_contains(scenario.model.warnings, "'eval_strategy' runs evaluation"));
}

}  // namespace
}  // namespace oomcast::scenario
