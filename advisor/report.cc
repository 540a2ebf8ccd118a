// Text and JSON renderings of a Prediction. Sizes in prose use GiB/MiB with two decimals; the
// phase table uses MiB like PyTorch memory trackers do; JSON carries exact bytes.
#include "advisor/report.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "advisor/byte_text.h"
#include "advisor/decode_sampling.h"
#include "advisor/auto_checkpointing.h"
#include "advisor/moe_routing.h"
#include "advisor/parallel_report.h"
#include "advisor/step_time_report.h"
#include "advisor/terminal_timeline.h"
#include "scenario/job_config_loader.h"
#include "scenario/model_families.h"
#include "scenario/scenario_loader.h"

namespace oomcast::advisor {

using planner::TensorCategory;
using planner::category_name;
using scenario::CheckpointMode;
using scenario::JobKind;
using scenario::JobSection;
using scenario::KvCacheKind;
using scenario::Scenario;
using scenario::TrainableConfig;
using scenario::UnitCheckpoint;
using scenario::attention_name;
using scenario::checkpoint_mode_name;
using scenario::optimizer_impl_name;
using scenario::optimizer_type_name;
using scenario::precision_name;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = kMiB * 1024.0;

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / kGiB); }
std::string mib(double bytes) { return fmt::format("{:.2f} MiB", bytes / kMiB); }

std::string where_text(const ScheduleLocation& where) {
  std::string text = fmt::format("iteration {}", where.iteration);
  if (!where.phase.empty()) text += ", phase " + where.phase;
  if (!where.op.empty()) text += ", op " + where.op;
  if (!where.tensor.empty()) text += ", tensor " + where.tensor;
  return text;
}

std::string with_thousands(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string result;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) result += ',';
    result += digits[i];
  }
  return result;
}

std::string header(const Prediction& prediction) {
  const Scenario& s = prediction.scenario;
  std::string text;
  text += fmt::format("scenario  {}\n", s.source_path);
  text += fmt::format("model     {} ({} family, {} parameters)\n", s.model.name, s.model.family,
                      with_thousands(prediction.parameters));
  bool has_attention = scenario::families::uses_attention_setting(s.model);
  text += fmt::format("batch     {} x {} {}, grad_accum {}, {}{}, dropout {}\n", s.batch_size,
                      scenario::families::is_vision(s.model) ? "image_size" : "seq_len", s.seq_len,
                      s.grad_accum_steps, precision_name(s.precision),
                      has_attention ? fmt::format(", {} attention", attention_name(s.attention)) : "", s.dropout);
  std::string checkpointing = checkpoint_mode_name(s.checkpointing.mode);
  if (s.checkpointing.mode == CheckpointMode::EveryN) checkpointing += fmt::format(" ({})", s.checkpointing.every_n);
  if (!s.checkpointing.save_ops.empty()) {
    checkpointing += fmt::format(" (save {}{})", fmt::join(s.checkpointing.save_ops, ", "),
                                 s.checkpointing.every_other_linear ? "; every other linear" : "");
  }
  if (s.checkpointing.mode != CheckpointMode::None) {
    checkpointing += s.checkpointing.reentrant ? ", reentrant" : ", non-reentrant";
  }
  if (s.checkpointing.mode == CheckpointMode::Auto) {
    checkpointing += fmt::format(" ({}; recompute {} per step)", auto_checkpointing_summary(s.checkpointing),
                                 seconds_text(prediction.step_time.recompute_seconds));
  }
  const JobSection& job = s.job.job;
  if (job.kind == JobKind::Generate) {
    // A generation job has no optimizer, zero_grad or iterations to show: its sizes instead.
    text += fmt::format("job       generate: {} new tokens after a {}-token prompt, {} sequence(s) x {} beam(s), {} KV cache\n",
                        job.generate.new_tokens, job.generate.prompt_len > 0 ? job.generate.prompt_len : s.seq_len,
                        job.generate.num_return_sequences, job.generate.num_beams,
                        job.generate.cache == KvCacheKind::Dynamic ? "torch.cat (dynamic)" : "static");
  } else if (job.kind != JobKind::Train) {
    text += fmt::format("job       {}: {} forward pass(es), {}\n", job.kind == JobKind::Inference ? "inference" : "forward",
                        job.batches > 0 ? job.batches : s.iterations,
                        job.kind == JobKind::Inference ? "no grad, no optimizer" : "grad enabled, no optimizer");
  } else {
    // The fine-tuning techniques that change what is planned (docs/scenario-format.md).
    std::string techniques;
    const TrainableConfig& trained = s.job.training;
    if (trained.lora.enabled) {
      techniques += fmt::format(", LoRA r={} ({} adapters)", trained.lora.r,
                                trained.lora.autocast_adapter_dtype ? "fp32" : "base-dtype");
    }
    if (trained.ia3.enabled) techniques += ", IA3";
    const scenario::WeightsConfig& weights = s.job.weights;
    if (weights.quantized()) {
      // How the quantized base is made during setup (planner/quantized_loading.h).
      techniques += fmt::format(", {} base ({}{})", scenario::weight_format_name(weights.format),
                                weights.library == scenario::QuantLibrary::Torchao ? "torchao, to_nf4 on the device"
                                                                                   : "bitsandbytes, quantized on the device",
                                trained.prepare_kbit ? "; other parameters fp32" : "");
    }
    if (s.optimizer.type == scenario::OptimizerType::AnyPrecisionAdamW && s.optimizer.kahan_summation) {
      techniques += ", Kahan summation";
    }
    if (s.loss.chunks > 1) techniques += fmt::format(", loss in {} chunks", s.loss.chunks);
    if (s.activation_offloading.enabled) {
      techniques += fmt::format(", activations offloaded ({}, {:.1f} MiB host {})",
                                s.activation_offloading.method == scenario::OffloadMethod::Torchtune ? "torchtune" : "save_on_cpu",
                                static_cast<double>(prediction.activation_offload_host_bytes) / (1024.0 * 1024.0),
                                s.activation_offloading.pin_memory ? "pinned" : "pageable");
    }
    text += fmt::format("training  {} ({}{}), checkpointing {}, zero_grad {}, {} iterations{}{}\n",
                        optimizer_type_name(s.optimizer.type), optimizer_impl_name(s.optimizer.impl),
                        s.optimizer.in_backward ? ", stepped in backward" : "", checkpointing,
                        s.loop.zero_grad_set_to_none ? "set_to_none" : "zero", s.iterations,
                        s.eval.enabled ? fmt::format(", eval {} batch(es){}", s.eval.batches,
                                                     s.eval.no_grad ? "" : " with grad")
                                       : "",
                        techniques);
  }
  if (s.device.is_cpu) {
    text += "device    cpu: exact accounting (every block is its request; no cache, no CUDA context)\n";
  } else {
    text += fmt::format("device    {}: {} total, {} CUDA context, {} usable{}\n", s.device.display_name,
                        gib(static_cast<double>(prediction.device_total_bytes)),
                        mib(static_cast<double>(s.device.model.context_bytes)),
                        gib(static_cast<double>(prediction.usable_bytes)),
                        s.allocator.source_text.empty() ? "" : "; PYTORCH_CUDA_ALLOC_CONF=" + s.allocator.source_text);
    text += fmt::format("context   CUDA {}.{}, {} module loading: {}\n", s.device.cuda_version / 100,
                        s.device.cuda_version % 100, s.device.module_loading, s.device.context_source);
  }
  return text;
}

// nvidia-smi's figure for this process: what the allocator reserved plus what the process
// holds outside it (the CUDA context, NCCL's buffers).
sim::Bytes predicted_device_used(const Prediction& prediction, sim::Bytes reserved) {
  return reserved + prediction.scenario.device.model.context_bytes;
}

std::string device_used_line(const Prediction& prediction) {
  const Scenario& s = prediction.scenario;
  if (s.device.is_cpu) return "";
  sim::Bytes nccl = s.parallel.nccl_buffer_bytes;
  // A job that does not fit never shows this figure: it is what the job would need, more than the card.
  return fmt::format("{}: {} at the peak = reserved {} + CUDA context {}{}\n",
                     prediction.fits ? "nvidia-smi (this process, predicted)"
                                     : "would need (this process, predicted; more than the device has)",
                     gib(static_cast<double>(predicted_device_used(prediction, prediction.peak_reserved_bytes))),
                     gib(static_cast<double>(prediction.peak_reserved_bytes)),
                     mib(static_cast<double>(s.device.cuda_context_bytes)),
                     nccl > 0 ? " + NCCL buffers " + mib(static_cast<double>(nccl)) : "");
}

// A long run (a generation's hundreds of decode steps) would print hundreds of rows: the table
// keeps its head, its tail and the phases of the highest peaks, and says how many it left out.
constexpr size_t kMaxTableRows = 40;
constexpr size_t kHeadRows = 16;
constexpr size_t kTailRows = 8;

std::vector<bool> shown_phases(const std::vector<PhaseRow>& phases, size_t listed) {
  std::vector<bool> shown(listed, listed <= kMaxTableRows);
  if (listed <= kMaxTableRows) return shown;
  for (size_t i = 0; i < kHeadRows; ++i) shown[i] = true;
  for (size_t i = listed - kTailRows; i < listed; ++i) shown[i] = true;
  size_t highest_allocated = 0, highest_reserved = 0;
  for (size_t i = 0; i < listed; ++i) {
    if (phases[i].peak_allocated_bytes > phases[highest_allocated].peak_allocated_bytes) highest_allocated = i;
    if (phases[i].reserved_bytes > phases[highest_reserved].reserved_bytes) highest_reserved = i;
  }
  shown[highest_allocated] = shown[highest_reserved] = true;
  return shown;
}

std::string phase_table(const Prediction& prediction) {
  if (prediction.phases.empty()) return "";
  size_t width = 10;
  for (const auto& row : prediction.phases) width = std::max(width, std::min<size_t>(row.name.size(), 48));
  std::string text = fmt::format("{:<{}}  {:>14}  {:>10}  {:>13}  {:>10}\n", "checkpoint", width,
                                 "allocated MiB", "delta", "reserved MiB", "peak MiB");
  const SteadyStateNote& steady = prediction.steady_state;
  // Extrapolated rows repeat the steady iteration's: one line stands for them.
  size_t listed = prediction.phases.size();
  for (size_t i = 0; i < prediction.phases.size(); ++i) {
    const PhaseRow& row = prediction.phases[i];
    if (steady.extrapolated && row.iteration >= steady.planned_iterations && row.name.rfind("iter", 0) == 0) {
      listed = i;
      break;
    }
  }
  const std::vector<bool> shown = shown_phases(prediction.phases, listed);
  size_t skipped = 0;
  for (size_t i = 0; i < listed; ++i) {
    if (!shown[i]) {
      ++skipped;
      continue;
    }
    if (skipped > 0) text += fmt::format("... {} phases not shown (--json lists every phase)\n", skipped);
    skipped = 0;
    const PhaseRow& row = prediction.phases[i];
    double allocated = static_cast<double>(row.allocated_bytes) / kMiB;
    double previous = i == 0 ? 0.0 : static_cast<double>(prediction.phases[i - 1].allocated_bytes) / kMiB;
    text += fmt::format("{:<{}}  {:>14.1f}  {:>+10.1f}  {:>13.1f}  {:>10.1f}\n", row.name, width, allocated,
                        allocated - previous, static_cast<double>(row.reserved_bytes) / kMiB,
                        static_cast<double>(row.peak_allocated_bytes) / kMiB);
  }
  if (listed < prediction.phases.size()) {
    text += fmt::format("iter{}..iter{}: each repeats the iteration {} before it {} (steady state; extrapolated)\n",
                        steady.planned_iterations, steady.iterations - 1, steady.period,
                        steady.exact ? "exactly" : "approximately");
  }
  return text;
}

std::string breakdown_text(const Prediction& prediction) {
  std::vector<std::pair<std::string, sim::Bytes>> rows;
  for (size_t i = 0; i < kNumTensorCategories; ++i) {
    if (prediction.breakdown[i] > 0) {
      rows.emplace_back(category_name(static_cast<TensorCategory>(i)), prediction.breakdown[i]);
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (prediction.rounding_bytes > 0) rows.emplace_back("allocator rounding", prediction.rounding_bytes);
  std::string text = "breakdown at the peak:\n";
  double total = std::max<double>(1.0, static_cast<double>(prediction.peak_allocated_bytes));
  for (const auto& [name, bytes] : rows) {
    text += fmt::format("  {:<20} {:>12}  {:>5.1f}%\n", name, byte_text(static_cast<double>(bytes)),
                        100.0 * static_cast<double>(bytes) / total);
  }
  return text;
}

}  // namespace

std::string verdict_line(const Prediction& prediction) {
  const Scenario& s = prediction.scenario;
  double peak_reserved = static_cast<double>(prediction.peak_reserved_bytes);
  double usable = static_cast<double>(prediction.usable_bytes);
  if (!prediction.fits) {
    return fmt::format("OOM: the step needs {} {} but {} is usable on {}; the first failed allocation is at {}",
                       gib(peak_reserved), prediction.exact_accounting ? "of live tensors" : "reserved", gib(usable),
                       s.device.display_name, where_text(prediction.oom_at));
  }
  if (s.device.is_cpu && prediction.usable_bytes >= (1ull << 59)) {
    return fmt::format("fits (cpu, no capacity set): peak {} of live tensors", byte_text(peak_reserved));
  }
  return fmt::format("fits with {} to spare (peak reserved {} of {} usable on {})",
                     gib(static_cast<double>(prediction.spare_bytes())), gib(peak_reserved), gib(usable),
                     s.device.display_name);
}

std::string render_text(const Prediction& prediction) {
  std::string text = header(prediction) + parallel_text(prediction);
  text += "\n" + verdict_line(prediction) + "\n" + device_used_line(prediction) + step_time_text(prediction);
  text += moe_routing_text(prediction);
  if (prediction.steady_state.extrapolated && !prediction.steady_state.exact) {
    const SteadyStateNote& steady = prediction.steady_state;
    text += fmt::format("steady state (approximate): after {} planned iterations the schedule repeats and no tensor "
                        "accumulates, but the allocator's layout has not settled exactly (blocks still shift within "
                        "their segments); iterations {}-{} are taken to repeat iteration {}, not replayed\n",
                        steady.planned_iterations, steady.planned_iterations, steady.iterations - 1,
                        steady.from_iteration);
  } else if (prediction.steady_state.extrapolated) {
    const SteadyStateNote& steady = prediction.steady_state;
    text += fmt::format("steady state: iteration {} left the allocator exactly as iteration {} did, with the same "
                        "schedule{}; planned and replayed {} of {} iterations, the rest extrapolated\n",
                        steady.from_iteration, steady.from_iteration - steady.period,
                        steady.period == 1 ? "" : fmt::format(" (a cycle of {} iterations)", steady.period),
                        steady.planned_iterations, steady.iterations);
  }
  if (const DecodeSampling decode = decode_sampling_of(prediction); decode.sampled()) {
    text += fmt::format("decode steps: planned {} of {} (the first and last {} each, one in {} between), the cache "
                        "grown by the ones skipped: each decode step repeats the one before it with one more token\n",
                        decode.planned, decode.total, decode.dense, decode.stride);
  }
  text += "\n";
  text += phase_table(prediction);
  if (std::string timeline = terminal_timeline(prediction); !timeline.empty()) text += "\n" + timeline;
  text += fmt::format("\npeak: {} allocated at {}\n", byte_text(static_cast<double>(prediction.peak_allocated_bytes)),
                      where_text(prediction.peak_at));
  text += breakdown_text(prediction);
  if (!prediction.exact_accounting) {
    text += fmt::format("fragmentation at the peak: reserved - allocated = {} (free pieces of split blocks: {}); "
                        "peak reserved {}\n",
                        byte_text(static_cast<double>(prediction.fragmentation_bytes())),
                        byte_text(static_cast<double>(prediction.inactive_split_at_peak_bytes)),
                        byte_text(static_cast<double>(prediction.peak_reserved_bytes)));
  }
  if (!prediction.fits) {
    const char* type = prediction.exact_accounting ? "RuntimeError" : "torch.OutOfMemoryError";
    text += fmt::format("\nPyTorch would raise, at {}:\n{}: {}\n", where_text(prediction.oom_at), type,
                        prediction.oom_message);
  }
  return text;
}

std::string render_json(const Prediction& prediction) {
  using Json = nlohmann::ordered_json;
  const Scenario& s = prediction.scenario;
  auto location = [](const ScheduleLocation& where) {
    return Json{{"iteration", where.iteration}, {"phase", where.phase}, {"op", where.op},
                {"tensor", where.tensor}, {"category", category_name(where.category)},
                {"event_index", where.event_index}};
  };
  Json json;
  json["scenario"] = s.source_path;
  json["model"] = s.model.name;
  json["device"] = s.device.profile;
  json["parameters"] = prediction.parameters;
  json["device_total_bytes"] = prediction.device_total_bytes;
  json["usable_bytes"] = prediction.usable_bytes;
  json["peak_allocated_bytes"] = prediction.peak_allocated_bytes;
  json["peak_reserved_bytes"] = prediction.peak_reserved_bytes;
  json["fits"] = prediction.fits;
  json["spare_bytes"] = prediction.spare_bytes();
  json["oom_message"] = prediction.fits ? Json(nullptr) : Json(prediction.oom_message);
  json["oom_at"] = prediction.fits ? Json(nullptr) : location(prediction.oom_at);
  json["peak_at"] = location(prediction.peak_at);
  Json phases = Json::array();
  for (const auto& row : prediction.phases) {
    phases.push_back(Json{{"name", row.name},
                          {"iteration", row.iteration},
                          {"allocated_bytes", row.allocated_bytes},
                          {"reserved_bytes", row.reserved_bytes},
                          {"peak_allocated_bytes", row.peak_allocated_bytes},
                          {"peak_reserved_bytes", row.peak_reserved_bytes}});
    if (!s.device.is_cpu) {
      phases.back()["device_used_bytes"] = predicted_device_used(prediction, row.reserved_bytes);
      phases.back()["peak_device_used_bytes"] = predicted_device_used(prediction, row.peak_reserved_bytes);
    }
  }
  json["phases"] = std::move(phases);
  Json breakdown = Json::object();
  for (size_t i = 0; i < kNumTensorCategories; ++i) {
    breakdown[category_name(static_cast<TensorCategory>(i))] = prediction.breakdown[i];
  }
  breakdown["allocator_rounding"] = prediction.rounding_bytes;
  json["breakdown"] = std::move(breakdown);
  json["fragmentation"] = Json{{"reserved_minus_allocated_bytes", prediction.fragmentation_bytes()},
                               {"inactive_split_bytes", prediction.inactive_split_at_peak_bytes}};
  json["events"] = prediction.events;
  // activation_offloading: host memory of one forward's offloaded tensors (null when off).
  json["activation_offload_host_bytes"] =
      s.activation_offloading.enabled ? Json(prediction.activation_offload_host_bytes) : Json(nullptr);
  Json stats = Json::object();
  for (const auto& [key, value] : prediction.memory_stats) stats[key] = value;
  json["memory_stats"] = prediction.exact_accounting ? Json(nullptr) : stats;
  const SteadyStateNote& steady = prediction.steady_state;
  json["steady_state"] = steady.extrapolated ? Json{{"from_iteration", steady.from_iteration},
                                                    {"period", steady.period},
                                                    {"exact", steady.exact},
                                                    {"planned_iterations", steady.planned_iterations},
                                                    {"iterations", steady.iterations}}
                                             : Json(nullptr);
  const DecodeSampling decode = decode_sampling_of(prediction);
  json["decode_steps"] = decode.total > 0 ? Json{{"total", decode.total},
                                                 {"planned", decode.planned},
                                                 {"stride", decode.stride}}
                                          : Json(nullptr);
  json["accounting"] = prediction.exact_accounting ? "exact_live_bytes" : "cuda_caching_allocator";
  if (s.device.is_cpu) {
    json["predicted_device_used_bytes"] = nullptr;
  } else {
    json["predicted_device_used_bytes"] = predicted_device_used(prediction, prediction.peak_reserved_bytes);
    json["outside_allocator"] = Json{{"cuda_context_bytes", s.device.cuda_context_bytes},
                                     {"context_source", s.device.context_source},
                                     {"cuda_version", fmt::format("{}.{}", s.device.cuda_version / 100,
                                                                  s.device.cuda_version % 100)},
                                     {"module_loading", s.device.module_loading},
                                     {"nccl_buffer_bytes", s.parallel.nccl_buffer_bytes},
                                     {"cublas_workspace_bytes", s.device.cublas_workspace_bytes},
                                     {"other_process_bytes", s.device.model.other_process_bytes}};
  }
  add_parallel_json(prediction, json);
  add_moe_routing_json(prediction, json);
  add_step_time_json(prediction, json);
  if (s.checkpointing.mode == CheckpointMode::Auto) {
    Json units = Json::array();
    for (const UnitCheckpoint& unit : s.checkpointing.units) units.push_back(unit.on ? unit.choice : "none");
    json["checkpointing_auto"] = Json{{"summary", auto_checkpointing_summary(s.checkpointing)},
                                      {"margin_fraction", s.checkpointing.margin_fraction},
                                      {"units", std::move(units)},
                                      {"recompute_seconds", prediction.step_time.recompute_seconds}};
  }
  return json.dump(2) + "\n";
}

}  // namespace oomcast::advisor
