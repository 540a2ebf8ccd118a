// A progress line on stderr, redrawn in place at most ten times a second. Work that ends within
// a second draws nothing, so short commands stay quiet and piped output stays clean. Of nested
// loops (a search's probes, each probe's replay) the line follows the outermost: the first task
// to report owns the line until it ends.
#include "cli/terminal_progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "base/progress.h"

namespace oomcast::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct TerminalLine {
  std::mutex mutex;
  Clock::time_point started = Clock::now();
  Clock::duration quiet_start = std::chrono::seconds(1);  // nothing drawn before this
  Clock::time_point last_draw{};
  std::string owner;  // the task the line follows; empty: none
  size_t drawn_width = 0;

  void erase_locked() {
    if (drawn_width == 0) return;
    std::fprintf(stderr, "\r%s\r", std::string(drawn_width, ' ').c_str());
    std::fflush(stderr);
    drawn_width = 0;
  }

  void report(const ProgressEvent& event) {
    std::lock_guard<std::mutex> lock(mutex);
    if (owner.empty() && !event.finished) owner = std::string(event.task);
    if (event.task != owner) return;
    if (event.finished) {
      erase_locked();
      owner.clear();
      return;
    }
    Clock::time_point now = Clock::now();
    if (now - started < quiet_start) return;
    if (drawn_width > 0 && now - last_draw < std::chrono::milliseconds(100)) return;
    last_draw = now;
    std::string line = format_progress_line(event.task, event.done, event.total,
                                            std::chrono::duration<double>(now - started).count());
    const size_t width = line.size();
    if (width < drawn_width) line += std::string(drawn_width - width, ' ');
    std::fprintf(stderr, "\r%s", line.c_str());
    std::fflush(stderr);
    drawn_width = std::max(width, drawn_width);
  }
};

TerminalLine& terminal_line() {
  static TerminalLine line;
  return line;
}

}  // namespace

void install_terminal_progress() {
  // OOMCAST_PROGRESS=1 draws from the start even when stderr is not a terminal (how the CLI test
  // sees it); 0 never draws.
  const char* forced = std::getenv("OOMCAST_PROGRESS");
  const bool forced_on = forced && std::string(forced) == "1";
  const bool wanted = forced && *forced ? forced_on : isatty(STDERR_FILENO) == 1;
  if (!wanted) return;
  terminal_line().started = Clock::now();
  if (forced_on) terminal_line().quiet_start = Clock::duration::zero();
  set_progress_sink([](const ProgressEvent& event) { terminal_line().report(event); });
}

void erase_terminal_progress() {
  std::lock_guard<std::mutex> lock(terminal_line().mutex);
  terminal_line().erase_locked();
}

}  // namespace oomcast::cli
