// The op catalogue against the facts the probe measured under torch 2.13 on the CPU
// (validate/op_facts/torch-2.13-cpu.tsv, written by validate/op_probe.py --table): for each
// probe the catalogue models, the bytes the forward leaves behind (its output and what autograd
// saved, beyond the inputs and parameters) must be what torch left. A catalogue change that
// disagrees with torch, or a torch whose kernels changed (ctest op_facts.torch_2_13), fails.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "planner/ops/cpu_gemm_buffer.h"
#include "planner/ops/op_catalogue.h"

using namespace oomcast::planner;
using oomcast::scenario::OpKind;
using oomcast::scenario::Precision;

namespace {

struct Measured {
  uint64_t forward_peak = 0;  // FWD_PEAK: bytes above the start at the forward's peak
  uint64_t kept = 0;          // KEPT: what the forward leaves (output and saved)
};

// (probe, setting) -> its row of the table.
std::map<std::pair<std::string, std::string>, Measured> measured() {
  std::ifstream in(std::string(OOMCAST_SOURCE_DIR) + "/validate/op_facts/torch-2.13-cpu.tsv");
  std::map<std::pair<std::string, std::string>, Measured> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, probe, setting;
    Measured row;
    if (!(fields >> kind >> probe >> setting >> row.forward_peak >> row.kept) || kind != "op") continue;
    rows[{probe, setting}] = row;
  }
  return rows;
}

// The probe's sizes (validate/op_probe.py probes()).
constexpr int64_t B = 2, T = 16, H = 64, NH = 2, V = 96;

// Builds one probe's ops on a leaf input requiring grad (as the probe's inputs do) and returns
// the bytes alive after the forward: the last output and every saved activation.
uint64_t catalogue_kept(const std::string& setting, DType input_dtype, uint64_t numel,
                        const std::function<TensorId(GraphBuilder&, TensorId)>& build) {
  BuildContext context;
  context.precision = precision_rules(setting == "amp_bf16" ? Precision::AmpBf16 : Precision::Fp32);
  context.precision.autocast_device = AutocastDevice::Cpu;
  context.precision.torch_version = 213;
  context.cpu_kernels = true;
  context.torch_version = 213;
  context.training = true;
  context.dropout = 0.1;
  GraphBuilder g(context);
  TensorId x = g.input("x", numel, input_dtype);
  g.mutable_tensor(x).requires_grad = true;
  TensorId out = build(g, x);
  LayerGraph graph = g.finish();
  std::set<TensorId> storages{graph.tensors[out].storage};
  for (const OpNode& op : graph.ops) {
    for (TensorId saved : op.saved) {
      TensorId storage = graph.tensors[saved].storage;
      if (graph.tensors[storage].role == TensorRole::Activation) storages.insert(storage);
    }
  }
  uint64_t bytes = 0;
  for (TensorId storage : storages) bytes += graph.tensors[storage].bytes();
  return bytes;
}

struct Probe {
  std::string name;
  std::string setting;
  DType input_dtype;
  uint64_t numel;
  std::function<TensorId(GraphBuilder&, TensorId)> build;
};

TensorId layer_norm_of(GraphBuilder& g, TensorId x) {
  return ops::layer_norm(g, "ln", x, g.parameter("ln.weight", {H}), g.parameter("ln.bias", {H}), H);
}

TensorId cross_entropy_of(GraphBuilder& g, TensorId x) {
  return ops::cross_entropy(g, "loss", x, g.input("targets", B * T, DType::Int64), V);
}

}  // namespace

TEST_CASE("the catalogue keeps after each probed op's forward what torch 2.13 keeps on the CPU", "[planner][ops][op_facts]") {
  const auto kept = measured();
  REQUIRE(!kept.empty());
  auto softmax = [](GraphBuilder& g, TensorId x) { return ops::softmax(g, "softmax", x); };
  auto gelu = [](GraphBuilder& g, TensorId x) { return ops::gelu(g, "gelu", x); };
  auto dropout = [](GraphBuilder& g, TensorId x) { return ops::dropout(g, "dropout", x); };
  const std::vector<Probe> probes = {
      {"softmax", "fp32", DType::Float32, B * NH * T * T, softmax},
      {"softmax_bf16_input", "amp_bf16", DType::BFloat16, B * NH * T * T, softmax},
      {"layer_norm", "fp32", DType::Float32, B * T * H, layer_norm_of},
      {"layer_norm_bf16_input", "amp_bf16", DType::BFloat16, B * T * H, layer_norm_of},
      {"gelu", "fp32", DType::Float32, B * T * H, gelu},
      {"dropout", "fp32", DType::Float32, B * T * H, dropout},
      {"cross_entropy", "fp32", DType::Float32, B * T * V, cross_entropy_of},
      {"cross_entropy_bf16_input", "amp_bf16", DType::BFloat16, B * T * V, cross_entropy_of},
  };
  for (const Probe& probe : probes) {
    INFO(probe.name << " (" << probe.setting << ")");
    auto found = kept.find({probe.name, probe.setting});
    REQUIRE(found != kept.end());
    CHECK(catalogue_kept(probe.setting, probe.input_dtype, probe.numel, probe.build) == found->second.kept);
  }
}

namespace {

// The peak of one op's forward as the graph runner schedules it: the transients made before
// the outputs (the reorders among them freed before the outputs exist), then the outputs.
uint64_t forward_peak(const LayerGraph& graph, const OpNode& op) {
  uint64_t before = 0, surviving = 0, after = 0, outputs = 0;
  for (const Transient& transient : op.forward_transients) {
    if (transient.after_outputs) {
      after += transient.bytes;
      continue;
    }
    before += transient.bytes;
    if (!transient.dies_before_outputs) surviving += transient.bytes;
  }
  for (TensorId out : op.outputs) outputs += graph.tensors[out].bytes();
  return std::max(before, surviving + outputs + after);
}

}  // namespace

TEST_CASE("the catalogue's CPU conv2d peaks in its forward where oneDNN under torch 2.13 does, 8 and 64 channels",
          "[planner][ops][op_facts]") {
  const auto rows = measured();
  // validate/op_probe.py: Conv2d(8, 16, 3, padding=1) and Conv2d(64, 64, 3, padding=1) on 16 x 16 images.
  for (int64_t channels : {8, 64}) {
    INFO(channels << " input channels");
    BuildContext context;
    context.precision = precision_rules(Precision::Fp32);
    context.cpu_kernels = true;
    context.torch_version = 213;
    context.training = true;
    context.batch = B;
    GraphBuilder g(context);
    const int64_t out_channels = channels == 8 ? 16 : 64;
    TensorId x = g.input("x", static_cast<uint64_t>(B * channels * 16 * 16), DType::Float32);
    g.mutable_tensor(x).requires_grad = true;
    int64_t height = 16, width = 16;
    ops::ConvShape shape{channels, out_channels, 3, 1, 1};
    ops::conv2d(g, "conv", x, g.parameter("conv.weight", {out_channels, channels, 3, 3}),
                g.parameter("conv.bias", {out_channels}), shape, &height, &width);
    LayerGraph graph = g.finish();
    const OpNode* conv = nullptr;
    for (const OpNode& op : graph.ops) {
      if (op.kind == OpKind::Conv) conv = &op;
    }
    REQUIRE(conv != nullptr);
    auto found = rows.find({channels == 8 ? "conv2d" : "conv2d_64ch", "fp32"});
    REQUIRE(found != rows.end());
    CHECK(forward_peak(graph, *conv) == found->second.forward_peak);
  }
}

TEST_CASE("a bf16 linear on the CPU peaks in its forward where oneDNN's fp32 result under torch 2.13 puts it",
          "[planner][ops][op_facts]") {
  // validate/op_probe.py linear under bf16 autocast: the bias, weight and input casts, the bf16
  // output, then oneDNN's fp32 result (+a4:24704) before it is freed.
  const auto rows = measured();
  auto found = rows.find({"linear", "amp_bf16"});
  REQUIRE(found != rows.end());
  BuildContext context;
  context.precision = precision_rules(Precision::AmpBf16);
  context.precision.autocast_device = AutocastDevice::Cpu;
  context.precision.torch_version = 213;
  context.cpu_kernels = true;
  context.torch_version = 213;
  context.training = true;
  GraphBuilder g(context);
  TensorId x = g.input("x", B * T * H, DType::Float32);
  g.mutable_tensor(x).requires_grad = true;
  ops::linear(g, "lin", x, g.parameter("lin.weight", {3 * H, H}), g.parameter("lin.bias", {3 * H}), H, 3 * H);
  LayerGraph graph = g.finish();
  uint64_t casts = 0;
  const OpNode* linear = nullptr;
  for (const OpNode& op : graph.ops) {
    if (op.kind == OpKind::Linear) linear = &op;
    if (op.kind == OpKind::Cast) casts += graph.tensors[op.outputs[0]].bytes();
  }
  REQUIRE(linear != nullptr);
  CHECK(casts + forward_peak(graph, *linear) == found->second.forward_peak);
}

TEST_CASE("a small bf16 GEMM or an fp32 one on the CPU has no fp32 result buffer", "[planner][ops][op_facts]") {
  BuildContext context;
  context.cpu_kernels = true;
  GraphBuilder g(context);
  // m * n * k = 16³ stays with ATen's own kernel; 16 x 32 times 32 x 16 takes oneDNN's
  // (measured: the output, then +1152 B).
  CHECK(ops::cpu_bf16_gemm_buffer(g, DType::BFloat16, 16, 16, 16) == 0);
  CHECK(ops::cpu_bf16_gemm_buffer(g, DType::BFloat16, 16, 16, 32) == 1152);
  CHECK(ops::cpu_bf16_gemm_buffer(g, DType::Float32, 64, 64, 64) == 0);
  BuildContext cuda;
  GraphBuilder on_cuda(cuda);
  CHECK(ops::cpu_bf16_gemm_buffer(on_cuda, DType::BFloat16, 64, 64, 64) == 0);
}
