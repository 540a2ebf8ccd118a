// GEMM tile and wave quantization (NVIDIA, "Matrix Multiplication Background User's Guide",
// sections "Typical Tile Dimensions in cuBLAS and Performance", "Tile Quantization" and "Wave
// Quantization"): cuBLAS computes C in tiles (256×128 down to 64×64 and narrower), one thread
// block per tile, and the GPU runs as many tiles at once as it has SMs times the tiles each SM
// holds; a grid of 109 tiles on 108 SMs takes two waves, the second nearly empty. Large tiles
// are the most efficient (each operand element loaded into shared memory serves more outputs),
// small tiles make more of them and so fill more SMs: cuBLAS's heuristic picks between them,
// and for a long K it splits the reduction (split-K) at the cost of a pass over fp32 partial
// sums. The efficiencies here are ratios of work, so the constants are shapes, not speeds.
#include "planner/timing/op_cost_gemm.h"

#include <algorithm>
#include <cmath>

namespace oomcast::planner {

using scenario::OpKind;

namespace {

struct Tile {
  double m;
  double n;
};

// cuBLAS's usual tensor-core tile shapes (the guide's list, 256×128 to 64×64) and the
// narrower ones its Lt API lists for skinny outputs.
constexpr Tile kTiles[] = {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128},
                           {64, 64},   {64, 32},   {32, 64},   {32, 32}};
constexpr double kSplitKFactors[] = {1, 2, 4, 8, 16, 32};
// The tile from which a tile streams its operands fast enough to keep tensor cores busy (an
// assumption: NVIDIA's guide ranks 256×128 and 128×128 as the efficient tiles without a
// number). A tile's efficiency is its operand reuse, m·n/(m+n) outputs per element loaded,
// relative to this one's scaled by the GEMM's math rate over the tensor-core rate, at most 1;
// and an SM holds this tile's area of smaller tiles at once.
constexpr Tile kFullRateTile = {128, 128};
// Each split of K keeps at least this many steps of the reduction (shorter splits are all
// prologue and epilogue).
constexpr double kMinimumSplitK = 256;
constexpr double kPartialSumBytes = 4.0;  // split-K partials accumulate in fp32

double reuse(const Tile& tile) { return tile.m * tile.n / (tile.m + tile.n); }

bool plausible(double dimension) { return std::isfinite(dimension) && dimension >= 0.5; }

std::vector<GemmShape> checked(std::vector<GemmShape> gemms) {
  for (const GemmShape& gemm : gemms) {
    if (!plausible(gemm.batch) || !plausible(gemm.m) || !plausible(gemm.n) || !plausible(gemm.k)) return {};
  }
  return gemms;
}

// The forward GEMM of a matmul-class op, from |A|, |B|, |C| and F/2 = batch·m·n·k. For a linear
// or a convolution B is the weight (n × k: out features by in features × kernel area), so
// k = F/2 / |C|, n = |B| / k, m = |C| / n (m is the rows, or batch × output pixels of an
// implicit-GEMM convolution). For a batched matmul |A|·|B|·|C| = batch·(F/2)², which gives the
// batch (1 when B is broadcast over A's batch).
std::optional<GemmShape> forward_gemm(const LayerGraph& graph, const OpNode& op) {
  if (op.kind == OpKind::Attention || op.forward_flops <= 0.0 || op.outputs.empty()) return std::nullopt;
  std::vector<TensorId> operands = matrix_operands(graph, op);
  if (operands.size() != 2) return std::nullopt;
  const double half = op.forward_flops / 2.0;
  const auto numel = [&](TensorId id) { return static_cast<double>(graph.tensors[id].numel); };
  const double a = numel(operands[0]);
  const double b = numel(operands[1]);
  const double c = numel(op.outputs[0]);
  if (a <= 0.0 || b <= 0.0 || c <= 0.0) return std::nullopt;
  GemmShape gemm;
  gemm.k = half / c;
  if (op.kind == OpKind::Matmul) {
    gemm.batch = std::max(1.0, a * b * c / (half * half));
    gemm.m = a / (gemm.batch * gemm.k);
    gemm.n = b / (gemm.batch * gemm.k);
  } else {
    const auto is_weight = [&](TensorId id) {
      TensorRole role = graph.tensors[graph.tensors[id].storage].role;
      return role == TensorRole::Parameter || role == TensorRole::AutocastWeight;
    };
    const double weight = is_weight(operands[0]) && !is_weight(operands[1]) ? a : b;
    gemm.n = weight / gemm.k;
    gemm.m = c / gemm.n;
  }
  return gemm;
}

}  // namespace

std::vector<TensorId> matrix_operands(const LayerGraph& graph, const OpNode& op) {
  std::vector<TensorId> operands = op.inputs;
  if (op.kind != OpKind::Attention && operands.size() == 3) {
    auto smallest = std::min_element(operands.begin(), operands.end(), [&](TensorId a, TensorId b) {
      return graph.tensors[a].numel < graph.tensors[b].numel;
    });
    operands.erase(smallest);
  }
  return operands;
}

double gemm_seconds(const GemmShape& gemm, const GemmDevice& device) {
  const double rate = device.flops_per_second;
  if (rate <= 0.0) return 0.0;
  const double ideal = gemm.flops() / rate;
  if (device.sm_count <= 0 || gemm.flops() <= 0.0) return ideal;
  const double sms = static_cast<double>(device.sm_count);
  const double per_sm_rate = rate / sms;
  const double pressure = device.tensor_flops_per_second > 0.0 ? std::min(1.0, rate / device.tensor_flops_per_second) : 1.0;
  const double needed_reuse = reuse(kFullRateTile) * pressure;
  const double full_area = kFullRateTile.m * kFullRateTile.n;
  double best = -1.0;
  for (const Tile& tile : kTiles) {
    const double resident = std::max(1.0, std::floor(full_area / (tile.m * tile.n)));
    const double efficiency = std::min(1.0, reuse(tile) / needed_reuse);
    const double tiles = gemm.batch * std::ceil(gemm.m / tile.m) * std::ceil(gemm.n / tile.n);
    for (double split : kSplitKFactors) {
      if (split > 1.0 && gemm.k / split < kMinimumSplitK) break;
      const double waves = std::ceil(tiles * split / (sms * resident));
      // One wave: each SM runs `resident` tiles side by side at its share of the rate.
      const double wave_seconds = resident * 2.0 * tile.m * tile.n * std::ceil(gemm.k / split) / (per_sm_rate * efficiency);
      double seconds = waves * wave_seconds;
      if (split > 1.0 && device.hbm_bytes_per_second > 0.0) {
        seconds += 2.0 * kPartialSumBytes * split * gemm.batch * gemm.m * gemm.n / device.hbm_bytes_per_second;
      }
      if (best < 0.0 || seconds < best) best = seconds;
    }
  }
  return std::max(ideal, best);
}

double gemm_wave_efficiency(const GemmShape& gemm, const GemmDevice& device) {
  const double seconds = gemm_seconds(gemm, device);
  return seconds > 0.0 ? gemm.flops() / (device.flops_per_second * seconds) : 1.0;
}

std::vector<GemmShape> forward_gemms(const LayerGraph& graph, const OpNode& op) {
  std::optional<GemmShape> gemm = forward_gemm(graph, op);
  if (!gemm) return {};
  return checked({*gemm});
}

std::vector<GemmShape> backward_gemms(const LayerGraph& graph, const OpNode& op) {
  std::optional<GemmShape> gemm = forward_gemm(graph, op);
  if (!gemm) return {};
  std::vector<TensorId> operands = matrix_operands(graph, op);
  std::vector<GemmShape> gemms;
  if (graph.tensors[operands[0]].requires_grad) gemms.push_back({gemm->batch, gemm->m, gemm->k, gemm->n});
  if (graph.tensors[operands[1]].requires_grad) gemms.push_back({gemm->batch, gemm->k, gemm->n, gemm->m});
  return checked(std::move(gemms));
}

}  // namespace oomcast::planner
