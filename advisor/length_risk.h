// assess_length_risk(): what a sequence-length search means for a data set whose lengths vary.
// A job that pads each micro-batch to its longest sequence dies on the first micro-batch whose
// padded length does not fit, on whichever rank draws it: the tail of the distribution
// decides, not its mean. With B sequences a micro-batch, k accumulation steps and W ranks, one
// optimizer step draws B·k·W sequences, so P(step OOM) = 1 - P(length <= L*)^(B·k·W), L* the
// longest padded length that fits. Packing into fixed rows has one shape: it fits or it does not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "advisor/length_distribution.h"
#include "scenario/scenario.h"

namespace oomcast::advisor {

struct SearchResult;

struct LengthRiskOptions {
  Batching batching = Batching::Pad;
  int64_t pad_to_multiple_of = 1;
};

struct LengthRisk {
  std::string source;
  LengthRiskOptions options;
  int64_t batch_size = 1, accum_steps = 1, ranks = 1;
  int64_t pack_length = 0;             // Pack: the scenario's seq_len, the rows' length
  double mean_length = 0;
  int64_t p50 = 0, p90 = 0, p99 = 0, max_length = 0;                      // of one sequence
  int64_t padded_p50 = 0, padded_p90 = 0, padded_p99 = 0, padded_max = 0;  // of a padded micro-batch
  // The longest length known to fit; none when not even 1 does. When the search was
  // non-monotone, one below the first length that failed (conservative).
  std::optional<int64_t> safe_length;
  bool conservative = false;
  double sequences_longer = 0;         // share of sequences longer than safe_length (Pack: than a row)
  double micro_batch_risk = 0;         // P(a micro-batch does not fit)
  double step_risk = 0;                // P(some micro-batch of an optimizer step, on any rank, does not fit)
  double risk_per_1000_steps = 0;
  bool mean_fits = false;              // a micro-batch of mean-length sequences fits
};

// `scenario` is the one searched (its batch_size, grad_accum_steps, parallel.world_size and,
// for packing, seq_len as the row length).
LengthRisk assess_length_risk(const LengthDistribution& lengths, const SearchResult& search, const scenario::Scenario& scenario,
                              const LengthRiskOptions& options);

std::string render_length_risk_text(const LengthRisk& risk);
// {"source", "batching", "pad_to_multiple_of", "batch_size", "grad_accum_steps", "ranks",
//  "pack_length", "lengths": {mean, p50, p90, p99, max}, "padded": {p50, p90, p99, max},
//  "safe_length", "conservative", "sequences_longer", "micro_batch_risk", "step_risk",
//  "risk_per_1000_steps", "mean_fits"}
std::string render_length_risk_json(const LengthRisk& risk);

}  // namespace oomcast::advisor
