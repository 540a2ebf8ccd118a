// render_html(): the page skeleton with the key numbers as plain HTML (readable with
// scripts off, and checkable in the DOM), the tables, and the drawing data as one JSON
// block that the inline script turns into SVG.
#include "advisor/html_report.h"

#include <fstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "advisor/byte_text.h"
#include "base/input_error.h"

namespace oomcast::advisor {
namespace {

using Json = nlohmann::json;

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Interns the labels the hovers show, so a repeated op name is written once.
class LabelTable {
 public:
  explicit LabelTable(const std::function<std::string(size_t)>& label_of) : label_of_(label_of) {}
  int64_t index_of_event(size_t event) {
    if (!label_of_ || event == SIZE_MAX) return -1;
    return index_of(label_of_(event));
  }
  int64_t index_of(const std::string& label) {
    if (label.empty()) return -1;
    auto [it, inserted] = index_.try_emplace(label, labels_.size());
    if (inserted) labels_.push_back(label);
    return static_cast<int64_t>(it->second);
  }
  Json json() const { return Json(labels_); }

 private:
  const std::function<std::string(size_t)>& label_of_;
  std::unordered_map<std::string, size_t> index_;
  std::vector<std::string> labels_;
};

Json drawing_data(const HtmlReport& report) {
  LabelTable labels(report.label_of);
  Json data;
  data["kind"] = report.kind;
  data["events"] = report.events;
  data["peak_event"] = report.peak_event;
  data["peak_allocated"] = report.peak_allocated_bytes;
  data["peak_reserved"] = report.peak_reserved_bytes;
  data["usable"] = report.usable_bytes;
  data["total"] = report.device_total_bytes;
  data["peak_label"] = report.peak_label;
  data["oom_event"] = report.oom_event == SIZE_MAX ? Json(nullptr) : Json(report.oom_event);
  Json buckets = Json::array();
  for (const TimelineBucket& b : report.timeline) {
    buckets.push_back(Json::array({b.first_event, b.last_event, b.min_allocated, b.max_allocated, b.min_reserved,
                                   b.max_reserved, b.max_allocated_event, labels.index_of_event(b.max_allocated_event)}));
  }
  data["buckets"] = std::move(buckets);
  Json phases = Json::array();
  for (const HtmlPhase& phase : report.phases) phases.push_back(Json::array({phase.name, phase.first_event}));
  data["phases"] = std::move(phases);
  Json categories = Json::array();
  for (const HtmlCategory& category : report.categories)
    categories.push_back(Json::array({category.name, category.bytes}));
  data["categories"] = std::move(categories);
  Json segments = Json::array();
  for (const SegmentView& segment : report.segments) {
    Json pieces = Json::array();
    for (const SegmentPiece& piece : segment.pieces) {
      pieces.push_back(Json::array({piece.size, static_cast<int>(piece.state), piece.blocks, piece.allocated_bytes,
                                    labels.index_of_event(piece.alloc_event)}));
    }
    segments.push_back(Json::array({segment.address, segment.size, segment.small_pool, std::move(pieces)}));
  }
  data["segments"] = std::move(segments);
  data["labels"] = labels.json();
  return data;
}

std::string number_card(const char* id, const char* label, uint64_t bytes, const std::string& note = "") {
  return fmt::format(
      "<div class=\"card\" id=\"{}\" data-bytes=\"{}\"><div class=\"label\">{}</div><div class=\"value\">{}</div>"
      "<div class=\"exact\">{} bytes{}</div></div>\n",
      id, bytes, label, escape(byte_text(bytes)), bytes, note.empty() ? "" : " · " + escape(note));
}

std::string table_html(const HtmlTable& table) {
  std::string html = fmt::format("<section><h2>{}</h2><table class=\"data\"><thead><tr>", escape(table.title));
  for (size_t c = 0; c < table.header.size(); ++c) {
    bool numeric = c < table.numeric.size() && table.numeric[c];
    html += fmt::format("<th{}>{}</th>", numeric ? " class=\"num\"" : "", escape(table.header[c]));
  }
  html += "</tr></thead><tbody>\n";
  for (const auto& row : table.rows) {
    html += "<tr>";
    for (size_t c = 0; c < row.size(); ++c) {
      bool numeric = c < table.numeric.size() && table.numeric[c];
      html += fmt::format("<td{}>{}</td>", numeric ? " class=\"num\"" : "", escape(row[c]));
    }
    html += "</tr>\n";
  }
  return html + "</tbody></table></section>\n";
}

// Inside <script>, only "</" can end the element early; JSON allows "<\/" for it.
std::string script_safe(std::string json) {
  for (size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) json.insert(at + 1, "\\");
  return json;
}

}  // namespace

std::string render_html(const HtmlReport& report) {
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += fmt::format("<title>oomcast {}: {}</title>\n", escape(report.kind), escape(report.title));
  html += fmt::format("<style>\n{}</style>\n</head>\n<body>\n", html_report_style());
  html += fmt::format("<header><div class=\"tool\">oomcast {}</div><h1>{}</h1>\n", escape(report.kind),
                      escape(report.title));
  html += fmt::format("<p class=\"verdict {}\">{}</p>\n", report.fits ? "fits" : "oom", escape(report.verdict));
  if (!report.facts.empty()) {
    html += "<dl class=\"facts\">";
    for (const auto& [label, value] : report.facts)
      html += fmt::format("<dt>{}</dt><dd>{}</dd>", escape(label), escape(value));
    html += "</dl>\n";
  }
  html += "</header>\n<section class=\"cards\">\n";
  html += number_card("peak-allocated", "peak allocated", report.peak_allocated_bytes,
                      report.peak_label.empty() ? "" : "at " + report.peak_label);
  html += number_card("peak-reserved", "peak reserved", report.peak_reserved_bytes);
  if (report.device_total_bytes > 0) {
    html += number_card("device-total", "device total", report.device_total_bytes);
    html += number_card("usable", "usable by the allocator", report.usable_bytes);
  }
  html += "</section>\n";
  html += "<section><h2>Timeline: allocated and reserved bytes, event by event</h2>"
          "<div id=\"timeline\" class=\"chart\"></div>"
          "<p class=\"note\" id=\"timeline-note\"></p></section>\n";
  html += "<section><h2>At the peak: what holds the device's memory</h2><div id=\"categories\" class=\"chart\"></div>"
          "</section>\n";
  html += "<section><h2>Segment map at the peak</h2><div id=\"segments\" class=\"chart\"></div>"
          "<p class=\"note\" id=\"segments-note\"></p></section>\n";
  for (const HtmlTable& table : report.tables) html += table_html(table);
  if (!report.oom_message.empty()) {
    html += fmt::format("<section><h2>PyTorch would raise</h2><pre class=\"oom-text\">{}</pre></section>\n",
                        escape(report.oom_message));
  }
  html += "<div id=\"tooltip\" hidden></div>\n<div id=\"script-status\" data-status=\"not run\"></div>\n";
  std::string data = drawing_data(report).dump(-1, ' ', false, Json::error_handler_t::replace);
  html += "<script type=\"application/json\" id=\"report-data\">" + script_safe(std::move(data)) + "</script>\n";
  html += fmt::format("<script>\n{}</script>\n</body>\n</html>\n", html_report_script());
  return html;
}

void write_html_report(const HtmlReport& report, const std::string& path, const std::string& flag) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw InputError({path, 0, 0, -1}, flag, "cannot write the HTML report");
  std::string html = render_html(report);
  out.write(html.data(), static_cast<std::streamsize>(html.size()));
  if (!out) throw InputError({path, 0, 0, -1}, flag, "cannot write the HTML report");
}

}  // namespace oomcast::advisor
