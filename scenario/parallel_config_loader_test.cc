// The scenario's `parallel:` section: DeepSpeed's defaults and key names, a DeepSpeed JSON
// config read as it is ("auto" values, unmodelled keys listed), cross-checks with precision
// and batch size, and errors that name the file, line and key.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/input_error.h"
#include "scenario/parallel_config_loader.h"
#include "scenario/scenario_loader.h"

using namespace oomcast;
using namespace oomcast::scenario;

namespace {

std::string scenario_dir() { return std::string(OOMCAST_SOURCE_DIR) + "/scenarios"; }

std::string write_temp(const std::string& name, const std::string& text) {
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("oomcast-parallel-test-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace

TEST_CASE("a DeepSpeed zero_optimization section without values takes DeepSpeed's defaults", "[parallel][loader]") {
  Scenario s = load_scenario_text(
      "model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: {world_size: 8, deepspeed: {zero_optimization: {stage: 2}}}\n",
      "x.yaml");
  const ZeroConfig& zero = s.parallel.deepspeed.zero_optimization;
  CHECK(s.parallel.engine == ParallelEngine::DeepSpeed);
  CHECK(zero.reduce_bucket_size == 500'000'000);
  CHECK(zero.allgather_bucket_size == 500'000'000);
  CHECK(zero.stage3_prefetch_bucket_size == 50'000'000);
  CHECK(zero.stage3_max_live_parameters == 1'000'000'000);
  CHECK(zero.stage3_param_persistence_threshold == 100'000);
  CHECK(zero.contiguous_gradients);
  CHECK_FALSE(zero.overlap_comm);  // DeepSpeed turns it on by default only for stage 3
  CHECK(s.parallel.gpus_per_node == 8);
}

TEST_CASE("overlap_comm defaults to true at ZeRO stage 3, as DeepSpeed's validator sets it", "[parallel][loader]") {
  Scenario s = load_scenario_text(
      "model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: {world_size: 2, deepspeed: {zero_optimization: {stage: 3}}}\n",
      "x.yaml");
  CHECK(s.parallel.deepspeed.zero_optimization.overlap_comm);
}

TEST_CASE("a DeepSpeed JSON config is read as it is, with auto values resolved from the model", "[parallel][loader]") {
  Scenario s = load_scenario(scenario_dir() + "/llama-2-70b-zero3-offload.yaml");
  const ZeroConfig& zero = s.parallel.deepspeed.zero_optimization;
  CHECK(zero.stage == 3);
  // HF Trainer's "auto": hidden^2 = 8192^2, 0.9 hidden^2, 10 hidden.
  CHECK(zero.reduce_bucket_size == 67'108'864);
  CHECK(zero.stage3_prefetch_bucket_size == 60'397'977);
  CHECK(zero.stage3_param_persistence_threshold == 81'920);
  CHECK(zero.offload_optimizer.device == OffloadDevice::Cpu);
  CHECK(zero.offload_param.pin_memory);
  CHECK(s.precision == Precision::PureBf16);  // bf16.enabled
  CHECK(s.grad_accum_steps == 4);             // gradient_accumulation_steps
}

TEST_CASE("keys of a DeepSpeed JSON config that are not modelled are listed in a warning", "[parallel][loader]") {
  Scenario s = load_scenario(scenario_dir() + "/llama-2-70b-zero3-offload.yaml");
  REQUIRE(s.parallel.warnings.size() == 1);
  const std::string& warning = s.parallel.warnings[0];
  for (const char* key : {"gradient_clipping", "optimizer", "steps_per_print", "wall_clock_breakdown",
                          "zero_optimization.stage3_gather_16bit_weights_on_model_save"}) {
    CHECK(warning.find(key) != std::string::npos);
  }
}

TEST_CASE("a bad value in a DeepSpeed JSON config names the file, line and key", "[parallel][loader]") {
  std::string json = write_temp("bad.json", "{\n  \"bf16\": {\"enabled\": true},\n  \"zero_optimization\": {\n    \"stage\": 5\n  }\n}\n");
  std::string yaml = write_temp("bad.yaml", "model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: {world_size: 2, deepspeed_config: " +
                                                json + "}\n");
  try {
    load_scenario(yaml);
    FAIL("expected an error");
  } catch (const InputError& error) {
    CHECK(error.where().file == json);
    CHECK(error.where().line == 4);
    CHECK(error.key() == "zero_optimization.stage");
  }
}

TEST_CASE("an unknown zero_optimization key in YAML is an error with a did-you-mean", "[parallel][loader]") {
  try {
    load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel:\n  world_size: 2\n  deepspeed:\n"
                       "    zero_optimization: {stage: 2, reduce_bucket_sise: 1.0e8}\n",
                       "x.yaml");
    FAIL("expected an error");
  } catch (const InputError& error) {
    CHECK(error.where().line == 7);
    CHECK(std::string(error.what()).find("reduce_bucket_size") != std::string::npos);
  }
}

TEST_CASE("autocast precision with DeepSpeed is reported at the precision key", "[parallel][loader]") {
  CHECK_THROWS_WITH(load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\nprecision: amp_bf16\n"
                                       "parallel: {world_size: 2, deepspeed: {zero_optimization: {stage: 1}}}\n",
                                       "x.yaml"),
                    Catch::Contains("x.yaml:4:12") && Catch::Contains("autocast"));
}

TEST_CASE("FSDP bf16 mixed precision plans the model in bf16", "[parallel][loader]") {
  Scenario s = load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\n"
                                  "parallel: {world_size: 4, fsdp: {mixed_precision: {param_dtype: bf16}}}\n",
                                  "x.yaml");
  CHECK(s.precision == Precision::PureBf16);
  CHECK(s.parallel.fsdp.reduce_dtype == FloatDtype::BFloat16);  // MixedPrecision: reduce_dtype follows param_dtype
  CHECK(s.parallel.fsdp.sharding_strategy == FsdpSharding::FullShard);
}

TEST_CASE("NCCL buffers are added to the memory held outside the allocator", "[parallel][loader]") {
  Scenario single = load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\n", "x.yaml");
  Scenario ddp = load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: {world_size: 8, ddp: {}}\n",
                                    "x.yaml");
  // 16 channels x 2 ring peers x (4 MiB + 4 MiB + 256 KiB) = 264 MiB.
  CHECK(ddp.parallel.nccl_buffer_bytes == 264ull << 20);
  CHECK(ddp.device.model.context_bytes == single.device.model.context_bytes + (264ull << 20));
  Scenario measured = load_scenario_text(
      "model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: {world_size: 8, nccl_buffer_mib: 100, ddp: {}}\n", "x.yaml");
  CHECK(measured.device.model.context_bytes == single.device.model.context_bytes + (100ull << 20));
}

TEST_CASE("world_size follows from train_batch_size in a DeepSpeed config", "[parallel][loader]") {
  std::string json = write_temp("tbs.json", "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 2,\n"
                                            " \"gradient_accumulation_steps\": 4, \"zero_optimization\": {\"stage\": 1}}\n");
  Scenario s = load_scenario_text("model: gpt2\nbatch_size: 2\nseq_len: 64\nparallel: {deepspeed_config: " + json + "}\n",
                                  "x.yaml");
  CHECK(s.parallel.world_size == 8);  // 64 / (2 x 4)
  CHECK(s.grad_accum_steps == 4);
}

TEST_CASE("a train_batch_size that is not micro batch x accumulation x world size is refused, naming that key",
          "[parallel][loader][hostile]") {
  std::string json = write_temp("tbs_wrong.json", "{\"train_batch_size\": 64, \"train_micro_batch_size_per_gpu\": 2,\n"
                                                  " \"gradient_accumulation_steps\": 4, \"zero_optimization\": {\"stage\": 1}}\n");
  auto load = [&](int world) {
    return load_scenario_text("model: gpt2\nbatch_size: 2\nseq_len: 64\nparallel: {world_size: " + std::to_string(world) +
                                  ", deepspeed_config: " + json + "}\n",
                              "x.yaml");
  };
  CHECK(load(8).parallel.world_size == 8);  // 2 x 4 x 8 = 64
  try {
    load(4);
    FAIL("no error");
  } catch (const InputError& error) {
    CHECK(error.key() == "train_batch_size");
    CHECK(error.where().file == json);
    CHECK_THAT(error.message(), Catch::Contains("x world_size 4 = 32"));
  }
}

TEST_CASE("FSDP use_orig_params is off unless written, and LoRA is accepted with every engine", "[parallel][loader]") {
  const std::string lora = "training: {trainable: {lora: {r: 8, target_modules: [c_attn]}}}\n";
  Scenario plain = load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: {world_size: 2, fsdp: {}}\n", "x.yaml");
  CHECK_FALSE(plain.parallel.fsdp.use_orig_params);
  Scenario fsdp = load_scenario_text(
      "model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: {world_size: 2, fsdp: {use_orig_params: true}}\n" + lora, "x.yaml");
  CHECK(fsdp.parallel.fsdp.use_orig_params);
  CHECK(fsdp.job.training.lora.enabled);
  for (const char* engine : {"ddp: {}", "deepspeed: {zero_optimization: {stage: 3}}"}) {
    INFO(engine);
    Scenario s = load_scenario_text(
        "model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: {world_size: 2, " + std::string(engine) + "}\n" + lora, "x.yaml");
    CHECK(s.job.training.lora.enabled);
  }
}

TEST_CASE("no_sync with a single micro-batch is refused at its own line in FSDP and FSDP2 sections", "[parallel][loader]") {
  for (const std::string engine : {"fsdp", "fsdp2"}) {
    INFO(engine);
    try {
      load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel:\n  world_size: 2\n  " + engine +
                             ":\n    no_sync: true\n",
                         "x.yaml");
      FAIL("expected an error");
    } catch (const InputError& error) {
      CHECK(error.where().line == 7);
      CHECK(error.key() == "parallel." + engine + ".no_sync");
      CHECK(std::string(error.what()).find("grad_accum_steps") != std::string::npos);
    }
  }
  CHECK(load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\ngrad_accum_steps: 2\nparallel:\n  world_size: 2\n"
                           "  fsdp2: {no_sync: true}\n",
                           "x.yaml")
            .parallel.fsdp2.no_sync);
}
