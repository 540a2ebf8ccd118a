// Renders the step-time model's answer (planner/timing/step_time.h) next to memory in `plan`.
#include "advisor/step_time_report.h"

#include <fmt/format.h>

namespace oomcast::advisor {

using planner::StepTime;

std::string seconds_text(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.2f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.1f} ms", seconds * 1e3);
  return fmt::format("{:.0f} µs", seconds * 1e6);
}

namespace {

// generate(): the whole call, its prefill, and the decode steps per token.
std::string generation_text(const StepTime& t) {
  std::string text = fmt::format("generation time {} for {:.0f} new tokens ({} sequence{}): {:.0f} tokens/s overall (estimate; docs/step-time.md)\n",
                                 seconds_text(t.step_seconds), t.tokens_per_step, t.sequences, t.sequences == 1 ? "" : "s",
                                 t.tokens_per_second());
  text += fmt::format("  prefill {}, decode {} per step ({} steps): {:.1f} tokens/s per sequence, {:.0f} tokens/s for the {}\n",
                      seconds_text(t.prefill_seconds), seconds_text(t.decode_seconds_per_step()), t.decode_steps,
                      t.decode_seconds_per_step() > 0.0 ? 1.0 / t.decode_seconds_per_step() : 0.0,
                      t.decode_tokens_per_second(), t.sequences == 1 ? std::string("sequence") : fmt::format("{} sequences", t.sequences));
  if (t.ops_without_flops > 0) {
    text += fmt::format("  {} matmul-class op(s) of unknown FLOPs were timed by their bytes alone (a lower bound)\n",
                        t.ops_without_flops);
  }
  return text;
}

}  // namespace

std::string step_time_text(const Prediction& prediction) {
  const StepTime& t = prediction.step_time;
  if (!t.modelled) return fmt::format("step time not modelled: {}\n", t.not_modelled);
  if (t.generation) return generation_text(t);
  std::string rate = t.tokens_per_step > 0.0 ? fmt::format("{:.0f} tokens/s", t.tokens_per_second())
                                             : fmt::format("{:.1f} samples/s", t.samples_per_second());
  std::string text = fmt::format("step time {} per optimizer step ({} micro-batch{}), {} per GPU", seconds_text(t.step_seconds),
                                 t.micro_batches, t.micro_batches == 1 ? "" : "es", rate);
  if (t.ranks > 1) {
    text += t.tokens_per_step > 0.0 ? fmt::format(", {:.0f} tokens/s for the {} ranks", t.tokens_per_second() * static_cast<double>(t.ranks), t.ranks)
                                    : fmt::format(", {:.1f} samples/s for the {} ranks", t.samples_per_second() * static_cast<double>(t.ranks), t.ranks);
  }
  text += fmt::format(", MFU {:.2f} (estimate; docs/step-time.md)\n", t.model_flops_utilization);
  text += fmt::format("  forward {}, backward {}, recompute {}, optimizer {}", seconds_text(t.forward_seconds),
                      seconds_text(t.backward_seconds), seconds_text(t.recompute_seconds), seconds_text(t.optimizer_seconds));
  if (t.communication_seconds > 0.0) {
    text += fmt::format(", communication {} exposed of {} over {}", seconds_text(t.communication_exposed_seconds),
                        seconds_text(t.communication_seconds), t.communication_link);
  }
  if (t.offload_seconds > 0.0) text += fmt::format(", offload {} (not overlapped)", seconds_text(t.offload_seconds));
  text += "\n";
  if (t.ops_without_flops > 0) {
    text += fmt::format("  {} matmul-class op(s) of unknown FLOPs were timed by their bytes alone (a lower bound)\n",
                        t.ops_without_flops);
  }
  return text;
}

nlohmann::ordered_json step_time_json(const StepTime& t) {
  using Json = nlohmann::ordered_json;
  Json json;
  json["modelled"] = t.modelled;
  json["not_modelled"] = t.modelled ? Json(nullptr) : Json(t.not_modelled);
  json["step_seconds"] = t.step_seconds;
  json["forward_seconds"] = t.forward_seconds;
  json["backward_seconds"] = t.backward_seconds;
  json["recompute_seconds"] = t.recompute_seconds;
  json["optimizer_seconds"] = t.optimizer_seconds;
  json["communication_seconds"] = t.communication_seconds;
  json["communication_exposed_seconds"] = t.communication_exposed_seconds;
  json["offload_seconds"] = t.offload_seconds;
  json["offload_overlapped"] = false;
  json["micro_batches"] = t.micro_batches;
  json["ranks"] = t.ranks;
  json["samples_per_second"] = t.samples_per_second();
  json["tokens_per_second"] = t.tokens_per_step > 0.0 ? Json(t.tokens_per_second()) : Json(nullptr);
  json["job_tokens_per_second"] =
      t.tokens_per_step > 0.0 ? Json(t.tokens_per_second() * static_cast<double>(t.ranks)) : Json(nullptr);
  json["model_flops_utilization"] = t.model_flops_utilization;
  json["ops_without_flops"] = t.ops_without_flops;
  json["generation"] = t.generation ? Json{{"prefill_seconds", t.prefill_seconds},
                                           {"decode_seconds", t.decode_seconds},
                                           {"decode_steps", t.decode_steps},
                                           {"decode_seconds_per_step", t.decode_seconds_per_step()},
                                           {"decode_tokens_per_second", t.decode_tokens_per_second()},
                                           {"sequences", t.sequences}}
                                    : Json(nullptr);
  return json;
}

void add_step_time_json(const Prediction& prediction, nlohmann::ordered_json& json) {
  json["step_time"] = step_time_json(prediction.step_time);
}

}  // namespace oomcast::advisor
