// Tests of the per-phase terminal timeline, on Predictions written by hand.
#include "advisor/terminal_timeline.h"

#include <catch2/catch.hpp>

#include <sstream>

namespace oomcast::advisor {
namespace {

constexpr sim::Bytes kGiB = 1ull << 30;

Prediction two_phases(sim::Bytes usable) {
  Prediction p;
  p.usable_bytes = usable;
  p.phases.push_back({"iter0/forward", 0, 1 * kGiB, 2 * kGiB, 4 * kGiB, 5 * kGiB});
  p.phases.push_back({"iter0/backward", 0, 3 * kGiB, 4 * kGiB, 8 * kGiB, 10 * kGiB});
  return p;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST_CASE("each phase's bar is as long as its peaks on the scale of the usable memory", "[advisor][timeline]") {
  TerminalTimelineOptions options;
  options.bar_width = 20;
  std::vector<std::string> lines = lines_of(terminal_timeline(two_phases(20 * kGiB), options));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].find("usable 20.00 GiB") != std::string::npos);
  // backward: 8 of 20 GiB allocated -> 8 cells, 10 reserved -> 2 more, the limit at the end.
  CHECK(count(lines[2], "█") == 8);
  CHECK(count(lines[2], "░") == 2);
  CHECK(count(lines[2], "│") == 1);
  CHECK(lines[2].find("8.00 GiB /  10.00 GiB") != std::string::npos);
  CHECK(lines[2].find("over the limit") == std::string::npos);
}

TEST_CASE("a phase that needs more than the usable memory draws past the limit and says so", "[advisor][timeline]") {
  TerminalTimelineOptions options;
  options.bar_width = 20;
  std::vector<std::string> lines = lines_of(terminal_timeline(two_phases(5 * kGiB), options));
  REQUIRE(lines.size() == 3);
  // The scale is the 10 GiB peak; the 5 GiB limit sits in the middle of the bar.
  size_t limit = lines[2].find("│");
  size_t last_cell = lines[2].rfind("░");
  REQUIRE(limit != std::string::npos);
  CHECK(last_cell > limit);
  CHECK(lines[2].find("over the limit") != std::string::npos);
  CHECK(lines[1].find("over the limit") == std::string::npos);
}

TEST_CASE("more phases than rows are merged into consecutive groups keeping the highest peak", "[advisor][timeline]") {
  Prediction p;
  p.usable_bytes = 100 * kGiB;
  for (int i = 0; i < 10; ++i) {
    sim::Bytes peak = (i == 7 ? 50 : 10) * kGiB;
    p.phases.push_back({"phase" + std::to_string(i), 0, 0, 0, peak, peak});
  }
  TerminalTimelineOptions options;
  options.max_rows = 4;
  std::vector<std::string> lines = lines_of(terminal_timeline(p, options));
  REQUIRE(lines.size() == 5);  // header + ceil(10 / 3) = 4 rows of 3, 3, 3 and 1 phases
  CHECK(lines[1].find("phase0 (+2)") != std::string::npos);
  CHECK(lines[3].find("phase6 (+2)") != std::string::npos);
  CHECK(lines[3].find("50.00 GiB") != std::string::npos);
  CHECK(lines[4].find("phase9 ") != std::string::npos);
}

TEST_CASE("a device without a capacity draws no limit marker", "[advisor][timeline]") {
  std::string text = terminal_timeline(two_phases(1ull << 62));
  CHECK(text.find("│") == std::string::npos);
  CHECK(text.find("usable") == std::string::npos);
}

TEST_CASE("a prediction without phases has no timeline", "[advisor][timeline]") {
  CHECK(terminal_timeline(Prediction{}).empty());
}

}  // namespace
}  // namespace oomcast::advisor
