// Tests for the step-time model: the per-op roofline (op_cost.h) and the step's parts
// (step_time.h) — compute, recompute, optimizer, collectives.
#include <catch2/catch.hpp>

#include "planner/timing/op_cost.h"
#include "planner/ops/op_catalogue.h"
#include "planner/planner_test_support.h"
#include "planner/jobs/training_job.h"
#include "planner/timing/step_time.h"
#include "scenario/device_profiles.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::CheckpointMode;
using oomcast::scenario::DeviceThroughput;
using oomcast::scenario::FloatDtype;
using oomcast::scenario::OpKind;
using oomcast::scenario::OptimizerImpl;
using oomcast::scenario::ParallelEngine;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::device_config_from_profile;
using oomcast::scenario::find_device_profile;

namespace {

const DeviceThroughput& a100() { return find_device_profile("a100-80gb")->throughput; }

BuildContext autocast_context(int64_t batch) {
  BuildContext context;
  context.precision = precision_rules(Precision::AmpBf16);
  context.batch = batch;
  context.seq_len = 1;
  return context;
}

const OpNode& linear_of(const LayerGraph& graph) {
  for (const OpNode& op : graph.ops) {
    if (op.kind == OpKind::Linear) return op;
  }
  FAIL("no linear op in the graph");
  return graph.ops.front();
}

Scenario gpu_scenario(const std::string& model, int64_t batch, int64_t seq, const char* device = "a100-80gb") {
  Scenario s = oomcast::scenario::testing::cpu_scenario(model, batch, seq, Precision::AmpBf16, AttentionImpl::Flash);
  s.device = device_config_from_profile(*find_device_profile(device));
  s.iterations = 1;
  return s;
}

}  // namespace

TEST_CASE("a matmul of known FLOPs takes its FLOPs over the dtype's peak times the achievable fraction",
          "[planner][step_time]") {
  GraphBuilder g(autocast_context(8192));
  TensorId weight = g.parameter("fc.weight", {4096, 4096});
  TensorId x = g.input("x", 8192ull * 4096, DType::Float32);
  ops::linear(g, "fc", x, weight, kNoTensor, 4096, 4096);
  LayerGraph graph = g.finish();
  const OpNode& fc = linear_of(graph);
  OpCost cost = forward_cost(graph, fc);
  const double flops = 2.0 * 8192 * 4096 * 4096;
  CHECK(cost.flops == Approx(flops));
  CHECK(cost.compute_dtype == DType::BFloat16);
  // 2,048 tiles of 128×128 on 108 SMs: 19 waves, the last nearly full.
  CHECK(kernel_seconds(cost, fc.kind, a100()) == Approx(flops / (312e12 * kMatmulPeakFraction)).epsilon(0.01));
}

TEST_CASE("an elementwise op is bound by the bytes it reads and writes", "[planner][step_time]") {
  BuildContext context;
  context.batch = 1;
  GraphBuilder g(context);
  TensorId scale = g.parameter("scale", {1});
  TensorId x = g.input("x", 100'000'000, DType::Float32);
  TensorId y = ops::mul(g, "scaled", x, scale);
  ops::gelu(g, "act", y);
  LayerGraph graph = g.finish();
  const OpNode& gelu = graph.ops.back();
  REQUIRE(gelu.kind == OpKind::Gelu);
  OpCost cost = forward_cost(graph, gelu);
  CHECK(cost.bytes == Approx(2.0 * 4e8));  // read 400 MB, write 400 MB
  CHECK(kernel_seconds(cost, gelu.kind, a100()) == Approx(8e8 / (2039e9 * kHbmFraction)));
}

TEST_CASE("a tiny op holds the GPU for at least the kernel launch floor", "[planner][step_time]") {
  OpCost cost;
  cost.bytes = 64;
  cost.kernels = 1;
  CHECK(kernel_seconds(cost, OpKind::Add, a100()) == Approx(kKernelFloorSeconds));
}

TEST_CASE("a linear's backward costs twice its forward FLOPs when input and weight need gradients",
          "[planner][step_time]") {
  GraphBuilder g(autocast_context(64));
  TensorId weight = g.parameter("fc.weight", {256, 128});
  TensorId x = g.input("x", 64 * 128, DType::Float32);
  TensorId scale = g.parameter("scale", {128});
  TensorId scaled = ops::mul(g, "scale", x, scale);  // makes the linear's input require grad
  ops::linear(g, "fc", scaled, weight, kNoTensor, 128, 256);
  LayerGraph graph = g.finish();
  const OpNode& fc = linear_of(graph);
  CHECK(backward_cost(graph, fc).flops == Approx(2.0 * forward_cost(graph, fc).flops));
}

TEST_CASE("a linear whose input needs no gradient runs one backward GEMM", "[planner][step_time]") {
  GraphBuilder g(autocast_context(64));
  TensorId weight = g.parameter("fc.weight", {256, 128});
  TensorId x = g.input("x", 64 * 128, DType::Float32);
  ops::linear(g, "fc", x, weight, kNoTensor, 128, 256);
  LayerGraph graph = g.finish();
  const OpNode& fc = linear_of(graph);
  CHECK(backward_cost(graph, fc).flops == Approx(forward_cost(graph, fc).flops));
}

TEST_CASE("fp32 matmuls run at the FP32 peak and fp32 convolutions at TF32", "[planner][step_time]") {
  CHECK(matmul_peak_tflops(DType::Float32, OpKind::Linear, a100()) == Approx(19.5));
  CHECK(matmul_peak_tflops(DType::Float32, OpKind::Conv, a100()) == Approx(156.0));
  // A T4 has no bf16 tensor cores: bf16 falls back to FP32.
  CHECK(matmul_peak_tflops(DType::BFloat16, OpKind::Linear, find_device_profile("t4")->throughput) == Approx(8.1));
}

TEST_CASE("full checkpointing costs about one extra forward of the blocks", "[planner][step_time]") {
  Scenario s = gpu_scenario("gpt2", 4, 1024);
  s.checkpointing.mode = CheckpointMode::Full;
  StepTime time = plan_steps(s).step_time;
  REQUIRE(time.modelled);
  // The blocks are re-run up to the last op whose saved tensors backward needs (the
  // non-reentrant checkpoint stops there); the embeddings, LM head and loss are not.
  double blocks = 0.0;
  for (double unit : time.unit_forward_seconds) blocks += unit;
  CHECK(time.recompute_seconds > 0.9 * blocks);
  CHECK(time.recompute_seconds <= blocks * (1 + 1e-9));
  CHECK(time.recompute_seconds < time.forward_seconds);
  Scenario plain = gpu_scenario("gpt2", 4, 1024);
  StepTime base = plan_steps(plain).step_time;
  CHECK(base.recompute_seconds == 0.0);
  CHECK(time.step_seconds == Approx(base.step_seconds + time.recompute_seconds).epsilon(1e-6));
}

TEST_CASE("a transformer's training FLOPs are about six per parameter per token", "[planner][step_time]") {
  Scenario s = gpu_scenario("llama-2-7b", 1, 2048);
  PlannedTrace plan = plan_steps(s);
  const double six_n_d = 6.0 * static_cast<double>(plan.parameter_count) * 2048.0;
  // Attention adds 12·layers·hidden·seq per token (halved by the causal kernel); the
  // embedding lookup has no FLOPs.
  CHECK(plan.step_time.model_flops > 0.95 * six_n_d);
  CHECK(plan.step_time.model_flops < 1.15 * six_n_d);
}

TEST_CASE("gradient accumulation multiplies the compute of a step", "[planner][step_time]") {
  Scenario one = gpu_scenario("gpt2", 4, 512);
  Scenario four = one;
  four.grad_accum_steps = 4;
  StepTime a = plan_steps(one).step_time;
  StepTime b = plan_steps(four).step_time;
  // Within 1%: across micro-batches the host keeps running ahead of the GPU.
  CHECK(b.forward_seconds == Approx(4 * a.forward_seconds).epsilon(0.01));
  CHECK(b.optimizer_seconds == Approx(a.optimizer_seconds).epsilon(0.01));
  CHECK(b.tokens_per_step == Approx(4 * a.tokens_per_step));
}

TEST_CASE("an unfused AdamW step moves three times the bytes of the fused one", "[planner][step_time]") {
  Scenario s = gpu_scenario("gpt2", 1, 64);
  s.optimizer.impl = OptimizerImpl::Fused;
  const double fused = optimizer_step_time(s, {1'000'000'000}).device_seconds;
  s.optimizer.impl = OptimizerImpl::Foreach;
  CHECK(optimizer_step_time(s, {1'000'000'000}).device_seconds == Approx(3 * fused));
  // fp32 AdamW, fused: read p, g, m, v and write p, m, v: 28 bytes per element.
  CHECK(fused == Approx(28e9 / (2039e9 * kHbmFraction)));
}

TEST_CASE("a DDP all-reduce moves 2(n-1)/n of the gradient bytes over the node's links", "[planner][step_time]") {
  Scenario s = gpu_scenario("gpt2", 1, 64);
  s.parallel.engine = ParallelEngine::Ddp;
  s.parallel.world_size = 8;
  s.parallel.gpus_per_node = 8;
  CommunicationTime time = communication_time(s, 100'000'000, 100'000'000);
  const double bytes = 2.0 * 7.0 / 8.0 * 4e8;  // fp32 gradients
  CHECK(time.bytes == Approx(bytes));
  CHECK(time.seconds == Approx(bytes / (300e9 * kCollectivePeakFraction)));
  CHECK(time.overlappable == Approx(time.seconds));
}

TEST_CASE("ranks beyond one node run collectives over the inter-node network", "[planner][step_time]") {
  Scenario s = gpu_scenario("gpt2", 1, 64);
  s.parallel.engine = ParallelEngine::Ddp;
  s.parallel.world_size = 16;
  s.parallel.gpus_per_node = 8;
  CommunicationTime time = communication_time(s, 100'000'000, 100'000'000);
  CHECK(time.seconds == Approx(2.0 * 15.0 / 16.0 * 4e8 / (25e9 * kCollectivePeakFraction)));
}

TEST_CASE("ZeRO-3 gathers the parameters in forward and backward and reduce-scatters the gradients",
          "[planner][step_time]") {
  Scenario s = gpu_scenario("gpt2", 1, 64);
  s.parallel.engine = ParallelEngine::DeepSpeed;
  s.parallel.world_size = 4;
  s.parallel.gpus_per_node = 4;
  s.parallel.deepspeed.zero_optimization.stage = 3;
  s.parallel.deepspeed.zero_optimization.overlap_comm = true;
  CommunicationTime time = communication_time(s, 1000, 1000);
  CHECK(time.bytes == Approx(3.0 * 3.0 / 4.0 * 4000.0));  // two gathers and one reduce-scatter of fp32
}

TEST_CASE("FSDP2 gathers in forward and, when it reshards after forward, again in backward",
          "[planner][step_time]") {
  Scenario s = gpu_scenario("gpt2", 1, 64);
  s.parallel.engine = ParallelEngine::Fsdp2;
  s.parallel.world_size = 4;
  s.parallel.gpus_per_node = 4;
  s.parallel.fsdp2.mixed_precision = true;
  s.parallel.fsdp2.param_dtype = FloatDtype::BFloat16;
  s.parallel.fsdp2.reduce_dtype = FloatDtype::Float32;
  // two bf16 gathers and one fp32 reduce-scatter, each (n-1)/n of the tensor
  CHECK(communication_time(s, 1000, 1000).bytes == Approx(3.0 / 4.0 * (2 * 2000.0 + 4000.0)));
  s.parallel.fsdp2.reshard_after_forward = false;
  CHECK(communication_time(s, 1000, 1000).bytes == Approx(3.0 / 4.0 * (2000.0 + 4000.0)));
}

TEST_CASE("the cpu device has no step time", "[planner][step_time]") {
  Scenario s = oomcast::scenario::testing::cpu_scenario("gpt2-tiny", 1, 64);
  StepTime time = plan_steps(s).step_time;
  CHECK_FALSE(time.modelled);
  CHECK_FALSE(time.not_modelled.empty());
}
