// Progress of long work (a long plan, a replay, a search, a whatif): the library says how far a
// loop has come; whoever installed a sink (the CLI, for a terminal) shows it. Nobody listens by
// default, so a report costs one atomic load in library use and in tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace oomcast {

struct ProgressEvent {
  std::string_view task;  // what the loop does: "replaying events", "search probes"
  uint64_t done = 0;
  uint64_t total = 0;     // 0: not known in advance (a search's probes)
  bool finished = false;  // the loop of `task` ended
};

using ProgressSink = std::function<void(const ProgressEvent&)>;

// Installs (or, with an empty function, removes) the process-wide sink. Not thread safe against
// concurrent reports: install before the work starts, remove after it ends.
void set_progress_sink(ProgressSink sink);

// Called from library loops, from any thread; the sink serialises and rate-limits. Loops nest
// (a search plans, a plan replays): a sink shows the outermost task, the first to report.
void report_progress(std::string_view task, uint64_t done, uint64_t total);
void end_progress(std::string_view task);

// A task that reports from its start (so the line follows it, not the loops it runs) and ends
// however its scope ends, by return or by exception.
class ScopedProgress {
 public:
  explicit ScopedProgress(std::string_view task, uint64_t total = 0) : task_(task) { report_progress(task_, 0, total); }
  ~ScopedProgress() { end_progress(task_); }
  ScopedProgress(const ScopedProgress&) = delete;
  ScopedProgress& operator=(const ScopedProgress&) = delete;

 private:
  std::string_view task_;  // a string literal: it outlives the scope
};

// The text of a one-line status: "replaying events 65536/1048576 (6%), 2.1 s", or without a
// known total "search probes 7, 3.0 s".
std::string format_progress_line(std::string_view task, uint64_t done, uint64_t total, double elapsed_seconds);

}  // namespace oomcast
