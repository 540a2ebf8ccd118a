// HtmlReport: everything one self-contained HTML page shows (no network: inline SVG, CSS and
// JS): the timeline of allocated and reserved bytes with phases shaded, the device limit and
// the peak; the categories at the peak; the segment map at the peak; a table (what-if
// fixes). Built by html_report_plan.cc (plan, whatif) and html_report_replay.cc (replay);
// render_html() writes the page.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "advisor/timeline_recorder.h"

namespace oomcast::advisor {

struct HtmlPhase {
  std::string name;
  size_t first_event = 0;  // the mark's event; the phase runs to the next one
};

struct HtmlCategory {
  std::string name;   // "parameters", "activations", ..., "outside the allocator"
  uint64_t bytes = 0;
};

struct HtmlTable {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> numeric;  // per column: right-aligned
};

struct HtmlReport {
  std::string kind;                 // "plan", "replay", "whatif"
  std::string title;
  std::vector<std::pair<std::string, std::string>> facts;  // label, value lines under the title
  std::string verdict;
  bool fits = true;
  std::string oom_message;

  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  uint64_t device_total_bytes = 0;  // 0: no device (a trace replayed without a size)
  uint64_t usable_bytes = 0;        // the limit line; 0: none
  size_t events = 0;
  size_t peak_event = 0;
  std::string peak_label;           // what allocated at the peak: op, tensor, phase or frame
  size_t oom_event = SIZE_MAX;      // where the first allocation failed, when it did

  std::vector<TimelineBucket> timeline;
  std::vector<HtmlPhase> phases;
  std::vector<HtmlCategory> categories;    // stacked at the peak, from the device's bottom up
  std::vector<SegmentView> segments;       // at the peak
  std::vector<HtmlTable> tables;
  // What event i allocated (tensor, op, frame), for hovers over buckets and blocks.
  std::function<std::string(size_t event)> label_of;
};

// The whole page, starting with <!DOCTYPE html>.
std::string render_html(const HtmlReport& report);

// Writes the page to `path`; throws InputError naming the flag when it cannot.
void write_html_report(const HtmlReport& report, const std::string& path, const std::string& flag = "--html");

// The page's script and style sheet (html_report_script.cc), inlined by render_html.
const char* html_report_script();
const char* html_report_style();

}  // namespace oomcast::advisor
