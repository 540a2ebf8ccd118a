// The process-wide progress sink behind report_progress (see progress.h).
#include "base/progress.h"

#include <atomic>
#include <cstdio>
#include <utility>

namespace oomcast {
namespace {

ProgressSink& sink_storage() {
  static ProgressSink sink;
  return sink;
}

std::atomic<bool> sink_installed{false};

}  // namespace

void set_progress_sink(ProgressSink sink) {
  sink_installed.store(false, std::memory_order_release);
  sink_storage() = std::move(sink);
  sink_installed.store(static_cast<bool>(sink_storage()), std::memory_order_release);
}

void report_progress(std::string_view task, uint64_t done, uint64_t total) {
  if (!sink_installed.load(std::memory_order_acquire)) return;
  sink_storage()(ProgressEvent{task, done, total, false});
}

void end_progress(std::string_view task) {
  if (!sink_installed.load(std::memory_order_acquire)) return;
  sink_storage()(ProgressEvent{task, 0, 0, true});
}

std::string format_progress_line(std::string_view task, uint64_t done, uint64_t total, double elapsed_seconds) {
  char numbers[96];
  if (total > 0) {
    std::snprintf(numbers, sizeof numbers, " %llu/%llu (%llu%%), %.1f s", static_cast<unsigned long long>(done),
                  static_cast<unsigned long long>(total), static_cast<unsigned long long>(100 * done / total),
                  elapsed_seconds);
    // Time left at the pace so far, once there is a pace to go by ("..., 2.1 s, about 32 s left").
    if (done > 0 && done < total && elapsed_seconds > 0.0) {
      const double left = elapsed_seconds * static_cast<double>(total - done) / static_cast<double>(done);
      char eta[48];
      std::snprintf(eta, sizeof eta, ", about %.0f s left", left);
      return std::string(task) + numbers + eta;
    }
  } else {
    std::snprintf(numbers, sizeof numbers, " %llu, %.1f s", static_cast<unsigned long long>(done), elapsed_seconds);
  }
  return std::string(task) + numbers;
}

}  // namespace oomcast
