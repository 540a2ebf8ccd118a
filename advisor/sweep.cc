// The sweep: the grid's cartesian product, each combination loaded through the scenario
// loader with its values as --set overrides (so every cross-key rule is checked exactly as
// `oomcast plan --set` checks it), predicted on a pool of threads. Combinations that differ
// only in allocator settings share one plan, replayed once per setting.
#include "advisor/sweep.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/input_error.h"
#include "advisor/byte_text.h"
#include "advisor/planned_points.h"
#include "advisor/predict.h"

namespace oomcast::advisor {

using scenario::ScenarioSource;

namespace {

InputError grid_error(const std::string& message) { return InputError(SourceLocation{}, "--grid", message); }

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream stream(text);
  while (std::getline(stream, part, separator)) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

// "a..b" -> a, a+1, ..., b; anything else -> itself.
void expand_value(const std::string& axis, const std::string& value, std::vector<std::string>* out) {
  size_t dots = value.find("..");
  if (dots == std::string::npos) {
    out->push_back(value);
    return;
  }
  try {
    size_t used_first = 0, used_last = 0;
    std::string first_text = value.substr(0, dots), last_text = value.substr(dots + 2);
    long long first = std::stoll(first_text, &used_first), last = std::stoll(last_text, &used_last);
    if (used_first != first_text.size() || used_last != last_text.size() || last < first || last - first > 100000) {
      throw std::invalid_argument(value);
    }
    for (long long v = first; v <= last; ++v) out->push_back(std::to_string(v));
  } catch (const std::logic_error&) {
    throw grid_error("'" + axis + "': '" + value + "' is not an integer range such as 1..16");
  }
}

}  // namespace

std::vector<GridAxis> parse_grid(const std::string& text) {
  std::vector<GridAxis> axes;
  std::set<std::string> keys;
  std::istringstream stream(text);
  std::string token;
  while (stream >> token) {
    size_t equals = token.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw grid_error("'" + token + "' is not key=value1,value2,...");
    }
    GridAxis axis;
    axis.key = token.substr(0, equals);
    if (!keys.insert(axis.key).second) throw grid_error("'" + axis.key + "' is given twice");
    for (const std::string& value : split(token.substr(equals + 1), ',')) {
      if (value.empty()) throw grid_error("'" + axis.key + "' has an empty value");
      expand_value(axis.key, value, &axis.values);
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

size_t combination_count(const std::vector<GridAxis>& axes) {
  size_t count = 1;
  for (const auto& axis : axes) {
    if (axis.values.empty()) return 0;
    // Saturates instead of wrapping, so 2^64 + 67 combinations never reads as 67.
    if (count > std::numeric_limits<size_t>::max() / axis.values.size()) return std::numeric_limits<size_t>::max();
    count *= axis.values.size();
  }
  return count;
}

namespace {

void check_grid_size(const std::vector<GridAxis>& axes) {
  const size_t total = combination_count(axes);
  if (total <= kMaxSweepCombinations) return;
  std::string factors;
  for (const auto& axis : axes) factors += (factors.empty() ? "" : " x ") + std::to_string(axis.values.size());
  std::string count = total == std::numeric_limits<size_t>::max() ? "2^64 or more" : std::to_string(total);
  throw grid_error("the grid has " + count + " combinations (" + factors + "), over the limit of " +
                   std::to_string(kMaxSweepCombinations) + ": use fewer values or a coarser range");
}

// A misspelt axis key would make every row fail the same way: refuse it before the sweep.
void check_axis_keys(const ScenarioSource& source, const std::vector<GridAxis>& axes) {
  for (const auto& axis : axes) {
    try {
      source.load({axis.key + "=" + axis.values.front()});
    } catch (const InputError& error) {
      if (error.message().find("unknown key") != std::string::npos) {
        throw grid_error("axis '" + axis.key + "': " + error.message());
      }
    }
  }
}

// Axis keys that change only how the allocator replays the schedule, never the schedule: the
// planner reads no allocator setting but torch_version (whatif_fixes.cc's allocator fixes rely
// on the same fact). Combinations that differ only in these share one plan.
bool replay_only(const std::string& key) {
  static const std::set<std::string> kKeys = {"allocator.conf",
                                              "allocator.expandable_segments",
                                              "allocator.max_split_size_mb",
                                              "allocator.roundup_power2_divisions",
                                              "allocator.garbage_collection_threshold",
                                              "allocator.memory_fraction"};
  return kKeys.count(key) > 0;
}

// The combinations by plan: each group lists the indices (ascending) whose values differ only
// on replay-only axes.
std::vector<std::vector<size_t>> plan_groups(const std::vector<GridAxis>& axes, size_t total) {
  std::vector<std::vector<size_t>> groups;
  std::map<size_t, size_t> group_of_base;
  for (size_t index = 0; index < total; ++index) {
    // The index with every replay-only digit set to 0 (mixed radix, last axis fastest).
    size_t rest = index, base = 0, weight = 1;
    for (size_t a = axes.size(); a-- > 0;) {
      const size_t radix = axes[a].values.size();
      if (!replay_only(axes[a].key)) base += (rest % radix) * weight;
      rest /= radix;
      weight *= radix;
    }
    auto [found, inserted] = group_of_base.emplace(base, groups.size());
    if (inserted) groups.emplace_back();
    groups[found->second].push_back(index);
  }
  return groups;
}

// Fills `row` with combination `index`'s values and prediction, or with the error that
// rejected it. `plan` holds the schedule shared by the combination's plan group.
void predict_combination(const ScenarioSource& source, const std::vector<GridAxis>& axes, size_t index,
                         PlannedPoints* plan, SweepRow& row) {
  std::vector<std::string> overrides;
  // Mixed-radix digits of `index`, last axis fastest.
  size_t rest = index;
  row.values.resize(axes.size());
  for (size_t a = axes.size(); a-- > 0;) {
    row.values[a] = axes[a].values[rest % axes[a].values.size()];
    rest /= axes[a].values.size();
  }
  for (size_t a = 0; a < axes.size(); ++a) overrides.push_back(axes[a].key + "=" + row.values[a]);
  try {
    Prediction prediction = predict_sharing(source.load(overrides), plan);
    row.fits = prediction.fits;
    row.peak_allocated_bytes = prediction.peak_allocated_bytes;
    row.peak_reserved_bytes = prediction.peak_reserved_bytes;
    row.usable_bytes = prediction.usable_bytes;
    row.spare_bytes = prediction.spare_bytes();
  } catch (const InputError& error) {
    row.valid = false;
    row.error = error.what();
  }
}

}  // namespace

SweepResult run_sweep(const ScenarioSource& source, const std::vector<GridAxis>& axes, const SweepOptions& options) {
  auto start = std::chrono::steady_clock::now();
  SweepResult result;
  result.scenario_path = source.path;
  for (const auto& axis : axes) result.keys.push_back(axis.key);
  const size_t total = combination_count(axes);
  if (total == 0) throw grid_error("the grid has no combinations");
  check_grid_size(axes);
  check_axis_keys(source, axes);
  result.rows.resize(total);
  result.jobs = std::max<size_t>(1, std::min(options.jobs, total));

  std::mutex progress_mutex;
  size_t done = 0;
  const std::vector<std::vector<size_t>> groups = plan_groups(axes, total);
  run_indexed(groups.size(), result.jobs, [&](size_t group) {
    PlannedPoints plan;  // the group's one plan, made by its first combination that loads
    for (size_t index : groups[group]) {
      predict_combination(source, axes, index, &plan, result.rows[index]);
      if (options.progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        options.progress(++done, total);
      }
    }
  });
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (std::none_of(result.rows.begin(), result.rows.end(), [](const SweepRow& row) { return row.valid; })) {
    throw grid_error("every combination was rejected; the first: " + result.rows.front().error);
  }
  return result;
}

std::string render_sweep_text(const SweepResult& result) {
  std::vector<size_t> widths;
  for (size_t a = 0; a < result.keys.size(); ++a) {
    size_t width = result.keys[a].size();
    for (const auto& row : result.rows) width = std::max(width, row.values[a].size());
    widths.push_back(width);
  }
  std::string text;
  for (size_t a = 0; a < result.keys.size(); ++a) text += fmt::format("{:<{}}  ", result.keys[a], widths[a]);
  text += fmt::format("{:<5}  {:>14}  {:>14}  {:>14}\n", "fits", "peak alloc", "peak reserved", "spare");
  size_t fitting = 0, invalid = 0;
  for (const auto& row : result.rows) {
    for (size_t a = 0; a < row.values.size(); ++a) text += fmt::format("{:<{}}  ", row.values[a], widths[a]);
    if (!row.valid) {
      ++invalid;
      text += "error  " + row.error + "\n";
      continue;
    }
    fitting += row.fits ? 1 : 0;
    text += fmt::format("{:<5}  {:>14}  {:>14}  {:>14}\n", row.fits ? "yes" : "OOM", byte_text(row.peak_allocated_bytes),
                        byte_text(row.peak_reserved_bytes), byte_text(row.spare_bytes));
  }
  text += fmt::format("\n{} combinations: {} fit, {} do not, {} invalid; {:.2f} s on {} thread(s)\n", result.rows.size(),
                      fitting, result.rows.size() - fitting - invalid, invalid, result.seconds, result.jobs);
  return text;
}

std::string render_sweep_csv(const SweepResult& result) {
  auto quoted = [](const std::string& field) {
    if (field.find_first_of(",\"\n") == std::string::npos) return field;
    std::string out = "\"";
    for (char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  std::string text;
  for (const auto& key : result.keys) text += quoted(key) + ",";
  text += "valid,fits,peak_allocated_bytes,peak_reserved_bytes,usable_bytes,spare_bytes,error\n";
  for (const auto& row : result.rows) {
    for (const auto& value : row.values) text += quoted(value) + ",";
    if (row.valid) {
      text += fmt::format("true,{},{},{},{},{},\n", row.fits ? "true" : "false", row.peak_allocated_bytes,
                          row.peak_reserved_bytes, row.usable_bytes, row.spare_bytes);
    } else {
      text += "false,,,,,," + quoted(row.error) + "\n";
    }
  }
  return text;
}

std::string render_sweep_json(const SweepResult& result) {
  nlohmann::ordered_json json;
  json["scenario"] = result.scenario_path;
  json["keys"] = result.keys;
  json["rows"] = nlohmann::ordered_json::array();
  for (const auto& row : result.rows) {
    nlohmann::ordered_json entry;
    nlohmann::ordered_json settings = nlohmann::ordered_json::object();
    for (size_t a = 0; a < row.values.size(); ++a) settings[result.keys[a]] = row.values[a];
    entry["settings"] = std::move(settings);
    entry["valid"] = row.valid;
    if (row.valid) {
      entry["fits"] = row.fits;
      entry["peak_allocated_bytes"] = row.peak_allocated_bytes;
      entry["peak_reserved_bytes"] = row.peak_reserved_bytes;
      entry["usable_bytes"] = row.usable_bytes;
      entry["spare_bytes"] = row.spare_bytes;
      entry["error"] = nullptr;
    } else {
      entry["fits"] = nullptr;
      entry["error"] = row.error;
    }
    json["rows"].push_back(std::move(entry));
  }
  json["jobs"] = result.jobs;
  json["seconds"] = result.seconds;
  return json.dump(2) + "\n";
}

}  // namespace oomcast::advisor
