// Text and JSON renderings of a GlobalBatchResult (`oomcast search --keep-global-batch N`).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "advisor/byte_text.h"
#include "advisor/global_batch_search.h"

namespace oomcast::advisor {

std::string render_global_batch_text(const GlobalBatchResult& r) {
  std::string text;
  text += fmt::format("search    micro-batch x grad_accum_steps x {} rank{} = global batch {} for {}\n", r.ranks,
                      r.ranks == 1 ? "" : "s", r.global_batch, r.scenario_path);
  text += fmt::format("budget    {} = {} usable{} minus a {} margin\n", byte_text(r.budget_bytes),
                      byte_text(r.usable_bytes), r.ranks > 1 ? " per rank" : "", margin_text(r.margin, r.margin_bytes));
  if (r.ranks > 1) {
    text += fmt::format("per rank  {}: every rank runs the same micro-batch; the planned rank holds the largest "
                        "shard, so it is the busiest and decides\n",
                        r.parallel_description);
  }
  text += "\n";
  if (r.best) {
    text += fmt::format("largest micro-batch that fits: {} x {} accumulation step{} (peak reserved {}, {} under the "
                        "budget)\n",
                        r.best->micro_batch, r.best->accum_steps, r.best->accum_steps == 1 ? "" : "s",
                        byte_text(r.best->evaluation.peak_reserved_bytes),
                        byte_text(static_cast<double>(r.budget_bytes) -
                                  static_cast<double>(r.best->evaluation.peak_reserved_bytes)));
    text += fmt::format("  --set batch_size={} --set grad_accum_steps={}\n", r.best->micro_batch, r.best->accum_steps);
  } else {
    text += fmt::format("no split fits: even micro-batch 1 x {} accumulation steps needs more than the budget\n",
                        r.global_batch / r.ranks);
  }
  if (r.non_monotone) {
    text += "non-monotone: a larger micro-batch fits above one that does not (the allocator's segments decide)\n";
  }
  text += fmt::format("\n{:>11}  {:>11}  {:<5}  {:>16}  {:>16}\n", "micro-batch", "accum steps", "fits", "peak allocated",
                      "peak reserved");
  bool capped = false;
  for (const auto& c : r.evaluated) {
    const Evaluation& e = c.evaluation;
    std::string accum = std::to_string(c.accum_steps);
    if (!e.error.empty()) {
      text += fmt::format("{:>11}  {:>11}  {:<5}  error: {}\n", c.micro_batch, accum, "no", e.error);
      continue;
    }
    if (c.planned_accum_steps != c.accum_steps) {
      accum += "*";
      capped = true;
    }
    text += fmt::format("{:>11}  {:>11}  {:<5}  {:>16}  {:>16}\n", c.micro_batch, accum, e.fits ? "yes" : "no",
                        byte_text(e.peak_allocated_bytes), byte_text(e.peak_reserved_bytes));
  }
  if (capped) {
    text += fmt::format("  * planned as {} or {} micro-steps (the same parity): the micro-steps between the first and "
                        "the last repeat the same tensors\n",
                        kMaxPlannedAccumSteps, kMaxPlannedAccumSteps + 1);
  }
  text += fmt::format("\n{} of {} splits simulated in {:.2f} s\n", r.evaluated.size(), r.micro_batches.size(),
                      r.seconds);
  return text;
}

std::string render_global_batch_json(const GlobalBatchResult& r) {
  nlohmann::ordered_json json;
  json["global_batch"] = r.global_batch;
  json["ranks"] = r.ranks;
  json["micro_batch"] = r.best ? nlohmann::ordered_json(r.best->micro_batch) : nlohmann::ordered_json(nullptr);
  json["grad_accum_steps"] = r.best ? nlohmann::ordered_json(r.best->accum_steps) : nlohmann::ordered_json(nullptr);
  json["margin"] = r.margin_bytes > 0 ? static_cast<double>(r.margin_bytes) / static_cast<double>(r.usable_bytes)
                                      : r.margin;
  json["margin_bytes"] = r.usable_bytes - r.budget_bytes;
  json["usable_bytes"] = r.usable_bytes;
  json["budget_bytes"] = r.budget_bytes;
  json["non_monotone"] = r.non_monotone;
  json["evaluated"] = nlohmann::ordered_json::array();
  for (const auto& c : r.evaluated) {
    nlohmann::ordered_json row;
    row["micro_batch"] = c.micro_batch;
    row["grad_accum_steps"] = c.accum_steps;
    row["planned_grad_accum_steps"] = c.planned_accum_steps;
    row["fits"] = c.evaluation.fits;
    row["peak_allocated_bytes"] = c.evaluation.peak_allocated_bytes;
    row["peak_reserved_bytes"] = c.evaluation.peak_reserved_bytes;
    if (!c.evaluation.error.empty()) row["error"] = c.evaluation.error;
    json["evaluated"].push_back(std::move(row));
  }
  json["seconds"] = r.seconds;
  json["scenario"] = r.scenario_path;
  return json.dump(2) + "\n";
}

}  // namespace oomcast::advisor
