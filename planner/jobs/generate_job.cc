// model.generate() as Hugging Face runs it, under no_grad with model.eval():
//   iter0/prefill:  logits = model(input_ids)                 # [b', prompt, vocab], or the last position
//                   next = logits[:, -1, :].clone().float(); del logits; tokens = argmax(next)
//                   input_ids = torch.cat([input_ids, tokens[:, None]], -1)
//   iter{t}/decode: the same on one new token per sequence, attending over the cache
// b' = batch x num_return_sequences (sampling) or x num_beams (beam search). The cache is the
// graph's, layer by layer (one layer per block unit): DynamicCache.update grows each layer's
// K and V with torch.cat (a new, one-token-longer tensor; the old one freed), StaticCache
// preallocates [b', kv_heads, max_cache_len, head_dim] per layer before the prefill and writes
// in place. Grouped-query models repeat the whole cache to every query head per layer and step
// (repeat_kv's expand + reshape copies). Beam search reorders the cache after every step
// (index_select: a copy of each layer's K and V). Captured decode graphs (`cuda_graphs`,
// static cache only) are captured after the prefill, one per batch size; a decode step that
// one of them covers replays it: the model's forward allocates nothing, its logits are the
// graph's static output. A long generation plans a sample of its decode steps
// (decode_steps.h): the cache of a planned step holds every token before it, planned or not.
#include "planner/jobs/generate_job.h"

#include <string>
#include <string_view>
#include <vector>

#include "base/input_error.h"
#include "scenario/size_limits.h"
#include "planner/checkpointing.h"
#include "planner/cuda_graph_capture.h"
#include "planner/timing/generation_time.h"
#include "planner/families/families.h"
#include "planner/graph_prune.h"
#include "planner/graph_runner.h"
#include "planner/jobs/decode_steps.h"
#include "planner/model_setup.h"
#include "planner/schedule_size.h"
#include "planner/schedule_writer.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

using scenario::CapturedPhase;
using scenario::CheckpointConfig;
using scenario::CudaGraphConfig;
using scenario::GenerateConfig;
using scenario::KvCacheKind;
using scenario::ModelConfig;
using scenario::OpKind;
using scenario::Scenario;
using scenario::saturating_product;

namespace {

struct CacheShape {
  int64_t layers = 0;
  uint64_t bytes_per_token = 0;     // one layer's K (or V) per sequence position, all sequences
  uint64_t repeated_per_token = 0;  // repeat_kv's copy per position (0 without grouped-query attention)
};

// Whether the graph's attention copies k and v to every query head (the families' repeat_kv
// ops, planner/families/rotary_decoder.h): not under SDPA's enable_gqa in the flash kernel.
bool is_repeat_key(const LayerGraph& graph, const OpNode& op) {
  static constexpr std::string_view kRepeat = "repeat_k";
  const std::string& name = graph.names[op.name];
  return name.size() >= kRepeat.size() && name.compare(name.size() - kRepeat.size(), kRepeat.size(), kRepeat) == 0;
}

bool graph_repeats_key_value(const LayerGraph& graph) {
  for (const OpNode& op : graph.ops) {
    if (is_repeat_key(graph, op)) return true;
  }
  return false;
}

// Walks the forward and keeps the cache: before each block's first attention product the
// block's K and V are updated, and (grouped-query) repeated to every head until the block ends.
class KvCacheHooks : public RunnerHooks {
 public:
  KvCacheHooks(const CacheShape& shape, const GenerateConfig& config, ScheduleWriter* writer)
      : shape_(shape), config_(config), writer_(writer) {
    key_.assign(static_cast<size_t>(shape.layers), UINT32_MAX);
    value_.assign(static_cast<size_t>(shape.layers), UINT32_MAX);
  }

  // The forward about to run (prefill or decode): where each block's cache update happens.
  // `graph_seq`: the positions the graph itself computes K and V for (the prompt, or 1).
  // `runner` runs it: the prefill's DynamicCache takes the graph's own K and V from it.
  void attach(const LayerGraph& graph, int64_t graph_seq, GraphRunner* runner) {
    graph_seq_ = graph_seq;
    runner_ = runner;
    const auto units = static_cast<size_t>(graph.num_units);
    cached_.assign(units, LayerGraph::CachedKeyValue{});
    for (const LayerGraph::CachedKeyValue& entry : graph.kv_cache_entries) {
      if (entry.unit >= 0 && static_cast<size_t>(entry.unit) < units) cached_[static_cast<size_t>(entry.unit)] = entry;
    }
    update_at_.assign(graph.ops.size(), -1);
    unit_end_.assign(graph.ops.size(), -1);
    std::vector<uint8_t> seen(units, 0);
    std::vector<int32_t> last(units, -1);
    for (uint32_t op = 0; op < graph.ops.size(); ++op) {
      const OpNode& node = graph.ops[op];
      if (node.unit < 0 || static_cast<size_t>(node.unit) >= key_.size()) continue;
      auto unit = static_cast<size_t>(node.unit);
      last[unit] = static_cast<int32_t>(op);
      // The update comes before repeat_kv (attention's first copy of k) or, without it, the
      // first attention product.
      if (!seen[unit] && (node.kind == OpKind::Matmul || node.kind == OpKind::Attention || is_repeat_key(graph, node))) {
        seen[unit] = 1;
        update_at_[op] = node.unit;
      }
    }
    for (size_t unit = 0; unit < units; ++unit) {
      if (last[unit] >= 0) unit_end_[static_cast<size_t>(last[unit])] = static_cast<int32_t>(unit);
    }
  }

  // Static cache: every layer's K and V exist before the prefill.
  void preallocate() {
    for (size_t unit = 0; unit < key_.size(); ++unit) {
      const uint64_t bytes = shape_.bytes_per_token * static_cast<uint64_t>(config_.max_cache_len);
      key_[unit] = writer_->alloc(name("k", unit), bytes, TensorCategory::Buffer);
      value_[unit] = writer_->alloc(name("v", unit), bytes, TensorCategory::Buffer);
    }
  }

  void set_length(int64_t length) { length_ = length; }

  void before_forward_op(uint32_t op) override {
    const int32_t unit = update_at_[op];
    if (unit < 0) return;
    auto u = static_cast<size_t>(unit);
    // The prefill's DynamicCache keeps the graph's own K and V where the graph says so
    // (transformers up to 4.55, nanoGPT-style caches: key_cache.append(key_states)): the
    // tensors themselves, so a view keeps its whole base (GPT-2's K and V are views of the
    // fused c_attn output, all 3 x hidden of it) until the first decode step replaces them.
    // Otherwise (transformers 4.56+: torch.cat onto an empty tensor) the update makes a copy,
    // here, before the attention. A decode step's torch.cat makes a new, one-token-longer
    // tensor while the old one still exists.
    if (config_.cache == KvCacheKind::Dynamic && key_[u] == UINT32_MAX && runner_ && u < cached_.size() &&
        cached_[u].key != kNoTensor) {
      key_[u] = runner_->keep_storage(cached_[u].key);
      value_[u] = runner_->keep_storage(cached_[u].value);
    } else if (config_.cache == KvCacheKind::Dynamic) {
      grow(u);
    }
    // repeat_kv copies every cached position to every head; the graph repeats its own positions.
    if (shape_.repeated_per_token > 0 && length_ > graph_seq_) {
      const uint64_t bytes = shape_.repeated_per_token * static_cast<uint64_t>(length_ - graph_seq_);
      repeated_.push_back(writer_->alloc(writer_->intern("kv_cache.repeat_k"), bytes, TensorCategory::Temporary));
      repeated_.push_back(writer_->alloc(writer_->intern("kv_cache.repeat_v"), bytes, TensorCategory::Temporary));
    }
  }
  void after_forward_op(uint32_t op) override {
    const int32_t unit = unit_end_[op];
    if (unit < 0) return;
    for (uint32_t slot : repeated_) writer_->free(slot);
    repeated_.clear();
    auto u = static_cast<size_t>(unit);
    if (config_.cache == KvCacheKind::Dynamic && key_[u] == UINT32_MAX) grow(u);
  }
  void before_backward_op(uint32_t, bool) override {}
  void after_backward_op(uint32_t) override {}
  void parameter_grad_ready(int32_t) override {}

  void grow(size_t u) {
    const uint64_t bytes = shape_.bytes_per_token * static_cast<uint64_t>(length_);
    replace(&key_[u], writer_->alloc(name("k", u), bytes, TensorCategory::Buffer));
    replace(&value_[u], writer_->alloc(name("v", u), bytes, TensorCategory::Buffer));
  }

  // Rebinds one cache entry; its old storage dies unless another entry (a view of the same
  // base: GPT-2's K and V) still holds it.
  void replace(uint32_t* entry, uint32_t slot) {
    const uint32_t old = *entry;
    *entry = slot;
    if (old == UINT32_MAX) return;
    for (const std::vector<uint32_t>* slots : {&key_, &value_}) {
      for (uint32_t held : *slots) {
        if (held == old) return;
      }
    }
    writer_->free(old);
  }

  // Beam search's cache.reorder_cache(beam_idx): index_select makes a copy of every layer.
  void reorder() {
    const int64_t length = config_.cache == KvCacheKind::Static ? config_.max_cache_len : length_;
    const uint64_t bytes = shape_.bytes_per_token * static_cast<uint64_t>(length);
    for (size_t unit = 0; unit < key_.size(); ++unit) {
      for (std::vector<uint32_t>* slots : {&key_, &value_}) {
        replace(&(*slots)[unit], writer_->alloc(name(slots == &key_ ? "k" : "v", unit), bytes, TensorCategory::Buffer));
      }
    }
  }

  void release() {
    for (std::vector<uint32_t>* slots : {&key_, &value_}) {
      for (uint32_t& slot : *slots) replace(&slot, UINT32_MAX);
    }
  }

 private:
  uint32_t name(const char* which, size_t unit) {
    return writer_->intern("kv_cache.layers." + std::to_string(unit) + "." + which);
  }

  CacheShape shape_;
  const GenerateConfig& config_;
  ScheduleWriter* writer_;
  std::vector<int32_t> update_at_;  // per op: the unit whose cache is updated before it, -1
  std::vector<int32_t> unit_end_;   // per op: the unit it ends, -1
  std::vector<uint32_t> key_, value_;   // writer slots; K and V may share one (views of one base)
  std::vector<LayerGraph::CachedKeyValue> cached_;  // per unit: the graph's K and V
  GraphRunner* runner_ = nullptr;
  std::vector<uint32_t> repeated_;
  int64_t length_ = 0;
  int64_t graph_seq_ = 0;
};

LayerGraph generation_graph(const Scenario& s, int64_t batch, int64_t seq, bool last_logits_only) {
  Scenario expanded = s;
  expanded.batch_size = batch;
  GraphBuilder builder(scenario_build_context(expanded, seq, /*training=*/false, /*grad_enabled=*/false));
  families::build_forward(builder, expanded.model);
  LayerGraph graph = builder.finish();
  drop_loss(graph);
  auto logits = graph.named_outputs.find("logits");
  if (last_logits_only && logits != graph.named_outputs.end() && seq > 1) {
    // logits_to_keep=1: lm_head runs on hidden_states[:, -1:, :] only.
    graph.tensors[logits->second].numel /= static_cast<uint64_t>(seq);
  }
  return graph;
}

int64_t dim_or(const ModelConfig& model, const char* name, int64_t fallback) {
  auto found = model.dims.find(name);
  return found == model.dims.end() ? fallback : found->second;
}

// `decode`: the decode step's graph; the cache is repeated per step only where its attention
// repeats its own k and v.
CacheShape cache_shape(const Scenario& s, int64_t sequences, const LayerGraph& decode) {
  const PrecisionRules rules = job_precision_rules(s);
  const DType cache_dtype = rules.autocast ? rules.low_dtype : rules.parameter_dtype;
  const int64_t heads = dim_or(s.model, "heads", 1);
  const int64_t kv_heads = dim_or(s.model, "kv_heads", heads);
  // An explicit head_dim (Qwen3, Gemma) need not be hidden / heads.
  const int64_t head_dim = dim_or(s.model, "head_dim", dim_or(s.model, "hidden", heads) / heads);
  CacheShape shape;
  shape.layers = decode.num_units;
  shape.bytes_per_token = static_cast<uint64_t>(sequences * kv_heads * head_dim) * dtype_bytes(cache_dtype);
  if (kv_heads != heads && graph_repeats_key_value(decode)) {
    shape.repeated_per_token = static_cast<uint64_t>(sequences * heads * head_dim) * dtype_bytes(cache_dtype);
  }
  return shape;
}

// One decode step per captured batch size (static cache: the graph writes the job's cache in
// place, and its shapes are fixed, so attention reads the whole max_cache_len).
CapturedGraphs capture_decode_graphs(const Scenario& s, const CudaGraphConfig& graphs, ModelState* model,
                                     ScheduleWriter* writer) {
  const GenerateConfig& config = s.job.job.generate;
  auto step = [&](int64_t batch) {
    LayerGraph decode = generation_graph(s, batch, 1, false);
    KvCacheHooks cache(cache_shape(s, batch, decode), config, writer);
    cache.set_length(config.max_cache_len);
    cache.attach(decode, 1, nullptr);
    ExecutionOrder order = compute_execution_order(decode);
    CheckpointPlan checkpoints = plan_checkpointing(decode, order, CheckpointConfig{});
    GraphRunner runner(decode, std::move(order), checkpoints, model, writer, {"logits"});
    model->hooks = &cache;
    runner.forward();
    model->hooks = nullptr;
    return runner.take_step_outputs();
  };
  auto inputs = [&](int64_t batch) { return allocate_static_inputs(generation_graph(s, batch, 1, false), *writer); };
  return capture_graphs(graphs, *writer, inputs, step, step);
}

// Events of the planned generation: about two per op of a planned decode step (its output's
// alloc and free; Llama-3-8B's decode writes 2,978 events for 1,581 ops), three per op of the
// prefill, the cache's updates (K and V of every layer, with repeat_kv's copies) and the loop's
// own tensors.
int64_t estimated_generation_events(const LayerGraph& prefill, const LayerGraph& decode, const CacheShape& shape,
                                    int64_t planned_steps) {
  const auto per_step = static_cast<int64_t>(decode.ops.size()) * 2 + shape.layers * 8 + 16;
  const int64_t decode_events = saturating_product(per_step, planned_steps);
  if (decode_events > kMaxPlannedEvents) return decode_events;  // saturated: adding could overflow
  return decode_events + static_cast<int64_t>(prefill.ops.size()) * 3 + static_cast<int64_t>(prefill.parameters.size()) * 2;
}

}  // namespace

PlannedTrace plan_generate_job(const Scenario& s, int64_t max_planned_decode_steps) {
  const GenerateConfig& config = s.job.job.generate;
  if (s.batch_size <= 0) throw InputError(SourceLocation{}, "batch_size", "batch_size must be positive");
  const int64_t prompt = config.prompt_len > 0 ? config.prompt_len : s.seq_len;
  const int64_t sequences = s.batch_size * (config.num_beams > 1 ? config.num_beams : config.num_return_sequences);
  LayerGraph prefill = generation_graph(s, sequences, prompt, !config.prefill_full_logits);
  LayerGraph decode = generation_graph(s, sequences, 1, false);

  const CacheShape shape = cache_shape(s, sequences, decode);
  const std::vector<int64_t> steps = planned_generation_steps(config.new_tokens, max_planned_decode_steps);
  const auto planned_steps = static_cast<int64_t>(steps.size());
  const int64_t events = estimated_generation_events(prefill, decode, shape, planned_steps);
  if (events > kMaxPlannedEvents) {
    // The decode steps are sampled, so only a huge graph (or a caller's budget) gets here.
    throw InputError(SourceLocation{s.source_path}, "job.new_tokens",
                     "the generation would hold about " + std::to_string(events) + " events (" +
                         std::to_string(planned_steps) + " planned steps of job.new_tokens " +
                         std::to_string(config.new_tokens) + ", decode steps of " + std::to_string(decode.ops.size()) +
                         " ops), over the limit of " + std::to_string(kMaxPlannedEvents) + ": lower 'job.new_tokens'");
  }

  PlannedTrace out;
  out.parameter_count = prefill.parameter_count();
  ScheduleWriter writer(&out);
  writer.reserve(static_cast<size_t>(events));
  writer.set_iteration(0);
  writer.begin_phase("setup");
  allocate_model(s, prefill, &writer, /*parameters=*/true);

  ModelState model;
  model.grad_slot.assign(prefill.parameters.size(), -1);
  model.gpu_workspaces = !s.device.is_cpu && s.device.cublas_workspace_bytes > 0 && s.device.cublas_workspaces > 0;
  model.workspace_bytes = s.device.cublas_workspace_bytes;
  model.workspace_count = s.device.cublas_workspaces > 0 ? 1 : 0;
  const std::vector<std::string> held = {"logits"};
  ExecutionOrder prefill_order = compute_execution_order(prefill);
  CheckpointPlan prefill_checkpoints = plan_checkpointing(prefill, prefill_order, CheckpointConfig{});
  ExecutionOrder decode_order = compute_execution_order(decode);
  CheckpointPlan decode_checkpoints = plan_checkpointing(decode, decode_order, CheckpointConfig{});
  KvCacheHooks cache(shape, config, &writer);
  GraphRunner prefill_runner(prefill, std::move(prefill_order), prefill_checkpoints, &model, &writer, held);
  GraphRunner decode_runner(decode, std::move(decode_order), decode_checkpoints, &model, &writer, held);

  const uint64_t vocab_fp32 = static_cast<uint64_t>(sequences * dim_or(s.model, "vocab", 1)) * 4;
  uint32_t input_ids = UINT32_MAX;
  uint32_t previous_logits = UINT32_MAX;
  uint32_t previous_tokens = UINT32_MAX;
  const CudaGraphConfig* decode_graphs = captured_graph_config(s, CapturedPhase::Decode);
  const bool decode_replays = decode_graphs && replayed_batch_size(*decode_graphs, sequences) > 0;
  GenerationShape timing;
  timing.sequences = sequences;
  timing.prompt = prompt;
  timing.new_tokens = config.new_tokens;
  timing.layers = shape.layers;
  timing.cache_bytes_per_token = shape.bytes_per_token;
  timing.repeated_bytes_per_token = shape.repeated_per_token;
  timing.dynamic_cache = config.cache == KvCacheKind::Dynamic;
  timing.max_cache_len = config.max_cache_len > 0 ? config.max_cache_len : prompt + config.new_tokens;
  timing.beam_reorder = config.num_beams > 1;
  timing.decode_replayed = decode_replays;
  out.step_time = estimate_generation_time(s, prefill, decode, timing);
  CapturedGraphs captured;
  for (int64_t step : steps) {
    const bool first = step == 0;
    const LayerGraph& graph = first ? prefill : decode;
    GraphRunner& runner = first ? prefill_runner : decode_runner;
    writer.set_iteration(static_cast<int32_t>(step));
    if (step == 1 && decode_graphs) {
      writer.set_slot_prefix("capture/");
      writer.begin_phase("capture/decode_graphs");
      captured = capture_decode_graphs(s, *decode_graphs, &model, &writer);
    }
    writer.set_slot_prefix("i" + std::to_string(step) + "/");
    writer.begin_phase(first ? "iter0/prefill" : "iter" + std::to_string(step) + "/decode");
    if (first) {
      if (config.cache == KvCacheKind::Static) cache.preallocate();
      input_ids = writer.alloc(writer.intern("input_ids"), static_cast<uint64_t>(sequences * prompt) * 8, TensorCategory::Input);
    }
    // The step's model inputs: the prompt (prefill) or the new tokens (decode), as the graph loads them.
    std::vector<uint32_t> step_inputs;
    if (!first) {
      for (TensorId input : graph.inputs) {
        step_inputs.push_back(writer.alloc(writer.intern(graph.names[graph.tensors[input].name]), graph.tensors[input].bytes(),
                                           TensorCategory::Input));
      }
    }
    std::vector<uint32_t> outputs;
    if (first || !decode_replays) {
      cache.set_length(prompt + step);
      cache.attach(graph, first ? prompt : 1, &runner);
      model.hooks = &cache;
      runner.forward();
      model.hooks = nullptr;
      std::vector<uint32_t> step_outputs = runner.take_step_outputs();
      outputs.insert(outputs.end(), step_outputs.begin(), step_outputs.end());
    }
    // next_token_logits = outputs.logits[:, -1, :].clone().float(); del outputs. The loop's
    // locals (next_token_logits, next_tokens) live until the next step rebinds them.
    const TensorDesc& logits = graph.tensors[graph.named_outputs.at("logits")];
    uint32_t next_logits = UINT32_MAX;
    if (logits.dtype == DType::Float32 || config.logits_fp32) {
      next_logits = writer.alloc(writer.intern("next_token_logits"), vocab_fp32, TensorCategory::Activation);
    } else {
      uint32_t clone = writer.alloc(writer.intern("next_token_logits.clone"), vocab_fp32 / 4 * dtype_bytes(logits.dtype),
                                    TensorCategory::Temporary);
      next_logits = writer.alloc(writer.intern("next_token_logits"), vocab_fp32, TensorCategory::Activation);
      writer.free(clone);
    }
    if (previous_logits != UINT32_MAX) writer.free(previous_logits);
    previous_logits = next_logits;
    for (uint32_t slot : outputs) writer.free(slot);
    for (uint32_t slot : step_inputs) writer.free(slot);
    uint32_t beam_scores = UINT32_MAX;
    if (config.num_beams > 1) {
      beam_scores = writer.alloc(writer.intern("beam_search.log_softmax"), vocab_fp32, TensorCategory::Temporary);
    }
    uint32_t tokens = writer.alloc(writer.intern("next_tokens"), static_cast<uint64_t>(sequences) * 8, TensorCategory::Activation);
    if (beam_scores != UINT32_MAX) writer.free(beam_scores);
    if (previous_tokens != UINT32_MAX) writer.free(previous_tokens);
    previous_tokens = tokens;
    // input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
    uint32_t grown = writer.alloc(writer.intern("input_ids"), static_cast<uint64_t>(sequences * (prompt + step + 1)) * 8,
                                  TensorCategory::Input);
    writer.free(input_ids);
    input_ids = grown;
    if (config.num_beams > 1) cache.reorder();
  }
  writer.begin_phase("end");
  release_captured_graphs(captured, writer);
  cache.release();
  writer.free(input_ids);
  if (previous_logits != UINT32_MAX) writer.free(previous_logits);
  if (previous_tokens != UINT32_MAX) writer.free(previous_tokens);
  return out;
}

}  // namespace oomcast::planner
