// model.to(device) allocates each parameter, then each buffer, on its own. Built in fp32 and
// then converted (`model.to(torch.bfloat16)`, `.half()`): Module._apply converts one tensor at
// a time, allocating the 16-bit copy before `param.data = ...` frees the fp32 original. What the
// constructor drops before returning (graph.construction_temporaries) is allocated in between.
// Quantized base weights exist in 16 bits first and are quantized on the device
// (planner/quantized_loading.h); from_pretrained on a GPU warms the allocator up and loads the
// checkpoint's tensors in its key order.
#include "planner/model_setup.h"

#include <unordered_map>
#include <unordered_set>

#include "planner/quantized_loading.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

using scenario::LoadMethod;
using scenario::MoeImbalance;
using scenario::Scenario;

BuildContext scenario_build_context(const Scenario& scenario, int64_t seq_len, bool training, bool grad_enabled) {
  BuildContext context;
  context.precision = job_precision_rules(scenario);
  context.attention = scenario.attention;
  context.dropout = scenario.dropout;
  context.training = training;
  context.grad_enabled = grad_enabled;
  context.batch = scenario.batch_size;
  context.seq_len = seq_len;
  context.cpu_kernels = scenario.device.is_cpu;
  context.torch_version = scenario.allocator.torch_version;
  context.moe_worst_case = scenario.moe_imbalance == MoeImbalance::Worst;
  context.job = &scenario.job;
  context.input_require_grads = input_require_grads(scenario);
  context.checkpoint_mode = scenario.checkpointing.mode;
  context.checkpoint_every_n = scenario.checkpointing.every_n;
  context.checkpoint_reentrant = scenario.checkpointing.reentrant;
  context.loss_chunks = scenario.loss.chunks;
  return context;
}

void allocate_model(const Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer, bool parameters) {
  const bool cast_after_build = scenario.job.loading.method == LoadMethod::BuiltThenCast;
  std::unordered_map<TensorId, uint32_t> fp32_slots;  // built in fp32, converted below
  auto allocate = [&](TensorId tensor, TensorCategory category) {
    const TensorDesc& desc = graph.tensors[tensor];
    uint32_t name = writer->intern(graph.names[desc.name]);
    if (cast_after_build && is_floating(desc.dtype) && desc.dtype != DType::Float32) {
      fp32_slots[tensor] = writer->alloc(name, desc.numel * 4, category);
    } else {
      writer->alloc(name, desc.bytes(), category);
    }
  };
  // The constructor's temporaries exist where the model is built from its config: on the CPU,
  // which a CUDA job leaves with model.to(device), so only a CPU job sees them; from_pretrained
  // instantiates on the meta device and never allocates them. They die when the constructor
  // returns, with every parameter and buffer built.
  std::vector<uint32_t> temporaries;
  bool buffers_allocated = false;
  // Quantized base weights are made on the device from a 16-bit copy (planner/quantized_loading.h).
  const std::vector<QuantizedWeight> quantized = quantized_weights(graph);
  std::unordered_map<TensorId, size_t> quantized_index;
  std::unordered_set<TensorId> quantized_state;
  for (size_t q = 0; q < quantized.size(); ++q) {
    quantized_index[quantized[q].weight] = q;
    quantized_state.insert(quantized[q].state.begin(), quantized[q].state.end());
  }
  const DType load_dtype = weights_parameter_dtype(scenario.job.weights, job_precision_rules(scenario).parameter_dtype);
  if (parameters) {
    const bool built_here = scenario.device.is_cpu && scenario.job.loading.method != LoadMethod::FromPretrained;
    const DType built_dtype = cast_after_build ? DType::Float32 : job_precision_rules(scenario).parameter_dtype;
    auto allocate_temporaries_at = [&](size_t position) {
      if (!built_here) return;
      for (const ConstructionTemporary& temporary : graph.construction_temporaries) {
        if (temporary.after_parameters != position) continue;
        const DType dtype = temporary.dtype.value_or(built_dtype);
        temporaries.push_back(writer->alloc(writer->intern(graph.names[temporary.name] + ".construction"),
                                            temporary.numel * dtype_bytes(dtype), TensorCategory::Parameter));
      }
    };
    auto free_temporaries = [&] {
      for (uint32_t slot : temporaries) writer->free(slot);
      temporaries.clear();
    };
    size_t next_init_work = 0;
    // Hugging Face's from_pretrained (with a device_map) on a GPU: the allocator warm-up, then
    // the checkpoint's tensors in its key order.
    const bool hf_load = scenario.job.loading.method == LoadMethod::FromPretrained && !scenario.device.is_cpu;
    const auto release = scenario.model.dims.find("transformers_version");
    const bool warms_up = release == scenario.model.dims.end() || release->second >= 450;  // added in 4.50
    if (hf_load && warms_up) {
      const uint64_t warmup = from_pretrained_warmup_bytes(scenario, graph, quantized);
      if (warmup > 0) writer->free(writer->alloc(writer->intern("from_pretrained.allocator_warmup"), warmup, TensorCategory::Temporary));
    }
    const std::vector<size_t> order = hf_load ? checkpoint_order(graph) : std::vector<size_t>{};
    // PEFT's prepare_model_for_kbit_training, called on the loaded model before get_peft_model
    // adds the adapters: each 16-bit parameter that is not quantized becomes fp32
    // (param.data = param.data.to(torch.float32), one at a time), then torch.cuda.empty_cache().
    const bool prepare_kbit = scenario.job.training.prepare_kbit && scenario.job.weights.quantized();
    std::vector<std::pair<TensorId, uint32_t>> loaded_16bit;
    auto prepare_for_kbit_training = [&] {
      if (!prepare_kbit) return;
      for (const auto& [parameter, slot] : loaded_16bit) {
        writer->alloc(writer->intern(graph.names[graph.tensors[parameter].name] + ".fp32"), graph.tensors[parameter].bytes(),
                      TensorCategory::Parameter);
        writer->free(slot);
      }
      loaded_16bit.clear();
      writer->empty_cache();
    };
    for (size_t position = 0; position < graph.parameters.size(); ++position) {
      const size_t i = hf_load ? order[position] : position;
      if (i == graph.first_adapter_parameter) prepare_for_kbit_training();
      allocate_temporaries_at(i);
      if (i == graph.first_adapter_parameter && !temporaries.empty()) {
        // PEFT adds the adapters to a built model: its buffers exist, its temporaries are gone.
        for (TensorId buffer : graph.buffers) {
          if (!quantized_state.count(buffer)) allocate(buffer, TensorCategory::Buffer);
        }
        buffers_allocated = true;
        free_temporaries();
      }
      // DoRA's update_layer: B @ A, s * (B @ A) and W + s * (B @ A); the scaled product goes
      // once the sum exists, the norm (the magnitude parameter) is made, then the rest go.
      std::vector<uint32_t> init_work;
      for (; next_init_work < graph.adapter_init_work.size() && graph.adapter_init_work[next_init_work].parameter == i;
           ++next_init_work) {
        const AdapterInitWork& work = graph.adapter_init_work[next_init_work];
        const uint32_t name = writer->intern(graph.names[work.name]);
        init_work.push_back(writer->alloc(name, work.matrix_bytes, TensorCategory::Temporary));
        const uint32_t scaled = writer->alloc(name, work.matrix_bytes, TensorCategory::Temporary);
        init_work.push_back(writer->alloc(name, work.matrix_bytes, TensorCategory::Temporary));
        writer->free(scaled);
      }
      auto found = quantized_index.find(graph.parameters[i]);
      if (found != quantized_index.end()) {
        quantize_on_device(scenario.job.weights, graph, quantized[found->second], load_dtype, writer);
      } else if (prepare_kbit && i < graph.first_adapter_parameter && graph.tensors[graph.parameters[i]].dtype == DType::Float32) {
        // Loaded in the compute dtype; converted by prepare_for_kbit_training.
        const TensorDesc& desc = graph.tensors[graph.parameters[i]];
        loaded_16bit.emplace_back(graph.parameters[i], writer->alloc(writer->intern(graph.names[desc.name]),
                                                                     desc.numel * dtype_bytes(load_dtype), TensorCategory::Parameter));
      } else {
        allocate(graph.parameters[i], TensorCategory::Parameter);
      }
      for (auto slot = init_work.rbegin(); slot != init_work.rend(); ++slot) writer->free(*slot);
    }
    allocate_temporaries_at(graph.parameters.size());
    prepare_for_kbit_training();  // no adapters
  }
  if (!buffers_allocated) {
    for (TensorId buffer : graph.buffers) {
      if (!parameters || !quantized_state.count(buffer)) allocate(buffer, TensorCategory::Buffer);
    }
  }
  for (uint32_t slot : temporaries) writer->free(slot);
  if (parameters && scenario.job.weights.library == scenario::QuantLibrary::Torchao) {
    // torchtune's recipe then loads the checkpoint: model.load_state_dict(...), NF4Tensor.copy_.
    for (const QuantizedWeight& weight : quantized) reload_torchao_weight(scenario.job.weights, graph, weight, load_dtype, writer);
  }
  if (!cast_after_build) return;
  auto convert = [&](TensorId tensor, TensorCategory category) {
    auto found = fp32_slots.find(tensor);
    if (found == fp32_slots.end()) return;
    const uint32_t fp32 = found->second;
    const TensorDesc& desc = graph.tensors[tensor];
    writer->alloc(writer->intern(graph.names[desc.name] + ".converted"), desc.bytes(), category);
    writer->free(fp32);
  };
  if (parameters) {
    for (TensorId parameter : graph.parameters) convert(parameter, TensorCategory::Parameter);
  }
  for (TensorId buffer : graph.buffers) convert(buffer, TensorCategory::Buffer);
}

}  // namespace oomcast::planner
