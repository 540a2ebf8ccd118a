// Tests of cuda_replay's plain C++ core against a fake GPU: which cudaMalloc/cudaFree calls a
// trace turns into, what is measured at the probes, that every path out frees everything,
// and the command line's exit codes (no GPU, bad input).
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include "sim/allocator_config.h"
#include "sim/trace_io.h"
#include "validate/cuda_replay_cli.h"
#include "validate/device_replay_plan.h"
#include "validate/device_replay_run.h"

namespace oomcast::validate {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// A GPU that rounds every cudaMalloc up to 2 MiB pages (as real ones do for these sizes),
// holds `context` bytes from the start and fails the malloc numbered `fail_at` (1-based).
class FakeDevice : public ReplayDevice {
 public:
  explicit FakeDevice(uint64_t context, size_t fail_at = 0) : used_(context), fail_at_(fail_at) {}
  std::optional<uint64_t> malloc(uint64_t bytes, std::string& error) override {
    if (++mallocs_ == fail_at_) {
      error = "cudaErrorMemoryAllocation (out of memory)";
      return std::nullopt;
    }
    uint64_t rounded = (bytes + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);
    uint64_t pointer = next_ += rounded;
    live_[pointer] = rounded;
    used_ += rounded;
    return pointer;
  }
  bool free(uint64_t pointer, std::string& error) override {
    auto found = live_.find(pointer);
    if (found == live_.end()) {
      error = "cudaErrorInvalidValue";
      return false;
    }
    used_ -= found->second;
    live_.erase(found);
    return true;
  }
  std::optional<uint64_t> used_bytes(std::string&) override { return used_; }
  size_t live() const { return live_.size(); }

 private:
  uint64_t used_;
  size_t fail_at_;
  size_t mallocs_ = 0;
  uint64_t next_ = 1ull << 40;
  std::map<uint64_t, uint64_t> live_;
};

sim::Trace trace_of(const std::string& text) { return sim::parse_trace_text("t.trace", text); }

const char* kTwoPhases =
    "mark setup\n"
    "alloc a 3000000\n"   // large pool: a 20 MiB segment
    "alloc b 1000\n"      // small pool: a 2 MiB segment
    "mark iter0/forward\n"
    "alloc c 30000000\n"  // its own segment, rounded to 2 MiB: 30 MiB
    "free c\n"
    "free a\n"
    "free b\n"
    "empty_cache\n"
    "mark teardown\n";

TEST_CASE("segment mode makes the simulator's cudaMalloc calls and no others", "[validate]") {
  DeviceReplayPlan plan = plan_segment_replay(trace_of(kTwoPhases), {});
  std::vector<uint64_t> mallocs;
  for (const auto& action : plan.actions) {
    if (action.kind == DeviceAction::Kind::Malloc) mallocs.push_back(action.bytes);
  }
  CHECK(mallocs == std::vector<uint64_t>{20 * kMiB, 2 * kMiB, 30 * kMiB});
  CHECK(plan.frees == 3);  // empty_cache returns all three segments
  CHECK(plan.predicted_peak_reserved_bytes == 20 * kMiB + 2 * kMiB + 30 * kMiB);
}

TEST_CASE("segment mode probes every mark and the end with the simulator's figures", "[validate]") {
  DeviceReplayPlan plan = plan_segment_replay(trace_of(kTwoPhases), {});
  std::vector<std::string> labels;
  std::vector<uint64_t> reserved;
  for (const auto& action : plan.actions) {
    if (action.kind != DeviceAction::Kind::Probe) continue;
    labels.push_back(action.label);
    reserved.push_back(action.predicted_reserved_bytes);
  }
  CHECK(labels == std::vector<std::string>{"setup", "iter0/forward", "teardown", "end"});
  CHECK(reserved == std::vector<uint64_t>{0, 22 * kMiB, 0, 0});
}

TEST_CASE("a device whose pages match the segments measures exactly the prediction", "[validate]") {
  FakeDevice device(300 * kMiB);
  ReplayRun run = run_plan(plan_segment_replay(trace_of(kTwoPhases), {}), device);
  REQUIRE_FALSE(run.failed);
  CHECK(run.baseline_used_bytes == 300 * kMiB);
  REQUIRE(run.probes.size() == 4);
  for (const auto& probe : run.probes) CHECK(probe.measured_reserved_bytes == probe.predicted_reserved_bytes);
  CHECK(run.probes[1].measured_phase_peak_bytes == 20 * kMiB + 2 * kMiB + 30 * kMiB);
  CHECK(run.measured_peak_bytes == run.predicted_peak_bytes);
  CHECK(device.live() == 0);
}

TEST_CASE("raw mode makes one cudaMalloc per allocation and the device's rounding shows", "[validate]") {
  DeviceReplayPlan plan = plan_raw_replay(trace_of(kTwoPhases));
  CHECK(plan.mallocs == 3);
  CHECK(plan.predicted_peak_reserved_bytes == 3'000'000 + 1000 + 30'000'000);
  FakeDevice device(0);
  ReplayRun run = run_plan(plan, device);
  REQUIRE(run.probes.size() == 4);
  CHECK(run.probes[1].predicted_reserved_bytes == 3'001'000);
  CHECK(run.probes[1].measured_reserved_bytes == 4 * kMiB + 2 * kMiB);  // 3 MB -> 4 MiB, 1000 B -> 2 MiB
}

TEST_CASE("a failed cudaMalloc stops the run and frees everything it holds", "[validate]") {
  FakeDevice device(0, 3);
  ReplayRun run = run_plan(plan_segment_replay(trace_of(kTwoPhases), {}), device);
  CHECK(run.failed);
  CHECK(run.error.find("cudaMalloc(31457280 B)") != std::string::npos);
  CHECK(run.mallocs_done == 2);
  CHECK(run.everything_freed);
  CHECK(device.live() == 0);
  CHECK(run_summary(run).find("FAILED") != std::string::npos);
}

TEST_CASE("expandable segments are refused by segment mode with a reason", "[validate]") {
  sim::AllocatorConfig config = sim::parse_alloc_conf("expandable_segments:True");
  CHECK_THROWS_WITH(plan_segment_replay(trace_of(kTwoPhases), config),
                    Catch::Contains("virtual memory API"));
}

TEST_CASE("the CSV has one row per probe with predicted and measured columns", "[validate]") {
  FakeDevice device(100);
  ReplayRun run = run_plan(plan_segment_replay(trace_of(kTwoPhases), {}), device);
  std::ostringstream csv;
  write_run_csv(csv, run, true);
  std::string text = csv.str();
  CHECK(text.rfind("mode,phase,event_index,predicted_allocated_bytes,predicted_reserved_bytes,measured_reserved_bytes,", 0) == 0);
  CHECK(text.find("segments,iter0/forward,3,3001344,23068672,23068672,") != std::string::npos);
}

// The runtime of a machine without a GPU, as cudaGetDeviceCount reports it there.
class NoGpu : public DeviceRuntime {
 public:
  std::optional<std::string> open(ContextMeasurement&) override {
    return std::string("cudaGetDeviceCount: cudaErrorNoDevice (no CUDA-capable device is detected)");
  }
  ReplayDevice& device() override { return device_; }
  FakeDevice device_{0};
};

class FakeGpu : public DeviceRuntime {
 public:
  std::optional<std::string> open(ContextMeasurement& m) override {
    m.gpu_name = "fake";
    m.compute_capability = 90;
    m.module_loading = "LAZY";
    m.used_after_init_bytes = 500 * kMiB;
    m.nvml_used_before_bytes = 10 * kMiB;
    m.nvml_used_after_bytes = 410 * kMiB;
    return std::nullopt;
  }
  ReplayDevice& device() override { return device_; }
  FakeDevice device_{500 * kMiB};
};

int run_cli(DeviceRuntime& runtime, std::vector<const char*> arguments, std::string& out, std::string& err) {
  arguments.insert(arguments.begin(), "cuda_replay");
  std::ostringstream out_stream, err_stream;
  int code = cuda_replay_main(static_cast<int>(arguments.size()), arguments.data(), runtime, out_stream, err_stream);
  out = out_stream.str();
  err = err_stream.str();
  return code;
}

TEST_CASE("without a GPU cuda_replay says so and exits 77 after checking its input", "[validate]") {
  NoGpu runtime;
  std::string out, err;
  std::string trace = std::string(OOMCAST_SOURCE_DIR) + "/tests/data/cli/oom.trace";
  CHECK(run_cli(runtime, {trace.c_str(), "--segments"}, out, err) == 77);
  CHECK(err.find("no usable CUDA GPU: cudaGetDeviceCount: cudaErrorNoDevice") != std::string::npos);
  CHECK(out.empty());
}

TEST_CASE("bad input is reported before the GPU is touched", "[validate]") {
  NoGpu runtime;
  std::string out, err;
  CHECK(run_cli(runtime, {"/nonexistent.trace"}, out, err) == 2);
  CHECK(run_cli(runtime, {"--bogus"}, out, err) == 2);
  CHECK(err.find("unknown option '--bogus'") != std::string::npos);
  CHECK(run_cli(runtime, {"--context", "x.trace"}, out, err) == 2);
}

TEST_CASE("the context is measured from NVML before and after when NVML answers", "[validate]") {
  FakeGpu runtime;
  std::string out, err;
  CHECK(run_cli(runtime, {"--context"}, out, err) == 0);
  CHECK(out.find("context,fake,90,0,0,LAZY,419430400,nvml_after_minus_before,") != std::string::npos);
  ContextMeasurement without_nvml;
  without_nvml.used_after_init_bytes = 600;
  CHECK(without_nvml.context_bytes() == 600);
  CHECK(without_nvml.context_method() == "memgetinfo_used_after_init_upper_bound");
}

TEST_CASE("both modes run in one call and share one CSV header", "[validate]") {
  FakeGpu runtime;
  std::string out, err;
  std::string trace = std::string(OOMCAST_SOURCE_DIR) + "/tests/data/cli/oom.trace";
  CHECK(run_cli(runtime, {trace.c_str(), "--segments", "--raw"}, out, err) == 0);
  size_t headers = 0;
  for (size_t at = out.find("mode,phase"); at != std::string::npos; at = out.find("mode,phase", at + 1)) ++headers;
  CHECK(headers == 1);
  CHECK(out.find("\nsegments,") != std::string::npos);
  CHECK(out.find("\nraw,") != std::string::npos);
  CHECK(err.find("cuda_replay: segments:") != std::string::npos);
}

}  // namespace
}  // namespace oomcast::validate
