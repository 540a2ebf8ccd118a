// Adds a real snapshot's analysis to its replay page: categories from the frames instead of
// the allocator's plain "allocated", and the largest live allocations at the peak by call site.
#include <fmt/format.h>

#include "advisor/byte_text.h"
#include "advisor/html_report_replay.h"

namespace oomcast::advisor {

void add_snapshot_analysis(HtmlReport& report, const SnapshotAnalysis& analysis, size_t top) {
  std::vector<HtmlCategory> categories;
  for (const SiteBytes& row : analysis.categories) categories.push_back({row.where.site, row.bytes});
  for (const HtmlCategory& category : report.categories)
    if (category.name != "allocated") categories.push_back(category);
  report.categories = std::move(categories);
  report.facts.emplace_back("peak from", call_site_text(analysis.peak_site));

  HtmlTable table;
  table.title = "Largest live allocations at the peak, by call site";
  table.header = {"bytes", "share of the peak", "blocks", "call site", "via"};
  table.numeric = {true, true, true, false, false};
  double total = analysis.peak_allocated_bytes > 0 ? static_cast<double>(analysis.peak_allocated_bytes) : 1.0;
  for (size_t i = 0; i < analysis.live_at_peak.size() && i < top; ++i) {
    const SiteBytes& row = analysis.live_at_peak[i];
    table.rows.push_back({byte_text(row.bytes), fmt::format("{:.1f}%", 100.0 * static_cast<double>(row.bytes) / total),
                          fmt::format("{}", row.blocks), row.where.site, row.where.via});
  }
  report.tables.push_back(std::move(table));
}

}  // namespace oomcast::advisor
