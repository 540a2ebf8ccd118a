// Per-phase bars: '█' up to the phase's peak allocated bytes, '░' from there up to its peak
// reserved bytes, '│' at the usable limit. The scale is the larger of the limit and the
// highest peak, so a step that does not fit draws past the limit marker.
#include "advisor/terminal_timeline.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "advisor/byte_text.h"

namespace oomcast::advisor {
namespace {

// A cpu device without a capacity has a usable size far beyond any schedule; no limit then.
constexpr sim::Bytes kNoLimit = 1ull << 59;

struct Row {
  std::string label;
  sim::Bytes peak_allocated = 0;
  sim::Bytes peak_reserved = 0;
};

std::vector<Row> merged_rows(const std::vector<PhaseRow>& phases, size_t max_rows) {
  size_t per_row = std::max<size_t>(1, (phases.size() + max_rows - 1) / std::max<size_t>(1, max_rows));
  std::vector<Row> rows;
  for (size_t begin = 0; begin < phases.size(); begin += per_row) {
    size_t end = std::min(phases.size(), begin + per_row);
    Row row;
    row.label = phases[begin].name;
    if (end - begin > 1) row.label += fmt::format(" (+{})", end - begin - 1);
    for (size_t i = begin; i < end; ++i) {
      row.peak_allocated = std::max(row.peak_allocated, phases[i].peak_allocated_bytes);
      row.peak_reserved = std::max(row.peak_reserved, std::max(phases[i].peak_reserved_bytes, phases[i].peak_allocated_bytes));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

size_t columns(sim::Bytes bytes, double scale, size_t width) {
  if (scale <= 0.0) return 0;
  double cells = static_cast<double>(bytes) / scale * static_cast<double>(width);
  size_t count = static_cast<size_t>(std::lround(cells));
  if (bytes > 0 && count == 0) count = 1;  // a phase that holds anything shows at least a sliver
  return std::min(count, width);
}

std::string cut(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  return text.substr(0, width - 1) + "~";
}

}  // namespace

std::string terminal_timeline(const Prediction& prediction, const TerminalTimelineOptions& options) {
  if (prediction.phases.empty() || options.bar_width == 0) return "";
  std::vector<Row> rows = merged_rows(prediction.phases, options.max_rows);
  const bool has_limit = prediction.usable_bytes > 0 && prediction.usable_bytes < kNoLimit;
  sim::Bytes highest = 0;
  for (const Row& row : rows) highest = std::max(highest, row.peak_reserved);
  double scale = static_cast<double>(std::max(highest, has_limit ? prediction.usable_bytes : sim::Bytes{0}));
  const size_t width = options.bar_width;
  const size_t limit_column = has_limit ? columns(prediction.usable_bytes, scale, width) : width + 1;

  size_t label_width = 10;
  for (const Row& row : rows) label_width = std::max(label_width, std::min<size_t>(row.label.size(), 28));

  std::string text = fmt::format("timeline per phase: █ peak allocated, ░ peak reserved{}\n",
                                 has_limit ? fmt::format(", │ usable {}", byte_text(prediction.usable_bytes)) : "");
  for (const Row& row : rows) {
    size_t allocated = columns(row.peak_allocated, scale, width);
    size_t reserved = std::max(allocated, columns(row.peak_reserved, scale, width));
    std::string bar;
    for (size_t column = 0; column <= width; ++column) {
      if (column == limit_column) bar += "│";
      if (column == width) break;
      bar += column < allocated ? "█" : column < reserved ? "░" : " ";
    }
    bool over = has_limit && row.peak_reserved > prediction.usable_bytes;
    text += fmt::format("  {:<{}} {} {:>10} / {:>10}{}\n", cut(row.label, 28), label_width, bar,
                        byte_text(row.peak_allocated), byte_text(row.peak_reserved), over ? "  over the limit" : "");
  }
  return text;
}

}  // namespace oomcast::advisor
