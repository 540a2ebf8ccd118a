// Reading a length distribution and the order statistics of a padded micro-batch.
#include "advisor/length_distribution.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "base/bounded_file.h"
#include "base/input_error.h"

namespace oomcast::advisor {

namespace {

constexpr int64_t kMaxLength = int64_t{1} << 24;  // the loader's bound on seq_len
constexpr double kMaxCount = 1e15;

bool read_positive(const std::string& token, double limit, double* out) {
  if (token.empty() || token.find_first_not_of("0123456789") != std::string::npos || token.size() > 16) return false;
  double value = std::stod(token);
  if (value < 1 || value > limit) return false;
  *out = value;
  return true;
}

// The largest multiple of `multiple` that is <= length (padding rounds lengths up to one).
int64_t round_down(int64_t length, int64_t multiple) { return multiple <= 1 ? length : length / multiple * multiple; }

}  // namespace

double LengthDistribution::mean() const {
  double sum = 0;
  for (const auto& [length, count] : counts) sum += static_cast<double>(length) * count;
  return total > 0 ? sum / total : 0.0;
}

double LengthDistribution::cdf(int64_t length) const {
  double below = 0;
  for (const auto& [l, count] : counts) {
    if (l > length) break;
    below += count;
  }
  return total > 0 ? std::min(1.0, below / total) : 0.0;
}

int64_t LengthDistribution::quantile(double q) const {
  double below = 0;
  for (const auto& [length, count] : counts) {
    below += count;
    // A relative tolerance so that q = 1 reaches the last length despite rounding.
    if (below >= q * total * (1.0 - 1e-12)) return length;
  }
  return max_length();
}

LengthDistribution parse_length_distribution(const std::string& text, const std::string& name) {
  LengthDistribution out;
  out.source = name;
  std::map<int64_t, double> counts;
  std::istringstream lines(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    std::vector<std::string> tokens;
    for (std::string token; fields >> token;) tokens.push_back(token);
    if (tokens.empty()) continue;
    const SourceLocation where{name, number, 0, -1};
    double length = 0, count = 1;
    if (tokens.size() > 2 || !read_positive(tokens[0], static_cast<double>(kMaxLength), &length) ||
        (tokens.size() == 2 && !read_positive(tokens[1], kMaxCount, &count))) {
      throw InputError(where, tokens[0],
                       "a length distribution line is LENGTH (one sequence) or LENGTH COUNT, positive integers "
                       "with LENGTH <= " + std::to_string(kMaxLength) + "; got '" + line + "'");
    }
    counts[static_cast<int64_t>(length)] += count;
    out.total += count;
  }
  if (counts.empty()) throw InputError(SourceLocation{name, 0, 0, -1}, "", "the length distribution has no sequence");
  out.counts.assign(counts.begin(), counts.end());
  return out;
}

LengthDistribution read_length_distribution(const std::string& path) {
  // Bounded: /dev/zero or a stream that never ends is refused at the limit, not read into memory.
  return parse_length_distribution(read_text_file(path, "--seq-len-distribution", "length distribution"), path);
}

double padded_cdf(const LengthDistribution& lengths, int64_t length, int64_t batch, int64_t multiple) {
  return std::pow(lengths.cdf(round_down(length, multiple)), static_cast<double>(batch));
}

int64_t padded_quantile(const LengthDistribution& lengths, double q, int64_t batch, int64_t multiple) {
  // P(max of B draws <= L) = cdf(L)^B >= q  <=>  cdf(L) >= q^(1/B); then round up.
  int64_t longest = lengths.quantile(std::pow(q, 1.0 / static_cast<double>(batch)));
  if (multiple <= 1) return longest;
  return (longest + multiple - 1) / multiple * multiple;
}

}  // namespace oomcast::advisor
