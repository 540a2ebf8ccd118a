// Tests of the scenario loader: a full scenario reads into the Scenario struct; typos, wrong
// types, impossible values and impossible combinations are errors with file:line:col.
#include "scenario/scenario_loader.h"

#include <functional>

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;

Scenario load(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return load_scenario_text(text, "s.yaml", overrides);
}

std::string load_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { load(text, overrides); });
}

const char* kGpt2 = R"(model: gpt2
batch_size: 8
seq_len: 1024
)";

TEST_CASE("a complete scenario fills every section of the Scenario", "[planner][scenario]") {
  Scenario s = load(R"(description: everything at once
model: gpt2
batch_size: 8
seq_len: 512
grad_accum_steps: 4
iterations: 5
precision: amp_bf16
attention: eager
dropout: 0.1
checkpointing: {mode: every_n, every_n: 3}
optimizer: {type: sgd, impl: fused, momentum: 0.9}
training_loop:
  zero_grad: zero
  zero_grad_position: before_forward
  caller_held_outputs: [logits, loss]
  keep_losses_across_iterations: true
eval: {batches: 2, no_grad: false, accumulate_loss_without_item: true}
device: {profile: h100-80gb, context_mib: 600, other_processes_mib: 1024}
allocator: {expandable_segments: true, memory_fraction: 0.5}
)");
  CHECK(s.source_path == "s.yaml");
  CHECK(s.model.family == "gpt2");
  CHECK(s.batch_size == 8);
  CHECK(s.seq_len == 512);
  CHECK(s.grad_accum_steps == 4);
  CHECK(s.iterations == 5);
  CHECK(s.precision == Precision::AmpBf16);
  CHECK(s.attention == AttentionImpl::Eager);
  CHECK(s.dropout == 0.1);
  CHECK(s.checkpointing.mode == CheckpointMode::EveryN);
  CHECK(s.checkpointing.every_n == 3);
  CHECK(s.optimizer.type == OptimizerType::Sgd);
  CHECK(s.optimizer.impl == OptimizerImpl::Fused);
  CHECK(s.optimizer.momentum == 0.9);
  CHECK_FALSE(s.loop.zero_grad_set_to_none);
  CHECK(s.loop.zero_grad_before_forward);
  CHECK(s.loop.caller_held_outputs == std::vector<std::string>{"logits", "loss"});
  CHECK(s.loop.keep_losses_across_iterations);
  CHECK(s.eval.enabled);
  CHECK(s.eval.batches == 2);
  CHECK_FALSE(s.eval.no_grad);
  CHECK(s.eval.accumulate_loss_without_item);
  CHECK(s.device.profile == "h100-80gb");
  CHECK(s.device.model.context_bytes == 600ull << 20);
  CHECK(s.device.model.other_process_bytes == 1024ull << 20);
  CHECK(s.device.cublas_workspace_bytes == 32ull << 20);
  CHECK(s.device.model.memory_fraction == 0.5);
  CHECK(s.allocator.expandable_segments);
}

TEST_CASE("a minimal scenario gets PyTorch's defaults", "[planner][scenario]") {
  Scenario s = load(kGpt2);
  CHECK(s.precision == Precision::Fp32);
  CHECK(s.attention == AttentionImpl::MemEfficient);  // SDPA's choice for fp32 on a GPU
  CHECK(s.optimizer.type == OptimizerType::AdamW);
  CHECK(s.optimizer.impl == OptimizerImpl::Foreach);
  CHECK(s.iterations == 3);
  CHECK(s.device.profile == "a100-80gb");
  CHECK(s.device.cublas_workspaces == 2);
  CHECK_FALSE(s.eval.enabled);
  CHECK_FALSE(s.allocator.expandable_segments);
}

TEST_CASE("a misspelt top-level key is an error with file, line, column and did-you-mean", "[planner][scenario]") {
  CHECK(load_error("model: gpt2\nbatch_szie: 8\nseq_len: 128\n") ==
        "s.yaml:2:1: error: unknown key 'batch_szie' in scenario (did you mean 'batch_size'?)");
}

TEST_CASE("a Hugging Face config.json given as the scenario says to name it as the model", "[planner][scenario]") {
  CHECK_THAT(error_of([] { load_scenario_text("{\"model_type\": \"llama\", \"hidden_size\": 64}", "config.json"); }),
             Catch::Contains("config.json:1") && Catch::Contains("not a scenario") && Catch::Contains("model: config.json"));
}

TEST_CASE("a graph file given as the scenario says to name it as the model", "[planner][scenario]") {
  CHECK_THAT(error_of([] { load_scenario_text("oomcast_graph: 1\nname: mine\n", "mine.graph.yaml"); }),
             Catch::Contains("mine.graph.yaml:1") && Catch::Contains("not a scenario") &&
                 Catch::Contains("model: mine.graph.yaml"));
}

TEST_CASE("a generate job without seq_len takes its prompt_len as the sequence", "[planner][scenario]") {
  Scenario s = load_scenario_text("model: gpt2-tiny\nbatch_size: 2\njob: {kind: generate, prompt_len: 48, new_tokens: 4}\n",
                                  "s.yaml");
  CHECK(s.seq_len == 48);
  CHECK_THAT(error_of([] { load_scenario_text("model: gpt2-tiny\nbatch_size: 2\njob: inference\n", "s.yaml"); }),
             Catch::Contains("seq_len"));
}

TEST_CASE("a word where batch_size needs an integer is a type error", "[planner][scenario]") {
  CHECK(load_error("model: gpt2\nbatch_size: eight\nseq_len: 128\n") ==
        "s.yaml:2:13: error: 'batch_size' must be an integer, got 'eight'");
}

TEST_CASE("batch_size 0 is an impossible value", "[planner][scenario]") {
  CHECK(load_error("model: gpt2\nbatch_size: 0\nseq_len: 128\n") ==
        "s.yaml:2:13: error: 'batch_size' must be at least 1, got 0");
}

TEST_CASE("a negative seq_len is an impossible value", "[planner][scenario]") {
  CHECK(load_error("model: gpt2\nbatch_size: 1\nseq_len: -5\n") ==
        "s.yaml:3:10: error: 'seq_len' must be at least 1, got -5");
}

TEST_CASE("an unknown precision lists the choices and the closest one", "[planner][scenario]") {
  CHECK(load_error(std::string(kGpt2) + "precision: fp33\n") ==
        "s.yaml:4:12: error: 'precision' must be one of fp32, amp_bf16, amp_fp16, pure_bf16; got 'fp33' "
        "(did you mean 'fp32'?)");
}

TEST_CASE("a misspelt key inside a section names the section", "[planner][scenario]") {
  CHECK(load_error(std::string(kGpt2) + "optimizer:\n  tpye: sgd\n") ==
        "s.yaml:5:3: error: unknown key 'tpye' in 'optimizer' (did you mean 'type'?)");
}

TEST_CASE("a missing model is an error", "[planner][scenario]") {
  CHECK(load_error("batch_size: 8\n") == "s.yaml:1:1: error: missing required key 'model'");
}

TEST_CASE("overrides set top-level keys, model dimensions, allocator keys and precision", "[planner][scenario]") {
  Scenario s = load(kGpt2, {"batch_size=32", "model.layers=4", "allocator.expandable_segments=true",
                            "precision=amp_bf16"});
  CHECK(s.batch_size == 32);
  CHECK(s.model.dims.at("layers") == 4);
  CHECK(s.allocator.expandable_segments);
  CHECK(s.precision == Precision::AmpBf16);
}

TEST_CASE("an override of an unknown key is an error with did-you-mean", "[planner][scenario]") {
  CHECK(load_error(kGpt2, {"batch_szie=32"}) ==
        "s.yaml: error: --set batch_szie=32: unknown key 'batch_szie' in scenario (did you mean 'batch_size'?)");
}

TEST_CASE("an override of an unknown model dimension suggests the family's dimension", "[planner][scenario]") {
  CHECK(load_error(kGpt2, {"model.layer=4"}) ==
        "s.yaml: error: --set model.layer=4: unknown key 'layer' in 'model' (did you mean 'layers'?)");
}

TEST_CASE("an override with an impossible value names the override", "[planner][scenario]") {
  CHECK(load_error(kGpt2, {"batch_size=0"}) ==
        "s.yaml: error: --set batch_size=0: 'batch_size' must be at least 1, got 0");
}

TEST_CASE("an unknown model preset suggests the closest preset", "[planner][scenario]") {
  CHECK(load_error("model: gtp2\nbatch_size: 8\nseq_len: 128\n").rfind(
            "s.yaml:1:8: error: unknown model preset 'gtp2' (did you mean 'gpt2'?)", 0) == 0);
}

TEST_CASE("a model map overrides dimensions of its preset", "[planner][scenario]") {
  Scenario s = load("model: {preset: gpt2, layers: 2}\nbatch_size: 1\nseq_len: 64\n");
  CHECK(s.model.dims.at("layers") == 2);
}

TEST_CASE("a seq_len beyond the position embedding is an error", "[planner][scenario]") {
  CHECK(load_error("model: gpt2\nbatch_size: 1\nseq_len: 4096\n") ==
        "s.yaml:3:10: error: 'seq_len' 4096 exceeds the model's max_positions 1024 (its position embedding has "
        "no more rows)");
}

TEST_CASE("a vision model takes image_size and rejects seq_len", "[planner][scenario]") {
  CHECK(load("model: resnet-50\nbatch_size: 8\n").seq_len == 224);
  CHECK(load("model: resnet-50\nbatch_size: 8\nimage_size: 160\n").seq_len == 160);
  CHECK(load_error("model: resnet-50\nbatch_size: 8\nseq_len: 128\n") ==
        "s.yaml:3:10: error: vision model 'resnet-50' takes 'image_size', not 'seq_len'");
}

TEST_CASE("a ViT takes exactly the image size it was built for", "[planner][scenario]") {
  CHECK(load_error("model: vit-b-16\nbatch_size: 8\nimage_size: 384\n") ==
        "s.yaml:3:13: error: 'image_size' 384 does not match vit-b-16, built for 224x224 images (set "
        "model.image_size to change the model)");
  CHECK(load("model: vit-b-16\nbatch_size: 8\nimage_size: 384\n", {"model.image_size=384"}).seq_len == 384);
}

TEST_CASE("flash attention in fp32 is rejected", "[planner][scenario]") {
  CHECK(load_error(std::string(kGpt2) + "attention: flash\n") ==
        "s.yaml:4:12: error: 'attention' flash needs a 16-bit precision (amp_bf16, amp_fp16 or pure_bf16): "
        "PyTorch's flash kernel has no fp32 path");
}

TEST_CASE("on the cpu device attention defaults to the CPU flash kernel, fp32 included", "[planner][scenario]") {
  Scenario scenario = load(std::string(kGpt2) + "device: cpu\n");
  CHECK(scenario.precision == Precision::Fp32);
  CHECK(scenario.attention == AttentionImpl::Flash);
}

TEST_CASE("on the cpu device a training step with dropout defaults to the math path", "[planner][scenario]") {
  CHECK(load(std::string(kGpt2) + "device: cpu\ndropout: 0.1\n").attention == AttentionImpl::SdpaMath);
  // Under model.eval() dropout_p is 0, so the flash kernel is allowed again.
  CHECK(load(std::string(kGpt2) + "device: cpu\ndropout: 0.1\njob: inference\n").attention == AttentionImpl::Flash);
}

TEST_CASE("bf16 on a T4 is rejected for lack of bfloat16 support", "[planner][scenario]") {
  CHECK(load_error(std::string(kGpt2) + "precision: amp_bf16\ndevice: t4\n") ==
        "s.yaml:4:12: error: 'precision' amp_bf16 needs bfloat16 support (compute capability 8.0+); t4 is 7.5");
}

TEST_CASE("an unknown device profile suggests by prefix", "[planner][scenario]") {
  CHECK(load_error(std::string(kGpt2) + "device: h100\n") ==
        "s.yaml:4:9: error: unknown device profile 'h100' (did you mean one of h100-80gb, h100-nvl?); known: "
        "a100-80gb, a100-40gb, h100-80gb, h200, l4, t4, v100-16gb, v100-32gb, rtx-3090, rtx-4090, a10g, l40s, "
        "b200, h100-nvl, h20, rtx-5090, rtx-6000-ada, a6000, a40, cpu");
}

TEST_CASE("an override reaching into a device shorthand keeps the profile", "[planner][scenario]") {
  Scenario s = load(std::string(kGpt2) + "device: l4\n", {"device.context_mib=300"});
  CHECK(s.device.profile == "l4");
  CHECK(s.device.model.context_bytes == 300ull << 20);
}

TEST_CASE("a custom device needs its total memory", "[planner][scenario]") {
  Scenario s = load(std::string(kGpt2) + "device: {total_gib: 12, compute_capability: 9.0}\n");
  CHECK(s.device.profile == "custom");
  CHECK(s.device.model.total_bytes == 12ull << 30);
  CHECK(s.device.cublas_workspace_bytes == 32ull << 20);
  CHECK(load_error(std::string(kGpt2) + "device: {context_mib: 100}\n") ==
        "s.yaml:4:9: error: 'device' needs 'profile' (one of the known GPUs) or 'total_gib' for a custom GPU");
}

TEST_CASE("the cpu device rejects GPU-only keys and defaults to the per-tensor optimizer", "[planner][scenario]") {
  Scenario s = load(std::string(kGpt2) + "device: cpu\n");
  CHECK(s.device.is_cpu);
  CHECK(s.optimizer.impl == OptimizerImpl::SingleTensor);
  CHECK(load_error(std::string(kGpt2) + "device: {profile: cpu, context_mib: 100}\n") ==
        "s.yaml:4:37: error: 'device.context_mib' does not apply to the cpu device");
}

TEST_CASE("an allocator conf string is parsed with PyTorch's rules", "[planner][scenario]") {
  Scenario s = load(std::string(kGpt2) + "allocator: expandable_segments:True,max_split_size_mb:128\n");
  CHECK(s.allocator.expandable_segments);
  CHECK(s.allocator.max_split_size == 128ull << 20);
}

TEST_CASE("an invalid allocator setting is reported at its YAML key", "[planner][scenario]") {
  std::string message = load_error(std::string(kGpt2) + "allocator:\n  garbage_collection_threshold: 1.5\n");
  CHECK(message.rfind("s.yaml:5:33: error: invalid option 'garbage_collection_threshold'", 0) == 0);
}

TEST_CASE("momentum on adamw is an impossible combination", "[planner][scenario]") {
  CHECK(load_error(std::string(kGpt2) + "optimizer: {type: adamw, momentum: 0.9}\n") ==
        "s.yaml:4:36: error: 'optimizer.momentum' applies only to sgd, not adamw");
}

TEST_CASE("selective checkpointing needs a list of known op kinds", "[planner][scenario]") {
  Scenario s = load(std::string(kGpt2) + "checkpointing: {mode: selective, recompute: [attention, gelu]}\n");
  CHECK(s.checkpointing.recompute_ops == std::vector<std::string>{"attention", "gelu"});
  CHECK(load_error(std::string(kGpt2) + "checkpointing: {mode: selective, recompute: [gleu]}\n")
            .find("got 'gleu' (did you mean 'gelu'?)") != std::string::npos);
}

TEST_CASE("an every_n key without mode every_n is rejected", "[planner][scenario]") {
  CHECK(load_error(std::string(kGpt2) + "checkpointing: {mode: full, every_n: 2}\n") ==
        "s.yaml:4:38: error: 'checkpointing.every_n' applies only to mode every_n");
}

TEST_CASE("checkpointing is reentrant by default for whole blocks and non-reentrant for selective policies",
          "[planner][scenario]") {
  CHECK(load(std::string(kGpt2) + "checkpointing: full\n").checkpointing.reentrant);
  CHECK(load(std::string(kGpt2) + "checkpointing: {mode: every_n, every_n: 2}\n").checkpointing.reentrant);
  CHECK_FALSE(load(std::string(kGpt2) + "checkpointing: {mode: full, reentrant: false}\n").checkpointing.reentrant);
  CHECK_FALSE(load(std::string(kGpt2) + "checkpointing: {mode: selective, recompute: [gelu]}\n").checkpointing.reentrant);
}

TEST_CASE("a selective policy refuses the reentrant checkpoint, which has no context_fn", "[planner][scenario]") {
  CHECK_THAT(load_error(std::string(kGpt2) + "checkpointing: {mode: selective, recompute: [gelu], reentrant: true}\n"),
             Catch::Contains("checkpointing.reentrant") && Catch::Contains("use_reentrant=False"));
  CHECK_THAT(load_error(std::string(kGpt2) + "checkpointing: {mode: none, reentrant: false}\n"),
             Catch::Contains("checkpointing.reentrant"));
}

TEST_CASE("a selective save list names the kept op kinds and excludes a recompute list", "[planner][scenario]") {
  Scenario s = load(std::string(kGpt2) + "checkpointing: {mode: selective, save: [linear, attention], every_other_linear: true}\n");
  CHECK(s.checkpointing.save_ops == std::vector<std::string>{"linear", "attention"});
  CHECK(s.checkpointing.every_other_linear);
  CHECK_THAT(load_error(std::string(kGpt2) + "checkpointing: {mode: selective, save: [linear], recompute: [gelu]}\n"),
             Catch::Contains("exclude each other"));
  CHECK_THAT(load_error(std::string(kGpt2) + "checkpointing: {mode: selective, save: [attention], every_other_linear: true}\n"),
             Catch::Contains("needs 'save' to list linear"));
}

TEST_CASE("optimizer.in_backward reads as a bool", "[planner][scenario]") {
  CHECK(load(std::string(kGpt2) + "optimizer: {type: adamw, in_backward: true}\n").optimizer.in_backward);
  CHECK_FALSE(load(std::string(kGpt2) + "optimizer: adamw\n").optimizer.in_backward);
}

}  // namespace
}  // namespace oomcast::scenario
