// LengthDistribution: the sequence lengths of a data set, read from a file, for `oomcast search
// --param seq_len --seq-len-distribution FILE`. Either a sample (one length a line) or a
// histogram ("LENGTH COUNT" a line: COUNT sequences of at most LENGTH tokens); `#` starts a
// comment. What it answers: the share of sequences up to a length, its quantiles, and the
// same for a micro-batch padded to its longest sequence.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace oomcast::advisor {

struct LengthDistribution {
  std::string source;                               // the file, for messages
  std::vector<std::pair<int64_t, double>> counts;   // (length, count), ascending, lengths distinct
  double total = 0;                                 // sum of the counts

  int64_t max_length() const { return counts.empty() ? 0 : counts.back().first; }
  double mean() const;
  // P(length <= `length`) for one sequence drawn from the data set.
  double cdf(int64_t length) const;
  // The smallest length L with cdf(L) >= q (q in (0, 1]).
  int64_t quantile(double q) const;
};

// Throws InputError with file and line for an unreadable file, a line that is not one or two
// positive integers, a length above 2^24 or no sequence at all.
LengthDistribution read_length_distribution(const std::string& path);
LengthDistribution parse_length_distribution(const std::string& text, const std::string& name);

// How a micro-batch of B sequences becomes one tensor.
enum class Batching {
  Pad,   // padded to its longest sequence (rounded up to pad_to_multiple_of)
  Pack,  // sequences concatenated into rows of a fixed length: every step has the same shape
};

// The padded length of a micro-batch of `batch` independent draws: max(lengths) rounded up to
// a multiple of `multiple`. P(padded <= length) = cdf(largest multiple <= length)^batch.
double padded_cdf(const LengthDistribution& lengths, int64_t length, int64_t batch, int64_t multiple);
int64_t padded_quantile(const LengthDistribution& lengths, double q, int64_t batch, int64_t multiple);

}  // namespace oomcast::advisor
