// How a quantized base weight reaches the device (the `setup` phase): it exists first in 16 bits
// and is quantized there, with the quantizing library's temporaries. bitsandbytes as Hugging
// Face's from_pretrained runs it (transformers 5.24 core_model_loading.py, integrations/
// bitsandbytes.py; bitsandbytes 0.50 functional.quantize_4bit, Params4bit._quantize,
// Int8Params._quantize) and torchao's to_nf4 as torchtune's QLoRA recipes run it (torchtune 0.7
// modules/peft/lora.py, recipes/lora_finetune_single_device.py; torchao 0.19 nf4_tensor.py).
#pragma once

#include <string>
#include <vector>

#include "planner/layer_graph.h"
#include "planner/schedule_writer.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// One quantized weight: the parameter (its packed storage), its element count before
// quantization and the buffers that hold its quantization state.
struct QuantizedWeight {
  TensorId weight = 0;
  uint64_t numel = 0;
  std::vector<TensorId> state;
};

// The quantized weights of `graph` (parameters stored as uint8 under a quantized `weights`),
// with their state buffers (named after the weight).
std::vector<QuantizedWeight> quantized_weights(const LayerGraph& graph);

// Allocates one weight as the library quantizes it from a `load_dtype` copy on the device: the
// copy, the temporaries, the packed weight and its state (left allocated), then frees the copy
// and the temporaries. torchao: torchtune's construction (an nn.Linear weight in `load_dtype`
// made on the device, then to_nf4).
void quantize_on_device(const scenario::WeightsConfig& weights, const LayerGraph& graph, const QuantizedWeight& quantized,
                        DType load_dtype, ScheduleWriter* writer);

// torchtune's model.load_state_dict for an NF4 weight (NF4Tensor's copy_): the checkpoint's
// tensor copied to the device, a second NF4Tensor made from it by to_nf4, copied into the
// weight's own tensors, then both freed.
void reload_torchao_weight(const scenario::WeightsConfig& weights, const LayerGraph& graph, const QuantizedWeight& quantized,
                           DType load_dtype, ScheduleWriter* writer);

// The order transformers 5.x loads a checkpoint's tensors in (dot_natural_key: names split at
// dots, numbers compared as numbers): the permutation of graph.parameters.
std::vector<size_t> checkpoint_order(const LayerGraph& graph);

// transformers >= 4.50's caching_allocator_warmup (PR #36380; modeling_utils.py in 5.24): one
// torch.empty of every parameter's bytes on the device (quantized ones at 0.5 byte per element),
// capped at the device's total less 1.2 GiB, freed at once, so the allocator keeps the segment.
uint64_t from_pretrained_warmup_bytes(const scenario::Scenario& scenario, const LayerGraph& graph,
                                      const std::vector<QuantizedWeight>& quantized);

}  // namespace oomcast::planner
