// Quantized weights made on the device from a 16-bit copy, with the libraries' temporaries in
// the order their code allocates them (sources in quantized_loading.h; docs/weight-formats.md).
#include "planner/quantized_loading.h"

#include <algorithm>
#include <numeric>
#include <string_view>
#include <unordered_map>

namespace oomcast::planner {

using scenario::QuantLibrary;
using scenario::WeightFormat;
using scenario::WeightsConfig;

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

bool ends_with(std::string_view text, std::string_view tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// Allocates and frees in the order a library makes its tensors; `state` names the weight's
// buffers by their last component.
class Emitter {
 public:
  Emitter(const LayerGraph& graph, const QuantizedWeight& quantized, ScheduleWriter* writer)
      : graph_(graph), quantized_(quantized), writer_(writer),
        prefix_(graph.names[graph.tensors[quantized.weight].name]) {}

  uint32_t temp(const std::string& what, uint64_t bytes) {
    return writer_->alloc(writer_->intern(prefix_ + "." + what), bytes, TensorCategory::Temporary);
  }
  // The weight's packed storage (the parameter).
  uint32_t weight() {
    const TensorDesc& desc = graph_.tensors[quantized_.weight];
    return writer_->alloc(writer_->intern(prefix_), desc.bytes(), TensorCategory::Parameter);
  }
  // The state buffer whose name ends with `leaf`; as a temporary copy when `copy` (a second
  // NF4Tensor made while loading).
  uint32_t state(std::string_view leaf, bool copy = false) {
    for (TensorId buffer : quantized_.state) {
      const TensorDesc& desc = graph_.tensors[buffer];
      const std::string& name = graph_.names[desc.name];
      if (!ends_with(name, leaf)) continue;
      return writer_->alloc(writer_->intern(copy ? name + ".loaded" : name), desc.bytes(),
                            copy ? TensorCategory::Temporary : TensorCategory::Buffer);
    }
    return UINT32_MAX;  // not part of this format's state
  }
  void free(uint32_t slot) {
    if (slot != UINT32_MAX) writer_->free(slot);
  }

 private:
  const LayerGraph& graph_;
  const QuantizedWeight& quantized_;
  ScheduleWriter* writer_;
  std::string prefix_;
};

// bitsandbytes 0.50 functional.quantize_4bit on the CUDA backend (ops.py): absmax (fp32, one per
// block) then the packed output; get_4bit_type's 16-entry code; with compress_statistics the
// mean of absmax, absmax - offset, quantize_blockwise of it (its fp32 absmax per 256, its uint8
// codes, a copy of the 256-entry dynamic map), then `del _absmax`.
void bnb_quantize_4bit(const WeightsConfig& weights, uint64_t numel, Emitter& emit) {
  const uint64_t blocks = ceil_div(numel, static_cast<uint64_t>(weights.block_size));
  if (!weights.double_quant) {
    emit.state(".quant_state.absmax");
    emit.weight();
    emit.state(".quant_state.code");
    return;
  }
  const uint32_t absmax = emit.temp("absmax_fp32", blocks * 4);
  emit.weight();
  emit.state(".quant_state.code");
  emit.state(".quant_state.offset");
  const uint32_t shifted = emit.temp("absmax_minus_offset", blocks * 4);
  emit.state(".quant_state.nested_absmax");
  emit.state(".quant_state.absmax");
  emit.state(".quant_state.nested_code");
  emit.free(shifted);
  emit.free(absmax);
}

// torchao 0.19 NF4Tensor.from_tensor on a weight of `numel` elements of `dtype`: the nf4 table,
// double_quantize_scalers (block absmax through abs().max(dim=1), the mean, the centred scalers,
// their per-256 absmax, the factors and the rounded, clamped scalers, then the int8 scalers and
// the contiguous factors) and convert_to_norm_float_weight (the block absmax again, the scaled
// blocks, the uint8 codes filled 2^20 elements at a time through a [chunk, 16] difference, then
// the two codes of each byte combined). The chunks repeat one pattern: one is emitted.
void torchao_to_nf4(uint64_t numel, DType dtype, bool copy, Emitter& emit) {
  const uint64_t e = dtype_bytes(dtype);
  const uint64_t blocks = ceil_div(numel, 64);
  const uint64_t scaler_blocks = ceil_div(blocks, 256);
  std::vector<uint32_t> kept;
  kept.push_back(emit.state(".nf4", copy));
  uint32_t abs = emit.temp("nf4_abs", numel * e);
  uint32_t values = emit.temp("nf4_block_absmax", blocks * e);
  uint32_t indices = emit.temp("nf4_block_argmax", blocks * 8);
  emit.free(abs);
  emit.free(indices);
  kept.push_back(emit.state(".scaler_mean", copy));
  const uint32_t centred = emit.temp("nf4_centred_scalers", blocks * e);
  emit.free(values);
  abs = emit.temp("nf4_scalers_abs", blocks * e);
  const uint32_t scaler_absmax = emit.temp("nf4_scaler_absmax", scaler_blocks * e);
  indices = emit.temp("nf4_scaler_argmax", scaler_blocks * 8);
  emit.free(abs);
  emit.free(indices);
  const uint32_t doubled = emit.temp("nf4_doubled_absmax", blocks * e);
  const uint32_t factor = emit.temp("nf4_factor", blocks * e);
  emit.free(doubled);
  const uint32_t scaled = emit.temp("nf4_scaled_scalers", blocks * e);
  const uint32_t rounded = emit.temp("nf4_rounded_scalers", blocks * e);
  emit.free(scaled);
  const uint32_t clamped = emit.temp("nf4_clamped_scalers", blocks * e);
  emit.free(rounded);
  kept.push_back(emit.state(".quantized_scalers", copy));
  kept.push_back(emit.state(".quantization_factor", copy));
  emit.free(clamped);
  emit.free(factor);
  emit.free(scaler_absmax);
  emit.free(centred);
  // convert_to_norm_float_weight
  abs = emit.temp("nf4_abs", numel * e);
  values = emit.temp("nf4_block_absmax", blocks * e);
  indices = emit.temp("nf4_block_argmax", blocks * 8);
  emit.free(abs);
  emit.free(indices);
  const uint32_t blocks_scaled = emit.temp("nf4_scaled_blocks", numel * e);
  const uint32_t codes = emit.temp("nf4_codes", numel);
  const uint64_t chunk = std::min<uint64_t>(numel, 1ull << 20);
  const uint32_t difference = emit.temp("nf4_chunk_difference", chunk * 16 * e);
  const uint32_t distance = emit.temp("nf4_chunk_distance", chunk * 16 * e);
  emit.free(difference);
  const uint32_t nearest = emit.temp("nf4_chunk_min", chunk * e);
  const uint32_t nearest_index = emit.temp("nf4_chunk_argmin", chunk * 8);
  emit.free(distance);
  emit.free(nearest);
  const uint32_t chunk_codes = emit.temp("nf4_chunk_codes", chunk);
  emit.free(nearest_index);
  emit.free(chunk_codes);
  const uint32_t high = emit.temp("nf4_high_codes", ceil_div(numel, 2));
  if (copy) {
    kept.push_back(emit.temp("nf4_quantized_data.loaded", ceil_div(numel, 2)));
  } else {
    emit.weight();
  }
  emit.free(high);
  emit.free(blocks_scaled);
  emit.free(values);
  emit.free(codes);
  if (copy) {
    // original.copy_(copy_in_nf4) writes into the weight's own tensors; the copy then dies.
    for (uint32_t slot : kept) emit.free(slot);
  }
}

std::vector<std::string_view> split_dots(std::string_view name) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return parts;
    start = dot + 1;
  }
}

bool all_digits(std::string_view part) {
  return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// dot_natural_key: numbers before words, numbers by value, words as strings.
bool natural_less(std::string_view a, std::string_view b) {
  const std::vector<std::string_view> x = split_dots(a);
  const std::vector<std::string_view> y = split_dots(b);
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    const bool xn = all_digits(x[i]);
    const bool yn = all_digits(y[i]);
    if (xn != yn) return xn;
    if (xn) {
      // Compare by value: strip leading zeros, then length, then text.
      const std::string_view xv = x[i].substr(std::min(x[i].find_first_not_of('0'), x[i].size()));
      const std::string_view yv = y[i].substr(std::min(y[i].find_first_not_of('0'), y[i].size()));
      if (xv.size() != yv.size()) return xv.size() < yv.size();
      if (xv != yv) return xv < yv;
    } else if (x[i] != y[i]) {
      return x[i] < y[i];
    }
  }
  return x.size() < y.size();
}

}  // namespace

std::vector<QuantizedWeight> quantized_weights(const LayerGraph& graph) {
  std::vector<QuantizedWeight> out;
  std::unordered_map<std::string, size_t> by_name;
  for (size_t p = 0; p < graph.parameters.size(); ++p) {
    const TensorDesc& desc = graph.tensors[graph.parameters[p]];
    if (desc.dtype != DType::UInt8) continue;
    QuantizedWeight quantized;
    quantized.weight = graph.parameters[p];
    quantized.numel = std::accumulate(graph.parameter_shapes[p].begin(), graph.parameter_shapes[p].end(), uint64_t{1},
                                      [](uint64_t a, int64_t b) { return a * static_cast<uint64_t>(b); });
    by_name[graph.names[desc.name]] = out.size();
    out.push_back(std::move(quantized));
  }
  for (TensorId buffer : graph.buffers) {
    const std::string& name = graph.names[graph.tensors[buffer].name];
    // "<module>.weight.quant_state.absmax", "<module>.weight.SCB", "<module>.weight.nf4", ...
    const size_t at = name.find(".weight.");
    if (at == std::string::npos) continue;
    auto found = by_name.find(name.substr(0, at + 7));
    if (found != by_name.end()) out[found->second].state.push_back(buffer);
  }
  return out;
}

void quantize_on_device(const WeightsConfig& weights, const LayerGraph& graph, const QuantizedWeight& quantized,
                        DType load_dtype, ScheduleWriter* writer) {
  Emitter emit(graph, quantized, writer);
  const uint64_t numel = quantized.numel;
  if (weights.library == QuantLibrary::Torchao) {
    // LoRALinear / FrozenNF4Linear: nn.Linear(...) on the device in the default dtype, to_nf4
    // of its weight, the nn.Linear dropped as __init__ returns.
    const uint32_t linear = emit.temp("linear_weight", numel * dtype_bytes(load_dtype));
    torchao_to_nf4(numel, load_dtype, false, emit);
    emit.free(linear);
    return;
  }
  // The checkpoint tensor materialized on the device in the load dtype, then Params4bit(value)
  // .to(device) (or Int8Params(value.to("cpu")).to(device)).
  const uint32_t loaded = emit.temp("loaded", numel * dtype_bytes(load_dtype));
  if (weights.format == WeightFormat::Int8) {
    // Int8Params._quantize: data.to(device, float16), int8_vectorwise_quant: row_stats (SCB),
    // then the int8 rows (CB); the fp16 copy dies as it returns.
    const uint32_t half = emit.temp("fp16", numel * 2);
    emit.state(".SCB");
    emit.weight();
    emit.free(half);
  } else {
    bnb_quantize_4bit(weights, numel, emit);
  }
  emit.free(loaded);
}

void reload_torchao_weight(const WeightsConfig& weights, const LayerGraph& graph, const QuantizedWeight& quantized,
                           DType load_dtype, ScheduleWriter* writer) {
  (void)weights;
  Emitter emit(graph, quantized, writer);
  const uint32_t copy = emit.temp("state_dict_copy", quantized.numel * dtype_bytes(load_dtype));
  // from_tensor's argument dies when it returns, before the copy into the weight.
  torchao_to_nf4(quantized.numel, load_dtype, true, emit);
  emit.free(copy);
}

std::vector<size_t> checkpoint_order(const LayerGraph& graph) {
  std::vector<size_t> order(graph.parameters.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Adapters (PEFT adds them to the loaded model) keep their place after the checkpoint's.
  const size_t base = std::min(graph.first_adapter_parameter, order.size());
  std::stable_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(base), [&](size_t a, size_t b) {
    return natural_less(graph.names[graph.tensors[graph.parameters[a]].name],
                        graph.names[graph.tensors[graph.parameters[b]].name]);
  });
  return order;
}

uint64_t from_pretrained_warmup_bytes(const scenario::Scenario& scenario, const LayerGraph& graph,
                                      const std::vector<QuantizedWeight>& quantized) {
  std::unordered_map<TensorId, uint64_t> quantized_numel;
  for (const QuantizedWeight& weight : quantized) quantized_numel[weight.weight] = weight.numel;
  uint64_t bytes = 0;
  const size_t base = std::min(graph.first_adapter_parameter, graph.parameters.size());
  for (size_t p = 0; p < base; ++p) {
    const TensorId parameter = graph.parameters[p];
    auto found = quantized_numel.find(parameter);
    // Bnb4BitHfQuantizer.quantized_element_size is 0.5 (8-bit: the int8 element, 1 byte).
    if (found != quantized_numel.end()) {
      bytes += scenario.job.weights.format == WeightFormat::Int8 ? found->second : found->second / 2;
    } else {
      bytes += graph.tensors[parameter].bytes();
    }
  }
  const uint64_t reserve = (12ull << 30) / 10;  // 1.2 GiB
  const uint64_t total = scenario.device.model.total_bytes;
  bytes = std::min(bytes, total > reserve ? total - reserve : 0);
  return bytes / 2 * 2;  // torch.empty(byte_count // 2, dtype=torch.float16)
}

}  // namespace oomcast::planner
