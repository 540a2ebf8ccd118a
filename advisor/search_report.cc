// Text and JSON renderings of a SearchResult (the JSON keys are the contract in docs/usage.md).
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "advisor/byte_text.h"
#include "advisor/search.h"

namespace oomcast::advisor {

namespace {

std::string percent(double fraction) { return fmt::format("{:g}%", fraction * 100.0); }

}  // namespace

std::string margin_text(double fraction, uint64_t margin_bytes) {
  return margin_bytes > 0 ? byte_text(margin_bytes) : percent(fraction);
}

namespace {

// "50..59, 61, 63..64": ascending values as runs.
std::string runs_text(const std::vector<int64_t>& values) {
  std::string text;
  for (size_t i = 0; i < values.size();) {
    size_t end = i;
    while (end + 1 < values.size() && values[end + 1] == values[end] + 1) ++end;
    text += (text.empty() ? "" : ", ") + std::to_string(values[i]);
    if (end > i) text += ".." + std::to_string(values[end]);
    i = end + 1;
  }
  return text;
}

std::string row_text(const Evaluation& e) {
  if (!e.error.empty()) return fmt::format("{:>10}  {:<5}  refused: {}\n", e.value, "-", e.error);
  return fmt::format("{:>10}  {:<5}  {:>16}  {:>16}\n", e.value, e.fits ? "yes" : "no", byte_text(e.peak_allocated_bytes),
                     byte_text(e.peak_reserved_bytes));
}

// The table, folded: a run of more than kFoldAbove rows with the same answer shows its first
// and last rows and one line for those between (--json lists every value).
constexpr size_t kFoldAbove = 4;

std::string table_text(const SearchResult& r) {
  std::string text;
  const std::vector<Evaluation>& rows = r.evaluated;
  auto answer = [](const Evaluation& e) { return e.error.empty() ? (e.fits ? 1 : 0) : 2; };
  for (size_t i = 0; i < rows.size();) {
    size_t end = i;
    while (end + 1 < rows.size() && answer(rows[end + 1]) == answer(rows[i])) ++end;
    if (end - i + 1 > kFoldAbove) {
      text += row_text(rows[i]);
      text += fmt::format("{:>10}  {} values between {} and {}: {} (--json lists each)\n", "...", end - i - 1,
                          rows[i].value, rows[end].value,
                          answer(rows[i]) == 1 ? "all fit" : answer(rows[i]) == 0 ? "none fits" : "all refused");
      text += row_text(rows[end]);
    } else {
      for (size_t k = i; k <= end; ++k) text += row_text(rows[k]);
    }
    i = end + 1;
  }
  return text;
}

}  // namespace

std::string render_search_text(const SearchResult& r) {
  std::string text;
  text += fmt::format("search    {} in 1..{} for {}\n", r.param_key, r.max_value, r.scenario_path);
  text += fmt::format("budget    {} = {} usable minus a {} margin\n", byte_text(r.budget_bytes),
                      byte_text(r.usable_bytes), margin_text(r.margin, r.margin_bytes));
  if (r.ranks > 1) {
    text += fmt::format("per rank  {} with {} ranks: the budget is one GPU's and the planned rank holds the largest "
                        "shard, so the busiest rank decides\n",
                        r.parallel_engine, r.ranks);
  }
  text += "\n";
  if (r.max_fitting) {
    const Evaluation* best = nullptr;
    for (const auto& e : r.evaluated) {
      if (e.value == *r.max_fitting) best = &e;
    }
    text += fmt::format("largest {} that fits: {}", r.param_key, *r.max_fitting);
    if (best) {
      text += fmt::format(" (peak reserved {}, {} under the budget)", byte_text(best->peak_reserved_bytes),
                          byte_text(static_cast<double>(r.budget_bytes) - static_cast<double>(best->peak_reserved_bytes)));
    }
    text += *r.max_fitting != r.max_value ? "\n"
            : r.length_risk ? fmt::format("; the longest length {} fits\n", r.max_value)
                            : fmt::format("; the ceiling {} was reached (raise it with --max)\n", r.max_value);
    // What "fits" below the answer rests on: the run simulated value by value, and the probes under it.
    if (*r.max_fitting > 1) {
      const auto probes_below = std::count_if(r.evaluated.begin(), r.evaluated.end(),
                                              [&](const Evaluation& e) { return e.value < r.consecutive_from; });
      text += r.consecutive_from == *r.max_fitting
                  ? fmt::format("below it  {} probes, all fitting; the values between them were not simulated\n",
                                probes_below)
                  : fmt::format("below it  every value from {} to {} was simulated and fits{}\n", r.consecutive_from,
                                *r.max_fitting,
                                probes_below > 0 ? fmt::format("; below {}, the {} probes fit", r.consecutive_from,
                                                               probes_below)
                                                 : std::string());
    }
    if (r.refused_from) {
      text += fmt::format("the search stopped at a limit, not at out of memory: {} {} is refused ({})\n", r.param_key,
                          *r.refused_from, r.refusal);
    }
  } else {
    text += fmt::format("no {} fits: even {} = 1 needs more than the budget\n", r.param_key, r.param_key);
  }
  if (r.non_monotone) {
    text += fmt::format(
        "non-monotone: {} {} fits although {} does not (the caching allocator's segments, not the tensors, "
        "decide here), so the window was scanned value by value\n",
        r.param_key, r.witness_fit, r.witness_fail);
    text += fmt::format("isolated fits above {}: {} ({} of them); each fits at the allocator's edge, with a value "
                        "below it that does not, so the answer stays {}\n",
                        r.max_fitting ? std::to_string(*r.max_fitting) : std::string("nothing"),
                        runs_text(r.isolated_fits), r.isolated_fits.size(),
                        r.max_fitting ? std::to_string(*r.max_fitting) : std::string("none"));
  }
  if (r.window_to > 0) {
    text += fmt::format("fragmentation window {}..{}: allocated memory still fits the budget there; {}\n",
                        r.window_from, r.window_to,
                        r.scan_truncated ? "scanned only its first values (raise the limit to be sure)"
                        : r.scanned      ? "every value was simulated"
                                         : "sampled evenly, none fits");
  }
  if (r.length_risk) text += "\n" + render_length_risk_text(*r.length_risk);
  text += fmt::format("\n{:>10}  {:<5}  {:>16}  {:>16}\n", r.param_key, "fits", "peak allocated", "peak reserved");
  text += table_text(r);
  if (r.fit) text += "\n" + render_fit_text(*r.fit);
  text += fmt::format("\n{} values simulated in {:.2f} s\n", r.evaluated.size(), r.seconds);
  return text;
}

std::string render_search_json(const SearchResult& r) {
  nlohmann::ordered_json json;
  json["max_fitting"] = r.max_fitting ? nlohmann::ordered_json(*r.max_fitting) : nlohmann::ordered_json(nullptr);
  json["largest_fitting"] =
      r.largest_fitting ? nlohmann::ordered_json(*r.largest_fitting) : nlohmann::ordered_json(nullptr);
  json["isolated_fits"] = r.isolated_fits;
  json["consecutive_from"] =
      r.max_fitting ? nlohmann::ordered_json(r.consecutive_from) : nlohmann::ordered_json(nullptr);
  json["param"] = r.param_key;
  json["margin"] = r.margin_bytes > 0 ? static_cast<double>(r.margin_bytes) / static_cast<double>(r.usable_bytes)
                                      : r.margin;
  json["margin_bytes"] = r.usable_bytes - r.budget_bytes;
  json["non_monotone"] = r.non_monotone;
  json["refused_from"] = r.refused_from ? nlohmann::ordered_json(*r.refused_from) : nlohmann::ordered_json(nullptr);
  if (r.refused_from) json["refusal"] = r.refusal;
  json["evaluated"] = nlohmann::ordered_json::array();
  for (const auto& e : r.evaluated) {
    nlohmann::ordered_json row;
    row["value"] = e.value;
    row["fits"] = e.fits;
    row["peak_allocated_bytes"] = e.peak_allocated_bytes;
    row["peak_reserved_bytes"] = e.peak_reserved_bytes;
    if (!e.error.empty()) row["error"] = e.error;
    json["evaluated"].push_back(std::move(row));
  }
  json["usable_bytes"] = r.usable_bytes;
  json["budget_bytes"] = r.budget_bytes;
  json["max_value"] = r.max_value;
  json["ranks"] = r.ranks;
  if (r.non_monotone) json["non_monotone_witness"] = {{"fits", r.witness_fit}, {"does_not_fit", r.witness_fail}};
  json["window"] = {{"from", r.window_from}, {"to", r.window_to}, {"scanned", r.scanned}, {"truncated", r.scan_truncated}};
  if (r.fit) json["fit"] = nlohmann::ordered_json::parse(render_fit_json(*r.fit));
  if (r.length_risk) json["length_risk"] = nlohmann::ordered_json::parse(render_length_risk_json(*r.length_risk));
  json["seconds"] = r.seconds;
  json["scenario"] = r.scenario_path;
  return json.dump(2) + "\n";
}

}  // namespace oomcast::advisor
