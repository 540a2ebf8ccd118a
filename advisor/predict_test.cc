// Tests of predict(): hand-made schedules pin the peak attribution and the cpu accounting;
// every bundled scenario under scenarios/ loads and predicts.
#include "advisor/predict.h"

#include <chrono>
#include <filesystem>
#include <numeric>

#include <catch2/catch.hpp>

#include "scenario/device_profiles.h"
#include "scenario/scenario_loader.h"

namespace oomcast::advisor {

using planner::EventInfo;
using planner::PlannedTrace;
using planner::TensorCategory;
using scenario::Scenario;
using scenario::device_config_from_profile;
using scenario::find_device_profile;
using scenario::load_scenario;

namespace {

// A PlannedTrace written by hand: a parameter, an activation and a temporary, with marks.
struct HandTrace {
  sim::TraceBuilder builder;
  PlannedTrace planned;

  HandTrace() { planned.names = {""}; }
  uint32_t name(const std::string& text) {
    planned.names.push_back(text);
    return static_cast<uint32_t>(planned.names.size() - 1);
  }
  void push(TensorCategory category, const std::string& op, int32_t iteration = 0) {
    EventInfo info;
    info.iteration = iteration;
    info.op = name(op);
    info.category = category;
    planned.info.push_back(info);
  }
  void alloc(const std::string& id, sim::Bytes bytes, TensorCategory category, const std::string& op) {
    builder.alloc(id, bytes);
    push(category, op);
  }
  void free(const std::string& id) {
    builder.free(id);
    push(TensorCategory::Activation, "free " + id);
  }
  void mark(const std::string& label) {
    builder.mark(label);
    push(TensorCategory::Activation, "");
  }
  const PlannedTrace& take() {
    planned.trace = builder.take();
    return planned;
  }
};

PlannedTrace small_step() {
  HandTrace hand;
  hand.mark("start");
  hand.alloc("w", 1000, TensorCategory::Parameter, "init");
  hand.mark("forward");
  hand.alloc("act", 3000, TensorCategory::Activation, "linear");
  hand.alloc("tmp", 600, TensorCategory::Temporary, "gelu");
  hand.free("tmp");
  hand.free("act");
  hand.mark("end");
  return hand.take();
}

Scenario scenario_on(const char* profile) {
  Scenario scenario;
  scenario.device = device_config_from_profile(*find_device_profile(profile));
  return scenario;
}

TEST_CASE("the peak is attributed to the op that set it, with live bytes by category", "[planner][predict]") {
  Prediction p = predict_planned(scenario_on("a100-80gb"), small_step());
  CHECK(p.fits);
  CHECK(p.peak_at.op == "gelu");
  CHECK(p.breakdown[static_cast<size_t>(TensorCategory::Parameter)] == 1000);
  CHECK(p.breakdown[static_cast<size_t>(TensorCategory::Activation)] == 3000);
  CHECK(p.breakdown[static_cast<size_t>(TensorCategory::Temporary)] == 600);
  // Blocks are rounded to 512 B: 1024 + 3072 + 1024.
  CHECK(p.peak_allocated_bytes == 5120);
  CHECK(p.rounding_bytes == 5120 - 4600);
}

TEST_CASE("the breakdown plus rounding sums to the allocated peak", "[planner][predict]") {
  Prediction p = predict_planned(scenario_on("a100-80gb"), small_step());
  sim::Bytes sum = std::accumulate(p.breakdown.begin(), p.breakdown.end(), sim::Bytes{0}) + p.rounding_bytes;
  CHECK(sum == p.peak_allocated_bytes);
}

TEST_CASE("phase rows follow the trace's marks", "[planner][predict]") {
  Prediction p = predict_planned(scenario_on("a100-80gb"), small_step());
  REQUIRE(p.phases.size() == 3);
  CHECK(p.phases[0].name == "start");
  CHECK(p.phases[1].name == "forward");
  CHECK(p.phases[1].allocated_bytes == 1024);
  CHECK(p.phases[1].peak_allocated_bytes == 5120);
  CHECK(p.phases[2].allocated_bytes == 1024);
}

TEST_CASE("on the cpu device every block is exactly its request", "[planner][predict]") {
  Prediction p = predict_planned(scenario_on("cpu"), small_step());
  CHECK(p.exact_accounting);
  CHECK(p.peak_allocated_bytes == 4600);
  CHECK(p.peak_reserved_bytes == 4600);
  CHECK(p.rounding_bytes == 0);
  CHECK(p.peak_at.op == "gelu");
  REQUIRE(p.phases.size() == 3);
  CHECK(p.phases[1].peak_allocated_bytes == 4600);
  CHECK(p.phases[2].allocated_bytes == 1000);
}

TEST_CASE("a schedule larger than the device is an OOM with PyTorch's message", "[planner][predict]") {
  HandTrace hand;
  hand.alloc("huge", 100ull << 30, TensorCategory::Activation, "matmul");
  Prediction p = predict_planned(scenario_on("a100-80gb"), hand.take());
  CHECK_FALSE(p.fits);
  CHECK(p.oom_message.rfind("CUDA out of memory. Tried to allocate 100.00 GiB.", 0) == 0);
  CHECK(p.oom_at.op == "matmul");
  CHECK(p.peak_reserved_bytes >= (100ull << 30));  // the demand, from the unbounded replay
  CHECK(p.spare_bytes() < 0);
}

TEST_CASE("spare memory is what the allocator can still reserve after the context", "[planner][predict]") {
  Scenario scenario = scenario_on("a100-80gb");
  Prediction p = predict_planned(scenario, small_step());
  CHECK(p.usable_bytes == scenario.device.model.total_bytes - scenario.device.model.context_bytes);
  CHECK(scenario.device.model.context_bytes == scenario.device.cuda_context_bytes);  // one GPU: no NCCL
  CHECK(p.spare_bytes() == static_cast<int64_t>(p.usable_bytes - p.peak_reserved_bytes));
}

std::vector<std::string> bundled_scenarios() {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(OOMCAST_SOURCE_DIR) + "/scenarios")) {
    if (entry.path().extension() == ".yaml") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST_CASE("every scenario under scenarios/ loads and predicts", "[planner][predict][scenarios]") {
  std::vector<std::string> paths = bundled_scenarios();
  CHECK(paths.size() >= 8);
  for (const auto& path : paths) {
    INFO(path);
    Prediction p = predict(load_scenario(path));
    CHECK(p.parameters > 0);
    CHECK(p.peak_allocated_bytes > 0);
    CHECK(p.peak_reserved_bytes >= p.peak_allocated_bytes);
    CHECK(!p.phases.empty());
    CHECK(p.fits == p.oom_message.empty());
  }
}

TEST_CASE("fp32 AdamW Llama-2-7B on an A100-80GB is an OOM with PyTorch's text", "[planner][predict][scenarios]") {
  Prediction p = predict(load_scenario(std::string(OOMCAST_SOURCE_DIR) + "/scenarios/llama-2-7b-fp32-adamw-oom.yaml"));
  CHECK_FALSE(p.fits);
  CHECK(p.oom_message.rfind("CUDA out of memory. Tried to allocate", 0) == 0);
  CHECK(p.oom_message.find("GPU 0 has a total capacity of 79.15 GiB") != std::string::npos);
}

TEST_CASE("the README's GPT-2 scenario fits and predicts well under a second", "[planner][predict][scenarios]") {
  auto start = std::chrono::steady_clock::now();
  Prediction p = predict(load_scenario(std::string(OOMCAST_SOURCE_DIR) + "/scenarios/gpt2-small-b8-amp-bf16.yaml"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(p.fits);
  CHECK(p.parameters == 124'439'808);
  CHECK(seconds < 1.0);
}

}  // namespace
}  // namespace oomcast::advisor
