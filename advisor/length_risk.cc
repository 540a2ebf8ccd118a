// The tail risk of a length distribution against the longest length that fits, and its
// text and JSON renderings.
#include "advisor/length_risk.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "advisor/search.h"

namespace oomcast::advisor {

using scenario::Scenario;

namespace {

// 1 - (1 - p)^n without cancellation for small p.
double any_of(double p, double n) {
  if (p <= 0) return 0.0;
  if (p >= 1) return 1.0;
  return -std::expm1(n * std::log1p(-p));
}

std::string share(double p) {
  if (p <= 0) return "0";
  if (p >= 1) return "100%";
  if (p > 0.999) return "> 99.9%";
  if (p >= 0.001) return fmt::format("{:.3g}%", p * 100.0);
  return fmt::format("{:.2g}", p);
}

}  // namespace

LengthRisk assess_length_risk(const LengthDistribution& lengths, const SearchResult& search, const Scenario& scenario,
                              const LengthRiskOptions& options) {
  LengthRisk risk;
  risk.source = lengths.source;
  risk.options = options;
  risk.batch_size = scenario.batch_size;
  risk.accum_steps = scenario.grad_accum_steps;
  risk.ranks = scenario.parallel.enabled() ? std::max<int64_t>(1, scenario.parallel.world_size) : 1;
  risk.pack_length = options.batching == Batching::Pack ? scenario.seq_len : 0;
  risk.mean_length = lengths.mean();
  risk.p50 = lengths.quantile(0.5);
  risk.p90 = lengths.quantile(0.9);
  risk.p99 = lengths.quantile(0.99);
  risk.max_length = lengths.max_length();
  const int64_t multiple = std::max<int64_t>(1, options.pad_to_multiple_of);
  risk.padded_p50 = padded_quantile(lengths, 0.5, risk.batch_size, multiple);
  risk.padded_p90 = padded_quantile(lengths, 0.9, risk.batch_size, multiple);
  risk.padded_p99 = padded_quantile(lengths, 0.99, risk.batch_size, multiple);
  risk.padded_max = padded_quantile(lengths, 1.0, risk.batch_size, multiple);

  if (search.max_fitting) {
    risk.conservative = search.non_monotone;
    risk.safe_length = search.non_monotone ? search.witness_fail - 1 : *search.max_fitting;
    if (*risk.safe_length < 1) risk.safe_length.reset();
  }
  const int64_t safe = risk.safe_length.value_or(0);
  risk.sequences_longer = 1.0 - lengths.cdf(safe);
  risk.mean_fits = safe > 0 && static_cast<double>(safe) >= risk.mean_length;
  if (options.batching == Batching::Pack) {
    // One shape every step: the rows fit or they do not; sequences longer than a row are split.
    risk.sequences_longer = 1.0 - lengths.cdf(risk.pack_length);
    risk.micro_batch_risk = risk.step_risk = risk.risk_per_1000_steps = risk.pack_length <= safe ? 0.0 : 1.0;
    return risk;
  }
  // A micro-batch fits when its longest sequence, rounded up to the multiple, is <= safe.
  double sequence_over = 1.0 - lengths.cdf(multiple <= 1 ? safe : safe / multiple * multiple);
  risk.micro_batch_risk = any_of(sequence_over, static_cast<double>(risk.batch_size));
  risk.step_risk = any_of(sequence_over, static_cast<double>(risk.batch_size * risk.accum_steps * risk.ranks));
  risk.risk_per_1000_steps = any_of(risk.step_risk, 1000.0);
  return risk;
}

std::string render_length_risk_text(const LengthRisk& r) {
  std::string text = fmt::format("lengths   {}: mean {:.0f}, p50 {}, p90 {}, p99 {}, max {}\n", r.source, r.mean_length,
                                 r.p50, r.p90, r.p99, r.max_length);
  const std::string safe = r.safe_length ? std::to_string(*r.safe_length) : "none";
  if (r.options.batching == Batching::Pack) {
    text += fmt::format("packing   sequences packed into micro-batches of {} rows x {} tokens: the same shape every "
                        "step\n",
                        r.batch_size, r.pack_length);
    text += r.step_risk == 0.0
                ? fmt::format("risk      none: rows of {} fit (up to {} fit); {} of the sequences are longer than {} "
                              "and are split across rows\n",
                              r.pack_length, safe, share(r.sequences_longer), r.pack_length)
                : fmt::format("risk      every step: rows of {} do not fit; pack to at most {} tokens a row\n",
                              r.pack_length, safe);
    return text;
  }
  std::string rounding = r.options.pad_to_multiple_of > 1
                             ? fmt::format(", rounded up to a multiple of {}", r.options.pad_to_multiple_of)
                             : "";
  text += fmt::format("padding   each micro-batch of {} is padded to its longest sequence{}: padded length p50 {}, "
                      "p90 {}, p99 {}, max {}\n",
                      r.batch_size, rounding, r.padded_p50, r.padded_p90, r.padded_p99, r.padded_max);
  if (r.step_risk == 0.0) {
    text += fmt::format("risk      none: the longest padded micro-batch ({}) fits (up to {} fits)\n", r.padded_max, safe);
    return text;
  }
  text += fmt::format("risk      a padded length above {}{} does not fit: {} of the sequences are longer\n", safe,
                      r.conservative ? " (conservatively: the first length that failed, the search was non-monotone)" : "",
                      share(r.sequences_longer));
  text += fmt::format("          P(OOM) per micro-batch {}; per optimizer step {} ({} sequences: {} x {} accumulation "
                      "x {} rank{}, the rank with the longest batch decides); within 1000 steps {}\n",
                      share(r.micro_batch_risk), share(r.step_risk), r.batch_size * r.accum_steps * r.ranks,
                      r.batch_size, r.accum_steps, r.ranks, r.ranks == 1 ? "" : "s", share(r.risk_per_1000_steps));
  if (r.mean_fits) {
    text += fmt::format("          the mean length ({:.0f}) fits: an answer from the mean alone would hide this tail\n",
                        r.mean_length);
  }
  if (r.safe_length) {
    // Truncating to a length the padding would round up past it does not help.
    int64_t multiple = std::max<int64_t>(1, r.options.pad_to_multiple_of);
    int64_t truncate = *r.safe_length / multiple * multiple;
    if (truncate > 0) {
      text += fmt::format("          to remove the risk: truncate to {} tokens (max_length={}), or pack rows of {}\n",
                          truncate, truncate, *r.safe_length);
    }
  }
  return text;
}

std::string render_length_risk_json(const LengthRisk& r) {
  nlohmann::ordered_json json;
  json["source"] = r.source;
  json["batching"] = r.options.batching == Batching::Pack ? "pack" : "pad";
  json["pad_to_multiple_of"] = r.options.pad_to_multiple_of;
  json["batch_size"] = r.batch_size;
  json["grad_accum_steps"] = r.accum_steps;
  json["ranks"] = r.ranks;
  json["pack_length"] = r.pack_length;
  json["lengths"] = {{"mean", r.mean_length}, {"p50", r.p50}, {"p90", r.p90}, {"p99", r.p99}, {"max", r.max_length}};
  json["padded"] = {{"p50", r.padded_p50}, {"p90", r.padded_p90}, {"p99", r.padded_p99}, {"max", r.padded_max}};
  json["safe_length"] = r.safe_length ? nlohmann::ordered_json(*r.safe_length) : nlohmann::ordered_json(nullptr);
  json["conservative"] = r.conservative;
  json["sequences_longer"] = r.sequences_longer;
  json["micro_batch_risk"] = r.micro_batch_risk;
  json["step_risk"] = r.step_risk;
  json["risk_per_1000_steps"] = r.risk_per_1000_steps;
  json["mean_fits"] = r.mean_fits;
  return json.dump();
}

}  // namespace oomcast::advisor
