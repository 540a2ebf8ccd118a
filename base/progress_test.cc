// Tests of the progress sink: reports reach an installed sink and nothing else.
#include "base/progress.h"

#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace oomcast {
namespace {

TEST_CASE("progress reports reach the installed sink in order", "[base][progress]") {
  std::vector<std::string> seen;
  set_progress_sink([&](const ProgressEvent& event) {
    seen.push_back(std::string(event.task) + " " + std::to_string(event.done) + "/" + std::to_string(event.total) +
                   (event.finished ? " end" : ""));
  });
  report_progress("replay", 1, 4);
  report_progress("replay", 4, 4);
  end_progress("replay");
  set_progress_sink({});
  CHECK(seen == std::vector<std::string>{"replay 1/4", "replay 4/4", "replay 0/0 end"});
}

TEST_CASE("progress reports without a sink are dropped", "[base][progress]") {
  int calls = 0;
  set_progress_sink([&](const ProgressEvent&) { ++calls; });
  set_progress_sink({});
  report_progress("search", 1, 0);
  end_progress("search");
  CHECK(calls == 0);
}

TEST_CASE("a scoped task reports its start and its end, also when the scope throws", "[base][progress]") {
  std::vector<std::string> seen;
  set_progress_sink([&](const ProgressEvent& event) {
    seen.push_back(std::string(event.task) + (event.finished ? " end" : " start"));
  });
  try {
    ScopedProgress task("search probes");
    throw std::runtime_error("the scenario failed to load");
  } catch (const std::runtime_error&) {
  }
  set_progress_sink({});
  CHECK(seen == std::vector<std::string>{"search probes start", "search probes end"});
}

TEST_CASE("a progress line gives the count, the share done, the time so far and the time left at that pace", "[base][progress]") {
  CHECK(format_progress_line("replaying events", 65536, 1048576, 2.14) ==
        "replaying events 65536/1048576 (6%), 2.1 s, about 32 s left");
  CHECK(format_progress_line("search probes", 30, 30, 3.0) == "search probes 30/30 (100%), 3.0 s");
  CHECK(format_progress_line("search probes", 7, 0, 3.0) == "search probes 7, 3.0 s");
}

}  // namespace
}  // namespace oomcast
