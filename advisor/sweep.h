// run_sweep(): every combination of a grid of scenario overrides ('batch_size=1,2,4
// precision=fp32,amp_bf16'), predicted in parallel; a combination the scenario rules reject
// keeps its error in its row instead of stopping the sweep.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "scenario/scenario_source.h"
#include "advisor/work_pool.h"

namespace oomcast::advisor {

struct GridAxis {
  std::string key;                  // a dotted scenario key, as --set takes it
  std::vector<std::string> values;  // as YAML text
};

// Parses "key=v1,v2,... key2=a..b ..." (whitespace between axes; `a..b` is an inclusive
// integer range). Throws InputError for an empty axis, a missing '=', or a repeated key.
std::vector<GridAxis> parse_grid(const std::string& text);

struct SweepRow {
  std::vector<std::string> values;  // one per axis
  bool valid = true;                // false: the scenario rejected the combination
  std::string error;
  bool fits = false;
  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  uint64_t usable_bytes = 0;
  int64_t spare_bytes = 0;
};

struct SweepResult {
  std::string scenario_path;
  std::vector<std::string> keys;
  std::vector<SweepRow> rows;       // first axis slowest, as nested loops would give
  size_t jobs = 1;
  double seconds = 0.0;
};

struct SweepOptions {
  size_t jobs = default_jobs();
  // Called after each combination with (done, total), from worker threads but never two at once.
  std::function<void(size_t, size_t)> progress;
};

inline constexpr size_t kMaxSweepCombinations = 100'000;

// Number of combinations of `axes` (1 for no axes: the scenario as it is); saturates at
// SIZE_MAX instead of overflowing.
size_t combination_count(const std::vector<GridAxis>& axes);

// Throws InputError for a grid with no combinations or more than kMaxSweepCombinations, an
// axis key the scenario does not know, and when every combination was rejected; any other
// bad combination is a row.
SweepResult run_sweep(const scenario::ScenarioSource& source, const std::vector<GridAxis>& axes, const SweepOptions& options);

std::string render_sweep_text(const SweepResult& result);
// Header: the axis keys, then valid, fits, peak_allocated_bytes, peak_reserved_bytes,
// usable_bytes, spare_bytes, error.
std::string render_sweep_csv(const SweepResult& result);
// {"scenario", "keys", "rows": [{"settings": {key: value}, "valid", "fits",
//  "peak_allocated_bytes", "peak_reserved_bytes", "usable_bytes", "spare_bytes", "error"}],
//  "jobs", "seconds"}
std::string render_sweep_json(const SweepResult& result);

}  // namespace oomcast::advisor
