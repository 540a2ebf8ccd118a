// Tests for GEMM tile and wave quantization (op_cost_gemm.h) and the GEMM shapes recovered
// from a linear's sizes.
#include <catch2/catch.hpp>

#include "planner/timing/op_cost.h"
#include "planner/timing/op_cost_gemm.h"
#include "planner/ops/op_catalogue.h"
#include "scenario/device_profiles.h"

using namespace oomcast::planner;
using oomcast::scenario::DeviceThroughput;
using oomcast::scenario::OpKind;
using oomcast::scenario::find_device_profile;

namespace {

const DeviceThroughput& v100() { return find_device_profile("v100-16gb")->throughput; }
const DeviceThroughput& a100() { return find_device_profile("a100-80gb")->throughput; }

GemmDevice fp16_gemms(const DeviceThroughput& device) {
  const double tensor = device.fp16_tflops * 1e12 * kMatmulPeakFraction;
  return {tensor, device.hbm_gbps * 1e9 * kHbmFraction, device.sm_count, tensor};
}

double efficiency(const GemmShape& gemm, const DeviceThroughput& device) {
  return gemm_wave_efficiency(gemm, fp16_gemms(device));
}

}  // namespace

TEST_CASE("a GEMM with fewer tiles than the GPU has SMs is slower per FLOP than a large one", "[planner][gemm]") {
  // bert-large's attention projection at batch 1, seq 512: 32 tiles of 128×128 for 80 SMs.
  const GemmShape small{1, 512, 1024, 1024};
  const GemmShape large{1, 8192, 8192, 8192};
  CHECK(efficiency(large, v100()) > 0.95);
  CHECK(efficiency(small, v100()) < 0.6);
}

TEST_CASE("a GEMM one tile row past a full wave is less efficient than one that fills the wave", "[planner][gemm]") {
  const double sms = a100().sm_count;
  const GemmShape full{1, 128 * sms, 128, 512};
  const GemmShape one_more{1, 128 * (sms + 1), 128, 512};
  CHECK(efficiency(full, a100()) == Approx(1.0));
  CHECK(efficiency(one_more, a100()) < 0.8);
}

TEST_CASE("without an SM count every GEMM runs at the large-GEMM rate", "[planner][gemm]") {
  DeviceThroughput custom = v100();
  custom.sm_count = 0;
  CHECK(efficiency({1, 64, 64, 64}, custom) == Approx(1.0));
}

TEST_CASE("split-K lets a GEMM with a small output and a long reduction fill the GPU", "[planner][gemm]") {
  // A LoRA adapter's weight gradient: [16 × 4096] summed over 65,536 tokens. Unsplit, its 64
  // tiles of 32×64 fill a twelfth of the A100's tile slots, half of each tile hanging over
  // the 16 rows (~0.01 of the rate); split 32 ways it fills several waves.
  const GemmShape skinny{1, 16, 4096, 65536};
  CHECK(efficiency(skinny, a100()) > 0.1);
}

TEST_CASE("small tiles cost an FP32 GEMM without tensor cores less than a tensor-core GEMM", "[planner][gemm]") {
  // 256 × 256 outputs: 4 tiles of 128×128 or 16 of 64×64 on 80 SMs, every choice short of a
  // wave; the 64×64 tiles' lower operand reuse slows tensor cores, not FP32 FMA units.
  const GemmShape small{1, 256, 256, 4096};
  GemmDevice fp32 = fp16_gemms(v100());
  fp32.flops_per_second = v100().fp32_tflops * 1e12 * kMatmulPeakFraction;
  CHECK(gemm_wave_efficiency(small, fp32) > efficiency(small, v100()));
}

TEST_CASE("a linear's GEMMs are recovered from its operands' sizes", "[planner][gemm]") {
  BuildContext context;
  context.batch = 512;
  context.seq_len = 1;
  GraphBuilder g(context);
  TensorId scale = g.parameter("scale", {1024});
  TensorId x = g.input("x", 512 * 1024, DType::Float32);
  TensorId scaled = ops::mul(g, "scale", x, scale);  // the linear's input needs a gradient
  TensorId weight = g.parameter("fc.weight", {4096, 1024});
  ops::linear(g, "fc", scaled, weight, kNoTensor, 1024, 4096);
  LayerGraph graph = g.finish();
  const OpNode& fc = graph.ops.back();
  REQUIRE(fc.kind == OpKind::Linear);
  std::vector<GemmShape> forward = forward_gemms(graph, fc);
  REQUIRE(forward.size() == 1);
  CHECK(forward[0].m == Approx(512));
  CHECK(forward[0].n == Approx(4096));
  CHECK(forward[0].k == Approx(1024));
  std::vector<GemmShape> backward = backward_gemms(graph, fc);
  REQUIRE(backward.size() == 2);
  CHECK(backward[0].k == Approx(4096));  // dX = dY · W reduces over the output features
  CHECK(backward[1].k == Approx(512));   // dW = dYᵀ · X reduces over the rows
}
