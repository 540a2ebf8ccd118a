// The setup of quantized base weights: made on the device from a 16-bit copy (bitsandbytes as
// from_pretrained runs it, torchao's to_nf4 as torchtune builds and loads), the checkpoint's key
// order and the allocator warm-up of from_pretrained; torchao's forward rebuild of the weight.
#include <catch2/catch.hpp>

#include <algorithm>

#include "planner/families/families.h"
#include "planner/jobs/training_job.h"
#include "planner/model_setup.h"
#include "planner/quantized_loading.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::LoadMethod;
using oomcast::scenario::QuantLibrary;
using oomcast::scenario::Scenario;
using oomcast::scenario::TrainableKind;
using oomcast::scenario::WeightFormat;
using oomcast::scenario::testing::cpu_scenario;

namespace {

// llama-tiny with 4-bit base weights and LoRA on q_proj; torchao as torchtune runs it (bf16
// parameters and adapters).
Scenario qlora_scenario(QuantLibrary library) {
  Scenario s = cpu_scenario("llama-tiny", 2, 32);
  s.device.is_cpu = library == QuantLibrary::Torchao;  // bitsandbytes is CUDA-only; torchao runs on the CPU
  if (library == QuantLibrary::Torchao) {
    s.precision = oomcast::scenario::Precision::PureBf16;
    s.job.training.master_weights = false;
    s.job.training.lora.autocast_adapter_dtype = false;
  }
  s.job.weights.format = WeightFormat::Nf4;
  s.job.weights.library = library;
  s.job.training.kind = TrainableKind::None;
  s.job.training.lora.enabled = true;
  s.job.training.lora.target_modules = {"q_proj"};
  return s;
}

// The events of the setup phase: (slot name, bytes) of every allocation, in order.
std::vector<std::pair<std::string, uint64_t>> setup_allocations(const PlannedTrace& planned) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const oomcast::sim::Event& event : planned.trace.events) {
    if (event.kind == oomcast::sim::EventKind::Mark && planned.trace.strings[event.tag] != "setup") break;
    if (event.kind == oomcast::sim::EventKind::Alloc) out.emplace_back(planned.trace.slot_names[event.slot], event.bytes);
  }
  return out;
}

size_t position_of(const std::vector<std::pair<std::string, uint64_t>>& allocations, const std::string& name) {
  for (size_t i = 0; i < allocations.size(); ++i) {
    if (allocations[i].first == name) return i;
  }
  FAIL("no allocation named " << name);
  return 0;
}

LayerGraph build(const Scenario& s) {
  GraphBuilder builder(scenario_build_context(s, s.seq_len, true, true));
  families::build_forward(builder, s.model);
  return builder.finish();
}

}  // namespace

TEST_CASE("a bitsandbytes 4-bit weight is quantized on the device from a copy in the compute dtype",
          "[planner][weights][loading]") {
  PlannedTrace planned = plan_steps(qlora_scenario(QuantLibrary::Bitsandbytes));
  const auto allocations = setup_allocations(planned);
  // llama-tiny q_proj [64, 64]: a 4,096-element bf16 copy, then absmax (fp32, 64 blocks), the
  // packed weight, and with double quantization the int8 absmax and its second level.
  const std::string weight = "model.layers.0.self_attn.q_proj.weight";
  const size_t copy = position_of(allocations, weight + ".loaded");
  CHECK(allocations[copy].second == 4096 * 2);
  CHECK(allocations[copy + 1].first == weight + ".absmax_fp32");
  CHECK(allocations[copy + 1].second == 64 * 4);
  CHECK(allocations[copy + 2].first == weight);
  CHECK(allocations[copy + 2].second == 4096 / 2);
  CHECK(position_of(allocations, weight + ".quant_state.absmax") > copy);
  CHECK(position_of(allocations, weight + ".quant_state.nested_code") > copy);
}

TEST_CASE("the quantization state is allocated once, with its weight", "[planner][weights][loading]") {
  PlannedTrace planned = plan_steps(qlora_scenario(QuantLibrary::Bitsandbytes));
  const auto allocations = setup_allocations(planned);
  const auto named = [&](const std::string& name) {
    return std::count_if(allocations.begin(), allocations.end(), [&](const auto& a) { return a.first == name; });
  };
  CHECK(named("model.layers.1.mlp.down_proj.weight.quant_state.absmax") == 1);
  CHECK(named("model.layers.1.mlp.down_proj.weight") == 1);
}

TEST_CASE("from_pretrained loads the checkpoint's tensors with layer numbers compared as numbers",
          "[planner][weights][loading]") {
  Scenario s = qlora_scenario(QuantLibrary::Bitsandbytes);
  s.model.dims["layers"] = 11;
  LayerGraph graph = build(s);
  std::vector<std::string> names;
  for (size_t p : checkpoint_order(graph)) names.push_back(graph.names[graph.tensors[graph.parameters[p]].name]);
  const auto at = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) - names.begin(); };
  // transformers' dot_natural_key: lm_head < model.*, layers.9 < layers.10, and within a layer
  // input_layernorm < mlp.down_proj < ... < self_attn.v_proj.
  CHECK(at("lm_head.weight") < at("model.embed_tokens.weight"));
  CHECK(at("model.layers.9.self_attn.q_proj.weight") < at("model.layers.10.input_layernorm.weight"));
  CHECK(at("model.layers.2.mlp.down_proj.weight") < at("model.layers.2.self_attn.q_proj.weight"));
  // PEFT's adapters are not in the checkpoint: they stay after every base parameter.
  CHECK(at("model.layers.0.self_attn.q_proj.lora_A.default.weight") > at("model.norm.weight"));
}

TEST_CASE("from_pretrained on a GPU warms the allocator up with the model's bytes at 0.5 byte per 4-bit element",
          "[planner][weights][loading]") {
  Scenario s = qlora_scenario(QuantLibrary::Bitsandbytes);
  s.job.loading.method = LoadMethod::FromPretrained;
  LayerGraph graph = build(s);
  const std::vector<QuantizedWeight> quantized = quantized_weights(graph);
  uint64_t expected = 0;
  for (size_t p = 0; p < graph.first_adapter_parameter; ++p) {
    const TensorDesc& desc = graph.tensors[graph.parameters[p]];
    expected += desc.dtype == DType::UInt8 ? desc.numel : desc.bytes();  // ceil(N/2) packed bytes
  }
  CHECK(from_pretrained_warmup_bytes(s, graph, quantized) == expected);
  PlannedTrace planned = plan_steps(s);
  const auto allocations = setup_allocations(planned);
  REQUIRE_FALSE(allocations.empty());
  CHECK(allocations.front().first == "from_pretrained.allocator_warmup");
  CHECK(allocations.front().second == expected);
}

TEST_CASE("torchtune's NF4 linear is built in bf16, quantized by to_nf4, then loaded through a second to_nf4",
          "[planner][weights][loading]") {
  PlannedTrace planned = plan_steps(qlora_scenario(QuantLibrary::Torchao));
  const auto allocations = setup_allocations(planned);
  const std::string weight = "model.layers.0.self_attn.q_proj.weight";
  const size_t built = position_of(allocations, weight + ".linear_weight");
  const size_t loaded = position_of(allocations, weight + ".state_dict_copy");
  CHECK(built < position_of(allocations, weight));
  CHECK(loaded > position_of(allocations, "model.norm.weight"));  // after the whole model is built
  CHECK(allocations[loaded].second == allocations[built].second);
  // to_nf4's largest temporaries: the scaled blocks (the weight's bytes), the uint8 codes (one
  // per element) and one chunk's [chunk, 16] difference and distance.
  CHECK(std::any_of(allocations.begin() + static_cast<std::ptrdiff_t>(loaded), allocations.end(),
                    [&](const auto& a) { return a.first == weight + ".nf4_chunk_distance" && a.second == 4096 * 16 * 2; }));
}

TEST_CASE("a torchao NF4 linear rebuilds its weight through int64 code indices in forward and backward",
          "[planner][weights]") {
  Scenario s = qlora_scenario(QuantLibrary::Torchao);
  LayerGraph graph = build(s);
  const OpNode* q_proj = nullptr;
  for (const OpNode& op : graph.ops) {
    if (graph.names[op.name] == "model.layers.1.self_attn.q_proj") q_proj = &op;
  }
  REQUIRE(q_proj != nullptr);
  // get_original_weight on 4,096 bf16 elements: two int64 index halves (8 B per half element),
  // two looked-up halves, the 64 scalers, two scaled halves and the stacked weight, all live at
  // once (the same sum as validate/nf4_probe.py measures with torchao 0.18 on the CPU).
  uint64_t total = 0;
  for (const Transient& transient : q_proj->forward_transients) total += transient.bytes;
  CHECK(total == 2048 * 8 * 2 + 2048 * 2 * 4 + 64 * 2 + 4096 * 2);
  CHECK(q_proj->backward_transients.size() == q_proj->forward_transients.size());
  CHECK(q_proj->saved.empty());
}

TEST_CASE("prepare_model_for_kbit_training casts the unquantized parameters to fp32 before the adapters exist",
          "[planner][weights][loading]") {
  Scenario s = qlora_scenario(QuantLibrary::Bitsandbytes);
  s.job.training.prepare_kbit = true;
  PlannedTrace planned = plan_steps(s);
  const auto allocations = setup_allocations(planned);
  // llama-tiny's embedding [256, 64]: loaded in bf16, then an fp32 copy replaces it.
  const size_t loaded = position_of(allocations, "model.embed_tokens.weight");
  const size_t cast = position_of(allocations, "model.embed_tokens.weight.fp32");
  CHECK(allocations[loaded].second == 256 * 64 * 2);
  CHECK(allocations[cast].second == 256 * 64 * 4);
  CHECK(cast < position_of(allocations, "model.layers.0.self_attn.q_proj.lora_A.default.weight"));
  // The 4-bit weights stay packed.
  CHECK(position_of(allocations, "model.layers.0.self_attn.q_proj.weight") < cast);
}

TEST_CASE("after prepare_model_for_kbit_training the model runs in fp32 around bf16 4-bit matmuls", "[planner][weights]") {
  Scenario s = qlora_scenario(QuantLibrary::Bitsandbytes);
  s.job.training.prepare_kbit = true;
  LayerGraph graph = build(s);
  for (const OpNode& op : graph.ops) {
    if (graph.names[op.name] != "model.layers.0.self_attn.q_proj") continue;
    CHECK(graph.tensors[op.inputs[0]].dtype == DType::BFloat16);   // x.to(compute_dtype)
    CHECK(graph.tensors[op.outputs[0]].dtype == DType::BFloat16);
  }
  CHECK(graph.tensors[graph.parameters[0]].dtype == DType::Float32);  // the embedding
}
