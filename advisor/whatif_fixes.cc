// The doctor's candidate fixes. Each is a set of --set overrides applied to the scenario as
// the user wrote it (so the loader's rules decide what is allowed) and simulated; allocator
// fixes replay the scenario's own plan, as the schedule does not depend on the allocator.
#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "base/input_error.h"
#include "planner/families/families.h"
#include "scenario/scenario_loader.h"
#include "planner/jobs/training_job.h"
#include "advisor/whatif.h"

namespace oomcast::advisor {

using planner::PlannedTrace;
using scenario::AttentionImpl;
using scenario::CheckpointMode;
using scenario::FsdpSharding;
using scenario::GenerateConfig;
using scenario::JobKind;
using scenario::KvCacheKind;
using scenario::MeshConfig;
using scenario::ModelConfig;
using scenario::OffloadDevice;
using scenario::OptimizerType;
using scenario::ParallelConfig;
using scenario::ParallelEngine;
using scenario::Precision;
using scenario::Scenario;
using scenario::ScenarioSource;
using scenario::ZeroConfig;

namespace {

struct Candidate {
  FixOutcome outcome;
  std::string group;            // candidates of one group compete; the best is kept
  bool allocator_only = false;  // replays the baseline plan
  int64_t micro_batch = 0;      // micro_batch candidates: the micro-batch size
};

bool has_attention(const ModelConfig& model) { return model.family != "resnet" && model.family != "mlp"; }
bool has_blocks(const ModelConfig& model) { return model.family != "mlp"; }
bool supports_bf16(const Scenario& s) { return s.device.is_cpu || s.device.compute_capability >= 80; }

Candidate make(std::string id, std::string title, std::vector<std::string> overrides, std::string cost,
               std::string group = "") {
  Candidate c;
  c.outcome.id = std::move(id);
  c.outcome.title = std::move(title);
  c.outcome.overrides = std::move(overrides);
  c.outcome.cost = std::move(cost);
  c.group = group.empty() ? c.outcome.id : std::move(group);
  return c;
}

// Full fine-tuning that does not fit: train LoRA adapters instead (the base model frozen), and
// QLoRA (the frozen base in NF4). These change what trains, so they are offered only for a
// single-GPU training job that trains every parameter of a transformer.
void append_adapter_fixes(const Scenario& s, std::vector<Candidate>* list) {
  if (s.job.job.kind != JobKind::Train || s.job.training.any_frozen() || s.parallel.enabled() || s.device.is_cpu) return;
  if (!has_attention(s.model)) return;
  const std::string targets = s.model.family == "llama" ? "[q_proj, v_proj]" : s.model.family == "gpt2" ? "[c_attn]" : "[all-linear]";
  const std::string lora = "training.trainable={lora: {r: 16, alpha: 32, dropout: 0.05, target_modules: " + targets + "}}";
  list->push_back(make("lora", "LoRA adapters r=16 on " + targets + ", base model frozen (training.trainable: {lora: ...})",
                       {lora}, "trains adapters only: a different fine-tuning method (usually close in quality)", "adapters"));
  list->back().outcome.changes_goal = true;
  const std::string compute = supports_bf16(s) ? "bf16" : "fp16";
  list->push_back(make("qlora", "QLoRA: LoRA r=16 on all linears with the frozen base in NF4 (weights: nf4)",
                       {"training.trainable={lora: {r: 16, alpha: 32, dropout: 0.05, target_modules: [all-linear]}}",
                        "weights={format: nf4, compute_dtype: " + compute + "}"},
                       "trains adapters only on a 4-bit base: bitsandbytes, slower matmuls (dequantization)", "adapters"));
  list->back().outcome.changes_goal = true;
}

// A full fine-tune keeps training every parameter: bf16 parameters, grads and optimizer
// states without fp32 master copies (Lightning's bf16-true, torchtune's recipes), and on one
// GPU ZeRO-Offload (DeepSpeed ZeRO-2 with the optimizer on the CPU, the setting of the
// ZeRO-Offload paper). More GPUs with FSDP2 or ZeRO-3 are the recommendation's own trials.
void append_full_fine_tune_fixes(const Scenario& s, std::vector<Candidate>* list) {
  if (s.job.job.kind != JobKind::Train || s.job.training.any_frozen() || s.device.is_cpu) return;
  const bool deepspeed = s.parallel.engine == ParallelEngine::DeepSpeed;
  if (supports_bf16(s) && !deepspeed && (s.precision != Precision::PureBf16 || s.job.training.master_weights)) {
    list->push_back(make("pure_bf16", "bf16 parameters, gradients and optimizer states, no fp32 master copies "
                                      "(precision: pure_bf16, training.master_weights: false)",
                         {"precision=pure_bf16", "training.master_weights=false"},
                         "bf16 optimizer updates lose small steps (Kahan summation or stochastic rounding helps)"));
  }
  if (!s.parallel.enabled()) {
    // DeepSpeed runs mixed precision as bf16 parameters with fp32 masters, not autocast.
    const bool autocast = s.precision == Precision::AmpBf16 || s.precision == Precision::AmpFp16;
    std::vector<std::string> overrides = {
        std::string("parallel={world_size: 1, deepspeed: {") + (autocast ? "bf16: {enabled: true}, " : "") +
        "zero_optimization: {stage: 2, offload_optimizer: {device: cpu}}}}"};
    if (autocast) overrides.insert(overrides.begin(), "precision=pure_bf16");
    list->push_back(make("cpu_offload", "ZeRO-Offload on this GPU: DeepSpeed ZeRO-2 with the optimizer on the CPU",
                         overrides,
                         "the optimizer step runs on the CPU and states cross PCIe every step; host RAM for fp32 "
                         "masters and moments"));
  }
}

// A generate job's own fixes: what model.generate() offers without changing its output.
void append_generation_fixes(const Scenario& s, std::vector<Candidate>* list) {
  if (s.job.job.kind != JobKind::Generate) return;
  const GenerateConfig& g = s.job.job.generate;
  if (g.prefill_full_logits) {
    list->push_back(make("prefill_logits_last",
                         "logits of the last prompt position only (job.prefill_logits: last; logits_to_keep=1)",
                         {"job.prefill_logits=last"}, "none: generate() reads only the last position"));
  }
  if (g.cache == KvCacheKind::Dynamic) {
    list->push_back(make("static_cache",
                         "a static KV cache allocated once (job.cache: static; cache_implementation=\"static\")",
                         {"job.cache=static"},
                         "the whole cache is held from the first step; attention reads all of it (slower early on)"));
  }
  // Fewer prompts per generate() call: the same sequences in more calls. Its step time is all
  // of them (job_step_seconds): `split` calls, each priced at the smaller batch.
  for (int64_t split = 2; split <= s.batch_size && s.batch_size % split == 0; split *= 2) {
    const int64_t batch = s.batch_size / split;
    list->push_back(make("smaller_batch",
                         fmt::format("{} prompt{} per generate() call, {} calls (batch_size: {})", batch,
                                     batch == 1 ? "" : "s", split, batch),
                         {fmt::format("batch_size={}", batch)},
                         fmt::format("{} calls for the {} prompts, each reading every weight once per token: lower "
                                     "decode throughput (step after: all {} calls)",
                                     split, s.batch_size, split),
                         "micro_batch"));
    list->back().micro_batch = batch;
  }
}

// A llama-family training job that already uses model parallelism: reorganise the same ranks
// (docs/distributed.md#model-parallel) at the same global batch, as Megatron-LM keeps
// global_batch_size fixed and derives the microbatch count. Raising TP or adding stages takes
// ranks from data parallelism, so each replica runs twice the microbatches (pipeline
// microbatches, or grad_accum_steps without a pipeline); more microbatches of half the size keep
// it too. The loader refuses what the model or the world cannot hold, and the step time prices
// the all-reduces and the bubble.
void append_mesh_fixes(const Scenario& s, std::vector<Candidate>* list) {
  const MeshConfig& mesh = s.parallel.mesh;
  if (s.job.job.kind != JobKind::Train || s.model.family != "llama" || !mesh.model_parallel()) return;
  auto fits_world = [&](int64_t tp, int64_t pp) {
    return s.parallel.world_size % (tp * pp * mesh.context_parallel * mesh.data_parallel_replicate) == 0;
  };
  const bool pipelined = mesh.pipeline_parallel > 1;
  const int64_t accumulated = pipelined ? mesh.microbatches() : s.grad_accum_steps;
  if (fits_world(2 * mesh.tensor_parallel, mesh.pipeline_parallel)) {
    list->push_back(make("raise_tensor_parallel",
                         fmt::format("tensor parallel {} (parallel.tensor_parallel), {} microbatches per replica",
                                     2 * mesh.tensor_parallel, 2 * accumulated),
                         {fmt::format("parallel.tensor_parallel={}", 2 * mesh.tensor_parallel),
                          pipelined ? fmt::format("parallel.pipeline_microbatches={}", 2 * accumulated)
                                    : fmt::format("grad_accum_steps={}", 2 * accumulated)},
                         "an all-reduce of each block's activations per matmul pair (exposed; keep TP inside a node)"));
  }
  const int64_t stages = mesh.pipeline_parallel * 2;
  if (fits_world(mesh.tensor_parallel, stages)) {
    // grad_accum_steps becomes the pipeline's microbatches (the loader refuses both at once).
    std::vector<std::string> overrides = {fmt::format("parallel.pipeline_parallel={}", stages),
                                          fmt::format("parallel.pipeline_microbatches={}", 2 * accumulated)};
    if (!pipelined && s.grad_accum_steps > 1) overrides.emplace_back("grad_accum_steps=1");
    list->push_back(make("add_pipeline_stages", fmt::format("{} pipeline stages (parallel.pipeline_parallel), {} microbatches",
                                                            stages, 2 * accumulated),
                         std::move(overrides), "the pipeline bubble: (stages - 1) / microbatches of the compute idles"));
  }
  if (pipelined && s.batch_size >= 2 && s.batch_size % 2 == 0) {
    list->push_back(make("more_microbatches", fmt::format("{} microbatches of {} (parallel.pipeline_microbatches)",
                                                          2 * mesh.microbatches(), s.batch_size / 2),
                         {fmt::format("parallel.pipeline_microbatches={}", 2 * mesh.microbatches()),
                          fmt::format("batch_size={}", s.batch_size / 2)},
                         "smaller matmuls; the bubble shrinks with more microbatches"));
  }
}

std::vector<Candidate> candidates_for(const Scenario& s) {
  std::vector<Candidate> list;
  // Backward, optimizer and accumulation fixes act only on a training step.
  const bool trains = s.job.job.kind == JobKind::Train;
  const char* half = supports_bf16(s) ? "amp_bf16" : "amp_fp16";
  if (s.precision == Precision::Fp32) {
    list.push_back(make("mixed_precision", fmt::format("mixed precision (precision: {})", half),
                        {std::string("precision=") + half},
                        std::string("none on tensor-core GPUs (usually faster)") +
                            (supports_bf16(s) ? "" : "; fp16 needs a GradScaler (bf16 is not supported here)")));
  }
  if (trains && has_blocks(s.model) && s.checkpointing.mode != CheckpointMode::Full) {
    list.push_back(make("checkpointing", "activation checkpointing of every block (checkpointing: full)",
                        {"checkpointing=full"}, "recomputes each block's forward in backward (~30% more compute)"));
  }
  if (trains && has_blocks(s.model) && s.checkpointing.mode != CheckpointMode::Auto) {
    list.push_back(make("checkpointing_auto", "checkpointing chosen per block to fit (checkpointing: auto)",
                        {"checkpointing=auto"},
                        "recomputes only the blocks and ops a knapsack picks to fit (docs/step-time.md)"));
  }
  if (has_attention(s.model) && s.attention != AttentionImpl::Flash) {
    if (!s.device.is_cpu && s.device.compute_capability >= 80) {
      std::vector<std::string> overrides = {"attention=flash"};
      std::string title = "flash attention (attention: flash)";
      if (s.precision == Precision::Fp32) {
        overrides.insert(overrides.begin(), "precision=amp_bf16");
        title = "flash attention with bf16 autocast, which flash needs";
      }
      list.push_back(make("flash_attention", title, overrides, "none (usually faster)"));
    } else if (s.attention == AttentionImpl::Eager || s.attention == AttentionImpl::SdpaMath) {
      list.push_back(make("flash_attention", "memory-efficient SDPA attention (flash needs sm_80)",
                          {"attention=mem_efficient"}, "none (usually faster)"));
    }
  }
  for (int64_t split = 2; trains && split <= s.batch_size && s.batch_size % split == 0; split *= 2) {
    int64_t micro = s.batch_size / split;
    list.push_back(make("micro_batch",
                        fmt::format("micro-batch {} x {} accumulation steps (same effective batch {})", micro,
                                    s.grad_accum_steps * split, s.batch_size * s.grad_accum_steps),
                        {fmt::format("batch_size={}", micro), fmt::format("grad_accum_steps={}", s.grad_accum_steps * split)},
                        fmt::format("{}x more, smaller kernel launches per step (lower GPU utilisation)", split)));
    list.back().micro_batch = micro;
  }
  if (trains && (s.optimizer.type == OptimizerType::Adam || s.optimizer.type == OptimizerType::AdamW)) {
    list.push_back(make("adamw8bit", "8-bit AdamW (bitsandbytes; optimizer: adamw8bit)", {"optimizer=adamw8bit"},
                        "bitsandbytes dependency; close to AdamW in quality for most fine-tuning"));
    list.push_back(make("adafactor", "Adafactor (factored second moments; optimizer: adafactor)",
                        {"optimizer=adafactor"}, "different optimizer: may need retuned learning rates"));
  }
  if (!s.device.is_cpu) {
    if (!s.allocator.expandable_segments) {
      Candidate c = make("expandable_segments", "expandable segments (allocator.expandable_segments: true)",
                         {"allocator.expandable_segments=true"}, "none measurable");
      c.allocator_only = true;
      list.push_back(c);
    }
    if (s.allocator.max_split_size == sim::AllocatorConfig::kUnlimited) {
      for (int mib : {64, 128, 256, 512}) {
        Candidate c = make("max_split_size_mb", fmt::format("max_split_size_mb: {}", mib),
                           {fmt::format("allocator.max_split_size_mb={}", mib)}, "none measurable", "max_split_size_mb");
        c.allocator_only = true;
        list.push_back(c);
      }
    }
  }
  if (s.eval.enabled && !s.eval.no_grad) {
    list.push_back(make("eval_no_grad", "evaluation under torch.no_grad() (eval.no_grad: true)", {"eval.no_grad=true"},
                        "none"));
    list.back().outcome.leak_cause = s.eval.accumulate_loss_without_item;  // the summed losses keep their graphs
  }
  // The loop's own leaks (../shared/docs/training-memory-model.md §10): a loss kept as a
  // tensor keeps its graph's saved tensors (or, under no_grad, itself) alive.
  if (s.job.job.kind == JobKind::Train && s.loop.keep_losses_across_iterations) {
    list.push_back(make("loss_item", "log the training loss as loss.item(), not the tensor (training_loop.keep_losses_across_iterations: false)",
                        {"training_loop.keep_losses_across_iterations=false"}, "none (one host sync per logged step)"));
    list.back().outcome.leak_cause = true;
  }
  if (s.eval.enabled && s.eval.accumulate_loss_without_item) {
    list.push_back(make("eval_loss_item", "sum evaluation losses as loss.item() (eval.accumulate_loss_without_item: false)",
                        {"eval.accumulate_loss_without_item=false"}, "none (one host sync per evaluation batch)"));
    list.back().outcome.leak_cause = true;
  }
  append_generation_fixes(s, &list);      // prefill logits, static cache, fewer prompts per call (above)
  append_full_fine_tune_fixes(s, &list);  // pure bf16, ZeRO-Offload (above)
  append_adapter_fixes(s, &list);         // LoRA / QLoRA (above)
  append_mesh_fixes(s, &list);     // TP, PP stages, microbatches (above)
  // ---- ZeRO / offload (issue 5's parallel: section) --------------------------------------
  // Only for jobs that already run data-parallel: a single-GPU job has nothing to shard.
  const ParallelConfig& parallel = s.parallel;
  if (parallel.engine == ParallelEngine::DeepSpeed && parallel.deepspeed.config_file.empty()) {
    const ZeroConfig& zero = parallel.deepspeed.zero_optimization;
    if (zero.stage < 3) {
      list.push_back(make("zero_stage", fmt::format("DeepSpeed ZeRO stage {}", zero.stage + 1),
                          {fmt::format("parallel.deepspeed.zero_optimization.stage={}", zero.stage + 1)},
                          "more collective traffic per step (stage 3 gathers parameters every forward and backward)"));
    }
    if (zero.stage >= 1 && zero.offload_optimizer.device == OffloadDevice::None) {
      list.push_back(make("offload_optimizer", "DeepSpeed optimizer offload to CPU",
                          {"parallel.deepspeed.zero_optimization.offload_optimizer.device=cpu"},
                          "the optimizer step runs on the CPU and states cross PCIe every step (see `oomcast plan`'s "
                          "offload estimate)"));
    }
  } else if (parallel.engine == ParallelEngine::Fsdp) {
    if (parallel.fsdp.sharding_strategy != FsdpSharding::FullShard) {
      list.push_back(make("zero_stage", "FSDP FULL_SHARD (ZeRO-3-like)", {"parallel.fsdp.sharding_strategy=FULL_SHARD"},
                          "parameters are all-gathered in forward and again in backward"));
    }
    if (!parallel.fsdp.cpu_offload) {
      list.push_back(make("offload_optimizer", "FSDP CPU offload", {"parallel.fsdp.cpu_offload=true"},
                          "shards and the optimizer step on the host: PCIe traffic every step"));
    }
  }
  return list;
}

void simulate(const ScenarioSource& source, const Scenario& original, const PlannedTrace& baseline_plan, Candidate& c) {
  FixOutcome& out = c.outcome;
  try {
    Scenario changed = source.load(out.overrides);
    Prediction p = c.allocator_only ? predict_planned(changed, baseline_plan) : predict(changed);
    out.peak_reserved_after = p.peak_reserved_bytes;
    out.peak_allocated_after = p.peak_allocated_bytes;
    out.fits_after = p.fits;
    out.step_seconds_after = job_step_seconds(original, changed, p.step_time.step_seconds);
    if (c.allocator_only) out.alloc_conf = changed.allocator.source_text;
  } catch (const InputError& error) {
    out.valid = false;
    out.error = error.what();
  }
}

// The better of two candidates of one group: one that fits beats one that does not; among
// micro-batch splits that fit, the largest micro-batch (fewest extra steps) wins, and plain
// LoRA beats QLoRA when both fit; otherwise
// the lower peak.
bool better(const Candidate& a, const Candidate& b) {
  if (a.outcome.valid != b.outcome.valid) return a.outcome.valid;
  if (a.outcome.fits_after != b.outcome.fits_after) return a.outcome.fits_after;
  if (a.group == "micro_batch" && a.outcome.fits_after) return a.micro_batch > b.micro_batch;
  if (a.group == "adapters" && a.outcome.fits_after) return a.outcome.id == "lora";  // no quantization when LoRA fits
  return a.outcome.peak_reserved_after < b.outcome.peak_reserved_after;
}

}  // namespace

double job_step_seconds(const Scenario& original, const Scenario& changed, double step_seconds) {
  if (original.job.job.kind != JobKind::Generate || changed.batch_size >= original.batch_size) return step_seconds;
  const int64_t calls = (original.batch_size + changed.batch_size - 1) / changed.batch_size;
  return step_seconds * static_cast<double>(calls);
}

std::vector<FixOutcome> simulate_fixes(const ScenarioSource& source, const Scenario& scenario,
                                       const Prediction& baseline, const PlannedTrace& baseline_plan, size_t jobs) {
  std::vector<Candidate> candidates = candidates_for(scenario);
  // The micro-batch splits (largest micro-batch first) and the adapters (LoRA, then QLoRA)
  // are each one chain: the first that fits wins its group whatever the rest would give
  // (better() below), so a chain stops there; the rest are left unsimulated and never shown.
  // The longest schedules (the most accumulation steps) are the ones a chain skips.
  std::vector<std::vector<size_t>> work;
  std::map<std::string, size_t> chain_of_group;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& group = candidates[i].group;
    if (group == "micro_batch" || group == "adapters") {
      auto [found, inserted] = chain_of_group.emplace(group, work.size());
      if (inserted) work.emplace_back();
      work[found->second].push_back(i);
    } else {
      work.push_back({i});
    }
  }
  std::vector<uint8_t> simulated(candidates.size(), 0);
  run_indexed(work.size(), jobs, [&](size_t w) {
    for (size_t i : work[w]) {
      simulate(source, scenario, baseline_plan, candidates[i]);
      simulated[i] = 1;
      if (candidates[i].outcome.fits_after) break;
    }
  });
  std::vector<Candidate> kept;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (simulated[i]) kept.push_back(std::move(candidates[i]));
  }
  candidates = std::move(kept);
  std::map<std::string, Candidate> best;
  std::vector<std::string> order;
  for (auto& c : candidates) {
    c.outcome.peak_reserved_before = baseline.peak_reserved_bytes;
    c.outcome.peak_allocated_before = baseline.peak_allocated_bytes;
    c.outcome.step_seconds_before = baseline.step_time.step_seconds;
    c.outcome.group = c.group;
    auto found = best.find(c.group);
    if (found == best.end()) {
      order.push_back(c.group);
      best.emplace(c.group, c);
    } else if (better(c, found->second)) {
      found->second = c;
    }
  }
  std::vector<FixOutcome> fixes;
  for (const auto& group : order) fixes.push_back(best.at(group).outcome);
  return fixes;
}

}  // namespace oomcast::advisor
