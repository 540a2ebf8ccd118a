// Tests of the jobs around the model: forward-only jobs (inference, forward), the trainable
// subset and LoRA, PEFT's enable_input_require_grads under reentrant checkpointing, weight
// formats (hand-worked bitsandbytes storage), master weights and loading by conversion.
#include <catch2/catch.hpp>

#include "planner/families/families.h"
#include "planner/model_setup.h"
#include "planner/ops/linear_variants.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::CheckpointMode;
using oomcast::scenario::JobKind;
using oomcast::scenario::LoadMethod;
using oomcast::scenario::LoraConfig;
using oomcast::scenario::OptimizerType;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::scenario::TrainableKind;
using oomcast::scenario::WeightFormat;
using oomcast::scenario::WeightsConfig;
using oomcast::planner::testing::check_schedule;
using oomcast::scenario::testing::cpu_scenario;

namespace {

bool any_category(const PlannedTrace& planned, TensorCategory category) {
  for (const EventInfo& info : planned.info) {
    if (info.category == category) return true;
  }
  return false;
}

bool has_slot_containing(const PlannedTrace& planned, const std::string& text) {
  for (const std::string& name : planned.trace.slot_names) {
    if (name.find(text) != std::string::npos) return true;
  }
  return false;
}

uint64_t live_at(const testing::ScheduleCheck& check, const std::string& mark) {
  auto found = check.live_at_mark.find(mark);
  REQUIRE(found != check.live_at_mark.end());
  return found->second;
}

// The highest live bytes before the mark `until` (the setup phase's peak for "iter0/forward").
uint64_t peak_before(const PlannedTrace& planned, const std::string& until) {
  std::vector<uint64_t> bytes(planned.trace.slot_names.size(), 0);
  uint64_t live = 0, peak = 0;
  for (const oomcast::sim::Event& event : planned.trace.events) {
    if (event.kind == oomcast::sim::EventKind::Mark && planned.trace.strings[event.tag] == until) break;
    if (event.kind == oomcast::sim::EventKind::Alloc) {
      bytes[event.slot] = event.bytes;
      live += event.bytes;
      peak = std::max(peak, live);
    } else if (event.kind == oomcast::sim::EventKind::Free) {
      live -= bytes[event.slot];
    }
  }
  return peak;
}

Scenario inference_scenario(bool compute_loss) {
  Scenario s = cpu_scenario("llama-tiny", 2, 32);
  s.job.job.kind = JobKind::Inference;
  s.job.job.batches = 3;
  s.job.job.compute_loss = compute_loss;
  s.job.job.held_outputs = {compute_loss ? "loss" : "logits"};
  return s;
}

LayerGraph build(const Scenario& s, bool grad_enabled = true) {
  GraphBuilder builder(scenario_build_context(s, s.seq_len, true, grad_enabled));
  families::build_forward(builder, s.model);
  return builder.finish();
}

}  // namespace

TEST_CASE("an inference job allocates no gradient and no optimizer state", "[planner][jobs]") {
  PlannedTrace planned = plan_steps(inference_scenario(true));
  testing::ScheduleCheck check = check_schedule(planned);
  REQUIRE(check.ok);
  CHECK_FALSE(any_category(planned, TensorCategory::Gradient));
  CHECK_FALSE(any_category(planned, TensorCategory::OptimizerState));
  CHECK(check.live_at_mark.count("iter2/forward") == 1);
  CHECK(check.live_at_mark.count("iter0/backward") == 0);
}

TEST_CASE("a model called without labels computes no loss and loads no labels", "[planner][jobs]") {
  PlannedTrace with_loss = plan_steps(inference_scenario(true));
  PlannedTrace logits_only = plan_steps(inference_scenario(false));
  CHECK(has_slot_containing(with_loss, "cross_entropy"));
  CHECK(has_slot_containing(with_loss, "labels"));
  CHECK_FALSE(has_slot_containing(logits_only, "cross_entropy"));
  CHECK_FALSE(has_slot_containing(logits_only, "labels"));
  CHECK(check_schedule(logits_only).ok);
}

TEST_CASE("repeated forwards with grad on keep one batch's graph alive into the next forward", "[planner][jobs]") {
  Scenario no_grad = inference_scenario(true);
  Scenario grad = no_grad;
  grad.job.job.kind = JobKind::Forward;
  testing::ScheduleCheck without = check_schedule(plan_steps(no_grad));
  testing::ScheduleCheck with = check_schedule(plan_steps(grad));
  REQUIRE(with.ok);
  // The held loss keeps its graph's saved tensors until `loss = model(x, y)` rebinds it.
  CHECK(live_at(with, "iter1/forward") > live_at(without, "iter1/forward") + 10000);
  CHECK(with.peak_bytes > without.peak_bytes);
}

TEST_CASE("LoRA trains only the adapters: optimizer state and grads exist for them alone", "[planner][jobs]") {
  Scenario s = cpu_scenario("gpt2-tiny", 2, 32);
  s.job.training.kind = TrainableKind::None;
  s.job.training.lora.enabled = true;
  s.job.training.lora.r = 4;
  s.job.training.lora.target_modules = {"c_attn"};
  s.iterations = 2;
  PlannedTrace planned = plan_steps(s);
  testing::ScheduleCheck check = check_schedule(planned);
  REQUIRE(check.ok);
  // gpt2-tiny: hidden 64, 2 blocks; c_attn is [192, 64]: lora_A [4, 64] + lora_B [192, 4] =
  // 1,024 fp32 parameters per block, 2,048 in all; AdamW keeps exp_avg and exp_avg_sq.
  CHECK(check.live_at_end_by_category.at("optimizer_state") == 2 * 2048 * 4);
  for (size_t i = 0; i < planned.info.size(); ++i) {
    if (planned.info[i].category != TensorCategory::Gradient) continue;
    const oomcast::sim::Event& event = planned.trace.events[i];
    INFO(planned.trace.slot_names[event.slot]);
    CHECK(planned.trace.slot_names[event.slot].find("lora_") != std::string::npos);
  }
  CHECK(planned.parameter_count == 124672 + 2048);
}

TEST_CASE("layers before the first trainable parameter record no graph and save nothing", "[planner][jobs]") {
  Scenario s = cpu_scenario("llama-tiny", 2, 32);
  s.job.training.kind = TrainableKind::Patterns;
  s.job.training.patterns = {"lm_head"};
  LayerGraph graph = build(s);
  size_t lm_head = 0;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    if (graph.names[graph.ops[i].name] == "lm_head") lm_head = i;
  }
  REQUIRE(lm_head > 0);
  for (size_t i = 0; i < lm_head; ++i) {
    INFO(graph.names[graph.ops[i].name]);
    CHECK_FALSE(graph.ops[i].records_grad_node);
    CHECK(graph.ops[i].saved.empty());
  }
  // lm_head's weight trains, its input does not: it saves the input only.
  REQUIRE(graph.ops[lm_head].saved.size() == 1);
  CHECK(graph.tensors[graph.ops[lm_head].saved[0]].role == TensorRole::Activation);
}

TEST_CASE("frozen embeddings under reentrant checkpointing need enable_input_require_grads for the blocks to train",
          "[planner][jobs]") {
  Scenario s = cpu_scenario("llama-tiny", 2, 32);
  s.checkpointing.mode = CheckpointMode::Full;
  s.job.training.freeze = {"embed_tokens"};
  s.job.training.input_require_grads = 1;
  PlannedTrace hooked = plan_steps(s);
  s.job.training.input_require_grads = 0;
  PlannedTrace unhooked = plan_steps(s);
  REQUIRE(check_schedule(hooked).ok);
  REQUIRE(check_schedule(unhooked).ok);
  CHECK(has_slot_containing(hooked, "grad:model.layers.0.self_attn.q_proj.weight"));
  // Without the hook every block runs without a graph: its parameters never get a gradient.
  CHECK_FALSE(has_slot_containing(unhooked, "grad:model.layers.0.self_attn.q_proj.weight"));
  CHECK(has_slot_containing(unhooked, "grad:lm_head.weight"));
}

TEST_CASE("bitsandbytes storage of a 4096x4096 weight matches the hand-worked formulas", "[planner][jobs][weights]") {
  // docs/weight-formats.md: N = 16,777,216, 64-element blocks: 262,144 blocks.
  const uint64_t numel = 4096ull * 4096ull;
  WeightsConfig nf4;
  nf4.format = WeightFormat::Nf4;
  ops::QuantizedStorage dq = ops::quantized_storage(nf4, numel, 4096);
  CHECK(dq.weight_bytes == 8388608);
  // int8 absmax, fp32 second level, offset, the nested state's 256-entry map, the 4-bit table.
  CHECK(dq.state_bytes == 262144 + 4 * 1024 + 4 + 1024 + 64);
  // QLoRA §3: 4 + 8/64 + 32/(64*256) = 4.127 bits per parameter with double quantization.
  CHECK(static_cast<double>(dq.weight_bytes + dq.state_bytes) * 8 / static_cast<double>(numel) ==
        Approx(4.127).epsilon(0.001));
  nf4.double_quant = false;
  ops::QuantizedStorage plain = ops::quantized_storage(nf4, numel, 4096);
  CHECK(plain.weight_bytes + plain.state_bytes == 8388608 + 1048576 + 64);  // 4.5 bits
  WeightsConfig int8;
  int8.format = WeightFormat::Int8;
  ops::QuantizedStorage llm_int8 = ops::quantized_storage(int8, numel, 4096);
  CHECK(llm_int8.weight_bytes + llm_int8.state_bytes == 16777216 + 4096 * 4);
}

TEST_CASE("torchao NF4 storage of a 4096x4096 bf16 weight matches the hand-worked formulas", "[planner][jobs][weights]") {
  // docs/weight-formats.md: quantized_data N/2, int8 scalers per 64 elements, one bf16 factor per
  // 256 scalers, the bf16 mean and the 16-entry bf16 table (torchao 0.19 nf4_tensor.py).
  WeightsConfig nf4;
  nf4.format = WeightFormat::Nf4;
  nf4.library = oomcast::scenario::QuantLibrary::Torchao;
  ops::QuantizedStorage storage = ops::quantized_storage(nf4, 4096ull * 4096ull, 4096);
  CHECK(storage.weight_bytes == 8388608);
  CHECK(storage.state_bytes == 262144 + 1024 * 2 + 2 + 32);
}

TEST_CASE("a 4-bit linear dequantizes its weight as a transient in forward and again in backward",
          "[planner][jobs][weights]") {
  Scenario s = cpu_scenario("llama-tiny", 2, 32);
  s.device.is_cpu = false;  // bitsandbytes is CUDA-only; the planner itself does not care
  s.job.weights.format = WeightFormat::Nf4;
  s.job.training.kind = TrainableKind::None;
  s.job.training.lora.enabled = true;
  s.job.training.lora.target_modules = {"q_proj"};
  LayerGraph graph = build(s);
  const OpNode* q_proj = nullptr;
  for (const OpNode& op : graph.ops) {
    if (graph.names[op.name] == "model.layers.1.self_attn.q_proj") q_proj = &op;
  }
  REQUIRE(q_proj != nullptr);
  // llama-tiny q_proj: [64, 64] = 4,096 elements; bf16 compute: 8,192 B dequantized; 64 blocks
  // -> 256 B of fp32 absmax rebuilt first.
  REQUIRE(q_proj->forward_transients.size() == 2);
  CHECK(q_proj->forward_transients[0].bytes == 64 * 4);
  CHECK(q_proj->forward_transients[1].bytes == 4096 * 2);
  CHECK(q_proj->backward_transients.size() == 2);  // layer 1's input requires grad (layer 0's adapter)
  CHECK(q_proj->saved.empty());
  const TensorDesc& weight = graph.tensors[q_proj->inputs[1]];
  CHECK(weight.bytes() == 4096 / 2);
  CHECK_FALSE(weight.requires_grad);
}

TEST_CASE("QLoRA's headline: a 65B Llama fine-tunes on one 48 GB GPU with the paper's settings",
          "[planner][jobs][weights]") {
  // Dettmers et al. 2023: NF4 + double quantization, bf16 compute, LoRA r=64 on every linear,
  // gradient checkpointing, paged 8-bit AdamW (paging not modelled), one 512-token sequence.
  Scenario s;
  s.model = oomcast::scenario::testing::inline_model("llama", {{"layers", 80}, {"hidden", 8192}, {"heads", 64}, {"kv_heads", 64},
                                            {"ffn_hidden", 22016}, {"vocab", 32000}, {"max_positions", 2048}});
  s.batch_size = 1;
  s.seq_len = 512;
  s.iterations = 2;
  s.attention = AttentionImpl::SdpaMath;
  s.checkpointing.mode = CheckpointMode::Full;
  s.optimizer.type = OptimizerType::AdamW8bit;
  s.job.weights.format = WeightFormat::Nf4;
  s.job.training.kind = TrainableKind::None;
  s.job.training.lora = LoraConfig{true, 64, 16.0, 0.05, {"all-linear"}, "none"};
  PlannedTrace planned = plan_steps(s);
  testing::ScheduleCheck check = check_schedule(planned);
  REQUIRE(check.ok);
  const uint64_t gib = 1ull << 30;
  // 48 GB card, less the CUDA context (512 MiB) and allocator rounding headroom.
  CHECK(check.peak_bytes < 46 * gib);
  // And full fine-tuning of its fp16 weights alone would not: 65B x 2 B > 48 GB.
  CHECK(planned.parameter_count * 2 > 48 * gib);
}

TEST_CASE("pure bf16 without master weights keeps bf16 optimizer states and no fp32 copies", "[planner][jobs]") {
  Scenario s = cpu_scenario("gpt2-tiny", 2, 32, Precision::PureBf16);
  s.job.training.master_weights = false;
  PlannedTrace planned = plan_steps(s);
  testing::ScheduleCheck check = check_schedule(planned);
  REQUIRE(check.ok);
  CHECK_FALSE(has_slot_containing(planned, "master_fp32"));
  CHECK(check.live_at_end_by_category.at("optimizer_state") == 2 * 124672ull * 2);
}

TEST_CASE("built in fp32 then converted, setup peaks at the fp32 model plus one converted tensor", "[planner][jobs]") {
  Scenario s = cpu_scenario("gpt2-tiny", 2, 32, Precision::PureBf16);
  // Untied: a tied model's constructor also holds the lm_head weight tying replaces, in fp32
  // (construction_temporaries_test.cc), which would set this setup's peak instead.
  s.model.options["tied_embeddings"] = "false";
  s.job.loading.method = LoadMethod::BuiltThenCast;
  s.job.training.master_weights = false;  // masters would be made after the conversion
  PlannedTrace planned = plan_steps(s);
  testing::ScheduleCheck check = check_schedule(planned);
  REQUIRE(check.ok);
  // gpt2-tiny untied (sdpa: no mask buffers): 124,672 + 16,384 (lm_head) fp32 parameters =
  // 564,224 B; the first converted tensor, wte [256, 64], is the largest: 32,768 B in bf16.
  // Afterwards only bf16 remains.
  CHECK(peak_before(planned, "iter0/forward") == 564224 + 32768);
  CHECK(live_at(check, "iter0/forward") == 141056 * 2);
}
