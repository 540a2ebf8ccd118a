// run_indexed(): runs fn(0..count-1) on up to `jobs` std::threads, handing out indices one at a
// time (evaluations differ a lot in cost, so static chunks would leave cores idle).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace oomcast::advisor {

// The default worker count: every hardware thread, at least one.
inline size_t default_jobs() { return std::max<size_t>(1, std::thread::hardware_concurrency()); }

// Calls fn(i) for every i in [0, count), in parallel. fn must only touch index i's own output.
// The first exception thrown by any fn is rethrown here after all workers stop.
template <typename Fn>
void run_indexed(size_t count, size_t jobs, Fn&& fn) {
  jobs = std::max<size_t>(1, std::min(jobs, count));
  if (jobs == 1) {
    for (size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (size_t i = next++; i < count && !failed; i = next++) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(jobs - 1);
  for (size_t j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();
  for (auto& thread : threads) thread.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace oomcast::advisor
