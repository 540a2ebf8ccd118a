// Many-iteration planning cost: `oomcast plan scenarios/llama-2-70b-zero3-offload.yaml` at
// its own 3 iterations and at 1000, side by side. Each run is a child process, so its peak
// RSS (getrusage of the child) and wall time are its own. With the steady-state window the
// 1000-iteration run costs about what the 3-iteration one does. Prints one JSON line.
//   usage: long_plan_bench [long_iterations=1000]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "advisor/predict.h"
#include "scenario/scenario_loader.h"

using namespace oomcast;

namespace {

struct Run {
  int iterations = 0;
  double seconds = 0.0;
  double peak_rss_mib = 0.0;
  unsigned long long peak_reserved_bytes = 0;
  bool extrapolated = false;
};

// The child predicts and writes its answer to `pipe_fd`; the parent times it and reads its rusage.
Run measure(const std::string& scenario_path, int iterations) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  auto start = std::chrono::steady_clock::now();
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    scenario::Scenario scenario =
        scenario::load_scenario(scenario_path, {"iterations=" + std::to_string(iterations)});
    advisor::Prediction prediction = advisor::predict(scenario);
    std::string answer = std::to_string(prediction.peak_reserved_bytes) + " " +
                         (prediction.steady_state.extrapolated ? "1" : "0");
    if (write(fds[1], answer.data(), answer.size()) < 0) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  int status = 0;
  struct rusage usage {};
  wait4(child, &status, 0, &usage);
  Run run;
  run.iterations = iterations;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.peak_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux: KiB
  char buffer[64] = {};
  ssize_t n = read(fds[0], buffer, sizeof buffer - 1);
  close(fds[0]);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "long_plan_bench: the %d-iteration run failed\n", iterations);
    std::exit(1);
  }
  int extrapolated = 0;
  std::sscanf(buffer, "%llu %d", &run.peak_reserved_bytes, &extrapolated);
  run.extrapolated = extrapolated != 0;
  return run;
}

std::string json_of(const Run& run) {
  char text[256];
  std::snprintf(text, sizeof text,
                "{\"iterations\": %d, \"seconds\": %.2f, \"peak_rss_mib\": %.0f, \"peak_reserved_bytes\": %llu, "
                "\"extrapolated\": %s}",
                run.iterations, run.seconds, run.peak_rss_mib, run.peak_reserved_bytes,
                run.extrapolated ? "true" : "false");
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const int long_iterations = argc > 1 ? std::atoi(argv[1]) : 1000;
  const std::string path = std::string(OOMCAST_SOURCE_DIR) + "/scenarios/llama-2-70b-zero3-offload.yaml";
  Run short_run = measure(path, 3);
  Run long_run = measure(path, long_iterations);
  std::printf("{\"scenario\": \"scenarios/llama-2-70b-zero3-offload.yaml\", \"short\": %s, \"long\": %s, "
              "\"time_ratio\": %.2f, \"rss_ratio\": %.2f}\n",
              json_of(short_run).c_str(), json_of(long_run).c_str(), long_run.seconds / short_run.seconds,
              long_run.peak_rss_mib / short_run.peak_rss_mib);
  return 0;
}
