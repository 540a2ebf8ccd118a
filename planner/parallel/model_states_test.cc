// Per-rank model-state bytes against DeepSpeed's published estimators
// (stage_1_and_2.py estimate_zero2_model_states_mem_needs, stage3.py
// estimate_zero3_model_states_mem_needs, additional_buffer_factor = 1) on real model graphs.
// Every expected figure is worked out by hand in the comments.
#include <catch2/catch.hpp>

#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::OffloadDevice;
using oomcast::scenario::ParallelEngine;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::ZeroConfig;

namespace {

// Plans a short step of `model` and returns its data-parallel summary (sizes come from the graph).
ParallelSummary summary_for(const std::string& model, int stage, int64_t world, int64_t gpus_per_node,
                            OffloadDevice optimizer_offload = OffloadDevice::None,
                            OffloadDevice param_offload = OffloadDevice::None) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario(model, 1, 16, Precision::PureBf16);
  scenario.iterations = 1;
  scenario.parallel.engine = ParallelEngine::DeepSpeed;
  scenario.parallel.world_size = world;
  scenario.parallel.gpus_per_node = gpus_per_node;
  ZeroConfig& zero = scenario.parallel.deepspeed.zero_optimization;
  zero.stage = stage;
  zero.offload_optimizer.device = optimizer_offload;
  zero.offload_param.device = param_offload;
  return plan_steps(scenario).parallel;
}

// Llama-2-7B: Ψ = 6,738,415,616; the largest module is embed_tokens (or lm_head),
// 32000 x 4096 = 131,072,000 parameters.
constexpr uint64_t kLlama7b = 6'738'415'616;
constexpr uint64_t kLlama7bLargest = 131'072'000;

}  // namespace

TEST_CASE("the graph gives Llama-2-7B's parameter count and largest module", "[parallel][model_states]") {
  ParallelSummary s = summary_for("llama-2-7b", 2, 8, 8);
  CHECK(s.sizes.parameters == kLlama7b);
  CHECK(s.sizes.largest_layer_parameters == kLlama7bLargest);
}

TEST_CASE("ZeRO-2 GPU bytes per rank equal estimate_zero2_model_states_mem_needs without offload",
          "[parallel][model_states]") {
  // gpu_mem = 4Ψ + 16Ψ/N. Llama-2-7B, N = 8: 4 x 6,738,415,616 = 26,953,662,464;
  // 16 x 6,738,415,616 / 8 = 13,476,831,232; sum 40,430,493,696.
  // Ours: bf16 params 2Ψ + the bf16 grads autograd produces 2Ψ + (fp32 master 4 + Adam m, v 8) x Ψ/N
  // + the fp32 grad partition cast for the step 4 x Ψ/N.
  ModelStateBytes m = summary_for("llama-2-7b", 2, 8, 8).model_states;
  CHECK(m.parameters + m.full_gradients + m.optimizer + m.step_fp32_gradients == 40'430'493'696ull);
  // cpu_mem = Ψ x 4 x gpus_per_node: each rank builds the fp32 model on the host first.
  // 6,738,415,616 x 4 x 8 = 215,629,299,712.
  CHECK(summary_for("llama-2-7b", 2, 8, 8).host_load_peak_per_node == 215'629'299'712ull);
}

TEST_CASE("ZeRO-2 bytes on GPT-2 small over two ranks equal the zero2 estimator", "[parallel][model_states]") {
  // Ψ = 124,439,808, N = 2: gpu_mem = 4Ψ + 16Ψ/2 = 12Ψ = 1,493,277,696.
  ModelStateBytes m = summary_for("gpt2", 2, 2, 2).model_states;
  CHECK(m.parameters + m.full_gradients + m.optimizer + m.step_fp32_gradients == 1'493'277'696ull);
}

TEST_CASE("ZeRO-2 with CPU offload keeps only the bf16 parameters on the GPU, as the zero2 estimator says",
          "[parallel][model_states]") {
  // cpu_offload: gpu_mem = 2Ψ = 13,476,831,232 for Llama-2-7B.
  // cpu_mem = Ψ x max(4 x gpus_per_node, 16). With 4 GPUs on one node: 16Ψ = 107,814,649,856, which is
  // the steady host state of the node: 4 ranks x (master 4 + m, v 8 + fp32 grads 4) x Ψ/4.
  ParallelSummary four = summary_for("llama-2-7b", 2, 4, 4, OffloadDevice::Cpu);
  CHECK(four.model_states.parameters + four.model_states.gradients + four.model_states.optimizer == 13'476'831'232ull);
  CHECK(four.host_bytes_per_node == 107'814'649'856ull);
  // With 8 GPUs, max(32, 16) = 32: the load-time peak, 8 ranks x 4Ψ = 215,629,299,712, above the steady 16Ψ.
  ParallelSummary eight = summary_for("llama-2-7b", 2, 8, 8, OffloadDevice::Cpu);
  CHECK(eight.host_bytes_per_node == 107'814'649'856ull);
  CHECK(std::max(eight.host_bytes_per_node, eight.host_load_peak_per_node) == 215'629'299'712ull);
}

TEST_CASE("ZeRO-3 GPU bytes per rank equal estimate_zero3_model_states_mem_needs without offload",
          "[parallel][model_states]") {
  // gpu_mem = 4L + 18Ψ/N = 4 x 131,072,000 + 18 x 6,738,415,616 / 8 = 524,288,000 + 15,161,435,136
  // = 15,685,723,136. Ours: the largest module gathered (2L) with its full grad (2L), the bf16 shard 2Ψ/N,
  // master + moments 12Ψ/N and the fp32 grads 4Ψ/N (Ψ/N = 842,301,952 < sub_group_size 1e9: one tile).
  // DeepSpeed's estimator leaves out the bf16 grad partition (2Ψ/N), which the schedule does allocate.
  ModelStateBytes m = summary_for("llama-2-7b", 3, 8, 8).model_states;
  CHECK(m.gathered_working_set + m.parameters + m.optimizer + m.step_fp32_gradients == 15'685'723'136ull);
  CHECK(m.gradients == 2 * 842'301'952ull);
  // cpu_mem with zero_init = L x 4 x gpus_per_node = 131,072,000 x 32 = 4,194,304,000.
  CHECK(summary_for("llama-2-7b", 3, 8, 8).host_load_peak_per_node == 4'194'304'000ull);
}

TEST_CASE("ZeRO-3 with optimizer offload matches the zero3 estimator on GPU and host", "[parallel][model_states]") {
  // gpu_mem = 4L + 2Ψ/N = 524,288,000 + 1,684,603,904 = 2,208,891,904.
  // cpu_mem (zero_init, one node) = 16Ψ = 107,814,649,856: 8 ranks x 16 x Ψ/8.
  ParallelSummary s = summary_for("llama-2-7b", 3, 8, 8, OffloadDevice::Cpu);
  const ModelStateBytes& m = s.model_states;
  CHECK(m.gathered_working_set + m.parameters + m.gradients + m.optimizer + m.step_fp32_gradients == 2'208'891'904ull);
  CHECK(s.host_bytes_per_node == 107'814'649'856ull);
}

TEST_CASE("ZeRO-3 with optimizer and parameter offload matches the zero3 estimator", "[parallel][model_states]") {
  // gpu_mem = 4L = 524,288,000; cpu_mem = 18Ψ / num_nodes = 121,291,481,088 on one node of 8.
  ParallelSummary s = summary_for("llama-2-7b", 3, 8, 8, OffloadDevice::Cpu, OffloadDevice::Cpu);
  const ModelStateBytes& m = s.model_states;
  CHECK(m.gathered_working_set + m.parameters + m.gradients + m.optimizer == 524'288'000ull);
  CHECK(s.host_bytes_per_node == 121'291'481'088ull);
  CHECK(s.host_bytes == 121'291'481'088ull / 8);
}

TEST_CASE("ZeRO-3 offload on Llama-2-70B over 16 nodes divides the host estimate by the node count",
          "[parallel][model_states]") {
  // Ψ = 68,976,648,192 (80 layers, h 8192, GQA 8 kv heads, ffn 28672, vocab 32000); N = 128 = 16 x 8.
  // cpu_mem = 18Ψ / 16 = 77,598,729,216 per node; gpu_mem = 4L = 4 x 32000 x 8192 = 1,048,576,000.
  ParallelSummary s = summary_for("llama-2-70b", 3, 128, 8, OffloadDevice::Cpu, OffloadDevice::Cpu);
  CHECK(s.sizes.parameters == 68'976'648'192ull);
  CHECK(s.host_bytes_per_node == 77'598'729'216ull);
  CHECK(s.model_states.gathered_working_set == 1'048'576'000ull);
}
