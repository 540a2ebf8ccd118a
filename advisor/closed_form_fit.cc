// The closed-form fit: simulate a small grid of (B, S), solve the least-squares problem with
// column-pivoting QR on a column-scaled design matrix (B·S² is ~10^7 times B, so unscaled
// columns would lose the small terms to rounding), and report every residual.
#include "advisor/closed_form_fit.h"

#include <algorithm>
#include <cmath>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "advisor/byte_text.h"
#include "planner/families/families.h"
#include "advisor/predict.h"
#include "planner/step_planner.h"

namespace oomcast::planner {

namespace {

std::vector<int64_t> unique_positive(std::vector<int64_t> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](int64_t v) { return v < 1; }), values.end());
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

bool fits_sequence(const ModelConfig& model) { return !families::is_vision(model) && model.family != "mlp"; }

std::string signed_term(double value, const char* unit) {
  return fmt::format(" {} {}{}", value < 0 ? "-" : "+", byte_text(std::fabs(value)), unit);
}

}  // namespace

double ClosedFormFit::predict(int64_t batch, int64_t seq_len) const {
  double B = static_cast<double>(batch), S = static_cast<double>(seq_len);
  return a + b * B + (has_sequence ? c * B * S + d * B * S * S : 0.0);
}

std::string ClosedFormFit::formula() const {
  std::string text = fmt::format("{} ≈ {}", metric == "peak_allocated_bytes" ? "peak allocated" : "peak reserved",
                                 byte_text(a));
  text += signed_term(b, "·B");
  if (has_sequence) {
    text += signed_term(c, "·B·S");
    text += signed_term(d, "·B·S²");
  }
  return text;
}

int64_t ClosedFormFit::batch_for_budget(double budget_bytes, int64_t seq_len) const {
  double per_sample = predict(1, seq_len) - a;
  if (per_sample <= 0) return 0;
  double batch = std::floor((budget_bytes - a) / per_sample);
  return batch < 1 ? 0 : static_cast<int64_t>(std::min(batch, 1e15));
}

ClosedFormFit fit_closed_form(const Scenario& scenario, FitMetric metric, size_t jobs) {
  ClosedFormFit fit;
  fit.has_sequence = fits_sequence(scenario.model);
  fit.metric = metric == FitMetric::PeakAllocated ? "peak_allocated_bytes" : "peak_reserved_bytes";
  const int64_t B = scenario.batch_size, S = scenario.seq_len;
  std::vector<int64_t> batches = unique_positive({B / 4, B / 2, B, 2 * B});
  if (batches.size() < 3) batches = {1, 2, 3, 4};
  std::vector<int64_t> seqs = fit.has_sequence ? unique_positive({S / 4, S / 2, S}) : std::vector<int64_t>{S};
  for (int64_t batch : batches) {
    for (int64_t seq : seqs) fit.samples.push_back(FitSample{batch, seq, 0, 0});
  }
  // An unbounded device: the fit describes demand, not where the step would die.
  Scenario unbounded = scenario;
  sim::DeviceModel device = sim::DeviceModel::unlimited();
  device.context_bytes = scenario.device.model.context_bytes;
  unbounded.device.model = device;
  run_indexed(fit.samples.size(), jobs, [&](size_t i) {
    Scenario s = unbounded;
    s.batch_size = fit.samples[i].batch;
    s.seq_len = fit.samples[i].seq_len;
    Prediction prediction = predict(s);
    fit.samples[i].peak_bytes = static_cast<double>(
        metric == FitMetric::PeakAllocated ? prediction.peak_allocated_bytes : prediction.peak_reserved_bytes);
  });

  // With one sequence length the B·S and B·S² columns are multiples of B: fit a + b·B only.
  const bool use_sequence = fit.has_sequence && seqs.size() >= 3;
  const Eigen::Index columns = use_sequence ? 4 : 2;
  Eigen::MatrixXd design(static_cast<Eigen::Index>(fit.samples.size()), columns);
  Eigen::VectorXd peaks(static_cast<Eigen::Index>(fit.samples.size()));
  for (size_t i = 0; i < fit.samples.size(); ++i) {
    double b = static_cast<double>(fit.samples[i].batch), s = static_cast<double>(fit.samples[i].seq_len);
    auto row = static_cast<Eigen::Index>(i);
    design(row, 0) = 1.0;
    design(row, 1) = b;
    if (use_sequence) {
      design(row, 2) = b * s;
      design(row, 3) = b * s * s;
    }
    peaks(row) = fit.samples[i].peak_bytes;
  }
  Eigen::VectorXd scale = design.colwise().norm().transpose();
  for (Eigen::Index j = 0; j < columns; ++j) {
    if (scale(j) == 0.0) scale(j) = 1.0;
  }
  Eigen::MatrixXd scaled = design * scale.cwiseInverse().asDiagonal();
  Eigen::VectorXd solution = scaled.colPivHouseholderQr().solve(peaks).cwiseQuotient(scale);
  fit.a = solution(0);
  fit.b = solution(1);
  if (use_sequence) {
    fit.c = solution(2);
    fit.d = solution(3);
  }
  fit.has_sequence = use_sequence;
  for (auto& sample : fit.samples) {
    sample.fitted_bytes = fit.predict(sample.batch, sample.seq_len);
    double residual = std::fabs(sample.residual());
    fit.max_abs_residual_bytes = std::max(fit.max_abs_residual_bytes, residual);
    if (sample.peak_bytes > 0) fit.max_relative_residual = std::max(fit.max_relative_residual, residual / sample.peak_bytes);
  }
  return fit;
}

std::string render_fit_text(const ClosedFormFit& fit) {
  std::string text = "closed-form fit (least squares over " + std::to_string(fit.samples.size()) + " simulations):\n";
  text += "  " + fit.formula() + "\n";
  text += fit.has_sequence ? "  (B = batch_size, S = seq_len)\n" : "  (B = batch_size)\n";
  text += fmt::format("  {:>6} {:>7} {:>14} {:>14} {:>12}\n", "B", "S", "simulated", "formula", "residual");
  for (const auto& sample : fit.samples) {
    text += fmt::format("  {:>6} {:>7} {:>14} {:>14} {:>12}\n", sample.batch, sample.seq_len,
                        byte_text(sample.peak_bytes), byte_text(sample.fitted_bytes), byte_text(sample.residual()));
  }
  text += fmt::format("  worst residual {} ({:.2f}% of its peak)\n", byte_text(fit.max_abs_residual_bytes),
                      fit.max_relative_residual * 100.0);
  return text;
}

std::string render_fit_json(const ClosedFormFit& fit) {
  nlohmann::ordered_json json;
  json["formula"] = fit.formula();
  json["metric"] = fit.metric;
  json["has_sequence"] = fit.has_sequence;
  json["coefficients"] = {{"a", fit.a}, {"b", fit.b}, {"c", fit.c}, {"d", fit.d}};
  json["samples"] = nlohmann::ordered_json::array();
  for (const auto& sample : fit.samples) {
    json["samples"].push_back({{"batch", sample.batch},
                               {"seq_len", sample.seq_len},
                               {"peak_bytes", sample.peak_bytes},
                               {"fitted_bytes", sample.fitted_bytes},
                               {"residual_bytes", sample.residual()}});
  }
  json["max_abs_residual_bytes"] = fit.max_abs_residual_bytes;
  json["max_relative_residual"] = fit.max_relative_residual;
  return json.dump(2) + "\n";
}

}  // namespace oomcast::planner
