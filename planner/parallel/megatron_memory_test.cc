// Megatron-LM's theoretical per-GPU weight-and-optimizer memory (megatron/training/
// theoretical_memory_usage.py, compute_weight_and_optimizer_memory, NVIDIA/Megatron-LM main,
// 2025) as a cross-check of a model-parallel rank's model states. Its stated assumptions: the
// most loaded shard holds (transformer block / PP + one embedding) / TP parameters; each
// parameter costs 18 bytes (bf16 weight, fp32 main gradient, fp32 master weight, two fp32 Adam
// moments), or 6 + 12 / DP with the distributed optimizer (the master weight and moments
// sharded over the data-parallel ranks, the bf16 weight and fp32 gradient not). The rank compared
// is a pure-bf16 AdamW job with fp32 master weights (training.master_weights), whose gradients
// are bf16: 2 bytes where Megatron's main_grad buffer holds 4 (Megatron-LM arguments.py turns on
// accumulate_allreduce_grads_in_fp32 for bf16). The activation formulas
// (compute_activation_memory) assume GPT's LayerNorm, dropout, a 4h GeLU MLP and selective
// recomputation, none of which the llama family planned here has, so they are not compared.
#include <catch2/catch.hpp>

#include <cmath>

#include "planner/jobs/training_job.h"
#include "planner/parallel/mesh_rank.h"
#include "planner/parallel/rank_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::ParallelEngine;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::planner::testing::live_by_category;

namespace {

// Llama 3 8B (hidden 4096, 32 layers, 32 heads, 8 KV groups, SwiGLU MLP 14336, RMSNorm,
// vocab 128256, untied output) under TP 8 x PP 4 x DP `dp`: Megatron's most loaded shard.
double megatron_most_loaded_shard() {
  const double h = 4096, layers = 32, heads = 32, groups = 8, ffn = 14336, vocab = 128256;
  const double tp = 8, pp = 4;
  const double attention = 2 * h * h * (1 + groups / heads);
  const double layer = 2 * h * (ffn * 1.5 + 1) + attention;  // swiglu, RMSNorm (norm size 1)
  const double block = layer * layers + h;                    // + final norm
  return (block / pp + h * vocab) / tp;
}

Scenario llama_8b_tp8_pp4(ParallelEngine engine, int64_t dp) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-3-8b", 1, 64, Precision::PureBf16);
  scenario.parallel.engine = engine;
  scenario.parallel.world_size = 32 * dp;
  scenario.parallel.gpus_per_node = 8;
  scenario.parallel.mesh.tensor_parallel = 8;
  scenario.parallel.mesh.pipeline_parallel = 4;
  scenario.parallel.mesh.planned_stage = 0;  // Megatron's most loaded shard: the embedding's stage
  scenario.job.training.master_weights = true;
  return scenario;
}

double relative(double ours, double theirs) { return std::abs(ours - theirs) / theirs; }

}  // namespace

TEST_CASE("Without a sharded optimizer a rank's model states are Megatron-LM's 18 bytes per parameter less the fp32 "
          "main gradient's extra 2",
          "[parallel][mesh][megatron]") {
  const double shard = megatron_most_loaded_shard();
  PlannedTrace planned = plan_steps(llama_8b_tp8_pp4(ParallelEngine::Ddp, 1));
  const auto bytes = live_by_category(planned, "iter1/optimizer").at_mark;
  const double weights = static_cast<double>(bytes.at(TensorCategory::Parameter));
  const double gradients = static_cast<double>(bytes.at(TensorCategory::Gradient));
  const double optimizer = static_cast<double>(bytes.at(TensorCategory::OptimizerState));
  // Component by component: the norms, which Megatron's formula divides by TP and a
  // tensor-parallel rank holds whole, are the only difference in the parameter count (0.02%).
  CHECK(relative(weights, 2 * shard) < 5e-4);     // bf16 weights: Megatron's 2
  CHECK(relative(optimizer, 12 * shard) < 5e-4);  // fp32 master + exp_avg + exp_avg_sq: Megatron's 12
  CHECK(relative(gradients, 2 * shard) < 5e-4);   // bf16 .grad: Megatron's fp32 main_grad holds 4
  CHECK(relative(weights + gradients + optimizer, 16 * shard) < 5e-4);  // = 18 x 16 / 18 of Megatron's total
}

TEST_CASE("Sharded over data-parallel ranks the optimizer states are Megatron-LM's distributed optimizer's 12 / DP",
          "[parallel][mesh][megatron]") {
  // FSDP2 over DP 4 shards what Megatron's distributed optimizer shards (master weight and
  // moments, 12 / DP bytes per parameter) and, beyond it, the bf16 weights and gradients that
  // Megatron keeps whole on every data-parallel rank (its 6 bytes): 4 / DP here. FSDP2 pads each
  // parameter's dim 0 to a multiple of DP; no Llama 3 8B shape needs padding at DP 4.
  const double shard = megatron_most_loaded_shard();
  const double dp = 4;
  PlannedTrace planned = plan_steps(llama_8b_tp8_pp4(ParallelEngine::Fsdp2, 4));
  const auto bytes = live_by_category(planned, "iter1/optimizer").at_mark;
  CHECK(relative(static_cast<double>(bytes.at(TensorCategory::OptimizerState)), 12 * shard / dp) < 5e-4);
  CHECK(relative(static_cast<double>(bytes.at(TensorCategory::Parameter)), 2 * shard / dp) < 5e-4);
  CHECK(relative(static_cast<double>(bytes.at(TensorCategory::Gradient)), 2 * shard / dp) < 5e-4);
}
