// `oomcast compare SCENARIO CAPTURE [--json] [--tolerance 2%]`: the planner's prediction on the
// cpu device against a trace captured from real PyTorch (validate/capture.py). Exit code 0 when
// every phase is within the tolerance of the real peak, 1 when one is not.
#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "cli/commands.h"
#include "advisor/compare.h"
#include "scenario/scenario_loader.h"
#include "planner/jobs/training_job.h"
#include "sim/trace_io.h"

namespace oomcast::cli {

namespace {

struct CompareFlags {
  std::string scenario;
  std::string capture;
  std::vector<std::string> overrides;
  std::string tolerance = "2%";
  bool json = false;
};

// "2%", "2" (percent) or "0.02" (a fraction, when below 1 and without '%').
double parse_tolerance(const std::string& text) {
  std::string number = text;
  bool percent = !number.empty() && number.back() == '%';
  if (percent) number.pop_back();
  size_t used = 0;
  double value = -1.0;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != number.size() || used == 0 || value < 0.0) {
    throw InputError(SourceLocation{}, "--tolerance", "--tolerance must be a percentage such as 2% or 0.5%, got '" + text + "'");
  }
  return percent || value >= 1.0 ? value / 100.0 : value;
}

std::string percent(double fraction) { return fmt::format("{:+.2f}%", fraction * 100.0); }

nlohmann::json comparison_json(const advisor::Comparison& c) {
  nlohmann::json out;
  out["tolerance"] = c.tolerance;
  out["real_peak_bytes"] = c.real_peak_bytes;
  out["predicted_peak_bytes"] = c.predicted_peak_bytes;
  out["max_abs_peak_error"] = c.max_abs_peak_error;
  out["median_abs_peak_error"] = c.median_abs_peak_error;
  out["max_abs_live_error"] = c.max_abs_live_error;
  out["within_tolerance"] = c.within_tolerance();
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& p : c.phases) {
    phases.push_back({{"label", p.label}, {"real_live_bytes", p.real_live_bytes},
                      {"predicted_live_bytes", p.predicted_live_bytes}, {"live_error", p.live_error},
                      {"real_peak_bytes", p.real_peak_bytes}, {"predicted_peak_bytes", p.predicted_peak_bytes},
                      {"peak_error", p.peak_error}});
  }
  out["phases"] = phases;
  out["only_in_capture"] = c.only_in_capture;
  out["only_in_prediction"] = c.only_in_prediction;
  out["first_failing_phase"] = c.first_failing_phase ? nlohmann::json(*c.first_failing_phase) : nlohmann::json(nullptr);
  if (c.divergence) {
    const auto& d = *c.divergence;
    out["divergence"] = {{"phase", d.phase}, {"op", d.op}, {"tensor", d.tensor},
                         {"predicted_event", d.predicted_event}, {"real_event", d.real_event},
                         {"predicted_live_bytes", d.predicted_live_bytes}, {"real_live_bytes", d.real_live_bytes},
                         {"method", advisor::kDivergenceMethod}};
  } else {
    out["divergence"] = nullptr;
  }
  return out;
}

void print_text(const CompareFlags& flags, const advisor::Comparison& c) {
  fmt::print("compare {} with the capture {}\n", flags.scenario, flags.capture);
  fmt::print("  overall peak: real {} B, predicted {} B ({})\n", c.real_peak_bytes, c.predicted_peak_bytes,
             percent(c.real_peak_bytes ? (static_cast<double>(c.predicted_peak_bytes) - c.real_peak_bytes) / c.real_peak_bytes : 0.0));
  fmt::print("  errors are (predicted - real) / real overall peak\n");
  fmt::print("  {:<26} {:>12} {:>12} {:>8}   {:>12} {:>12} {:>8}\n", "mark", "real live", "pred live", "error",
             "real peak", "pred peak", "error");
  for (const auto& p : c.phases) {
    fmt::print("  {:<26} {:>12} {:>12} {:>8}   {:>12} {:>12} {:>8}\n", p.label, p.real_live_bytes,
               p.predicted_live_bytes, percent(p.live_error), p.real_peak_bytes, p.predicted_peak_bytes,
               percent(p.peak_error));
  }
  for (const auto& label : c.only_in_capture) fmt::print("  mark {} is in the capture only\n", label);
  for (const auto& label : c.only_in_prediction) fmt::print("  mark {} is in the prediction only\n", label);
  fmt::print("  per-phase peak error: max {:.2f}%, median {:.2f}%; live-at-mark error: max {:.2f}%\n",
             c.max_abs_peak_error * 100.0, c.median_abs_peak_error * 100.0, c.max_abs_live_error * 100.0);
  if (c.first_failing_phase) {
    fmt::print("  OUTSIDE the tolerance of {:.2f}%: first in phase {}\n", c.tolerance * 100.0, *c.first_failing_phase);
    if (c.divergence) {
      const auto& d = *c.divergence;
      fmt::print("  the curves part in {} near planner op '{}' (tensor '{}'): planned event {} live {} B, "
                 "captured event {} live {} B\n",
                 d.phase, d.op, d.tensor, d.predicted_event, d.predicted_live_bytes, d.real_event, d.real_live_bytes);
    }
  } else if (!c.within_tolerance()) {
    fmt::print("  OUTSIDE: the phase marks differ\n");
  } else {
    fmt::print("  within the tolerance of {:.2f}%\n", c.tolerance * 100.0);
  }
}

int run_compare(const CompareFlags& flags) {
  double tolerance = parse_tolerance(flags.tolerance);
  std::vector<std::string> overrides = flags.overrides;
  overrides.push_back("device=cpu");  // exact live-tensor accounting, as the capture counts
  scenario::Scenario scenario = scenario::load_scenario(flags.scenario, overrides);
  planner::PlannedTrace planned = planner::plan_steps(scenario);
  sim::Trace capture = sim::read_trace_file(flags.capture);
  advisor::Comparison comparison = advisor::compare_capture(planned, capture, tolerance);
  if (flags.json) {
    std::string text = comparison_json(comparison).dump(2) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    print_text(flags, comparison);
  }
  return comparison.within_tolerance() ? 0 : 1;
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<CompareFlags>();
  CLI::App* command = app.add_subcommand(
      "compare", "compare a scenario's cpu prediction with a real PyTorch CPU capture (validate/capture.py)");
  command->add_option("scenario", flags->scenario, "scenario YAML file")->required();
  command->add_option("capture", flags->capture, "trace written by validate/capture.py")->required();
  command->add_option("--set", flags->overrides, "override a scenario key (repeatable)")->allow_extra_args(false);
  command->add_option("--tolerance", flags->tolerance, "largest error allowed, of the real peak (default 2%)");
  command->add_flag("--json", flags->json, "print JSON instead of text");
  command->callback([flags, &exit_code] { exit_code = run_compare(*flags); });
}

}  // namespace oomcast::cli
