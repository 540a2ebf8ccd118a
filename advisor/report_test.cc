// Tests of the text and JSON reports, on Predictions written by hand so they do not depend
// on the planner's schedule.
#include "advisor/report.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "scenario/device_profiles.h"
#include "scenario/graph_file.h"

namespace oomcast::advisor {

using planner::TensorCategory;
using scenario::GraphFile;
using scenario::device_config_from_profile;
using scenario::find_device_profile;

namespace {

Prediction fitting_prediction() {
  Prediction p;
  p.scenario.source_path = "scenarios/x.yaml";
  p.scenario.model.name = "gpt2";
  p.scenario.model.family = "gpt2";
  p.scenario.device = device_config_from_profile(*find_device_profile("a100-80gb"));
  p.parameters = 124'439'808;
  p.device_total_bytes = p.scenario.device.model.total_bytes;
  p.usable_bytes = p.device_total_bytes - (512ull << 20);
  p.peak_allocated_bytes = 10ull << 30;
  p.peak_reserved_bytes = 12ull << 30;
  p.reserved_at_peak_bytes = 11ull << 30;
  p.peak_at.iteration = 1;
  p.peak_at.phase = "backward";
  p.peak_at.op = "lm_head";
  p.breakdown[static_cast<size_t>(TensorCategory::Parameter)] = 4ull << 30;
  p.breakdown[static_cast<size_t>(TensorCategory::Activation)] = 6ull << 30;
  p.phases.push_back({"iter0/forward", 0, 1ull << 30, 2ull << 30, 5ull << 30, 6ull << 30});
  p.phases.push_back({"iter0/backward", 0, 3ull << 30, 4ull << 30, 10ull << 30, 12ull << 30});
  return p;
}

TEST_CASE("the verdict of a fitting prediction states the spare memory", "[planner][report]") {
  CHECK(verdict_line(fitting_prediction()) ==
        "fits with 66.65 GiB to spare (peak reserved 12.00 GiB of 78.65 GiB usable on A100-80GB)");
}

TEST_CASE("the text report contains the verdict, the phase table, the peak and the breakdown", "[planner][report]") {
  std::string text = render_text(fitting_prediction());
  CHECK(text.find("fits with 66.65 GiB to spare") != std::string::npos);
  CHECK(text.find("checkpoint") != std::string::npos);
  CHECK(text.find("iter0/backward") != std::string::npos);
  CHECK(text.find("peak: 10.00 GiB allocated at iteration 1, phase backward, op lm_head") != std::string::npos);
  CHECK(text.find("breakdown at the peak:") != std::string::npos);
  CHECK(text.find("fragmentation at the peak: reserved - allocated = 1.00 GiB") != std::string::npos);
  CHECK(text.find("124,439,808 parameters") != std::string::npos);
}

TEST_CASE("a run of hundreds of phases prints the table's head, tail and highest peak, and counts the rest",
          "[planner][report]") {
  Prediction p = fitting_prediction();
  p.phases.clear();
  for (int i = 0; i < 200; ++i) {
    sim::Bytes peak = (i == 100 ? 9ull : 5ull) << 30;
    p.phases.push_back({"iter" + std::to_string(i) + "/decode", i, 1ull << 30, 2ull << 30, peak, peak});
  }
  std::string text = render_text(p);
  CHECK(text.find("iter0/decode") != std::string::npos);
  CHECK(text.find("iter199/decode") != std::string::npos);
  CHECK(text.find("iter100/decode") != std::string::npos);  // the highest peak is kept
  CHECK(text.find("iter50/decode") == std::string::npos);
  // 16 head rows, the peak's row and 8 tail rows: 175 left out, in two gaps (84 and 91).
  CHECK(text.find("... 84 phases not shown") != std::string::npos);
  CHECK(text.find("... 91 phases not shown") != std::string::npos);
}

TEST_CASE("the header of a graph-file CNN names image_size and no attention kernel", "[planner][report]") {
  Prediction p = fitting_prediction();
  auto graph = std::make_shared<GraphFile>();
  graph->image_size = true;  // no attention op in its forward
  p.scenario.model.graph = graph;
  p.scenario.model.family = "graph";
  p.scenario.seq_len = 64;
  std::string text = render_text(p);
  CHECK(text.find("image_size 64") != std::string::npos);
  CHECK(text.find("attention") == std::string::npos);
}

TEST_CASE("an OOM report prints PyTorch's exact error text", "[planner][report]") {
  Prediction p = fitting_prediction();
  p.fits = false;
  p.oom_message = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB";
  p.oom_at.phase = "forward";
  p.oom_at.op = "mlp.fc";
  p.peak_reserved_bytes = 90ull << 30;
  CHECK(verdict_line(p).rfind("OOM: the step needs 90.00 GiB reserved but 78.65 GiB is usable on A100-80GB", 0) == 0);
  std::string text = render_text(p);
  CHECK(text.find("torch.OutOfMemoryError: " + p.oom_message) != std::string::npos);
}

TEST_CASE("the JSON report has every key of the contract in docs/usage.md", "[planner][report]") {
  nlohmann::json json = nlohmann::json::parse(render_json(fitting_prediction()));
  for (const char* key : {"peak_allocated_bytes", "peak_reserved_bytes", "device_total_bytes", "fits", "oom_message",
                          "peak_at", "phases", "breakdown", "parameters"}) {
    INFO(key);
    CHECK(json.contains(key));
  }
  CHECK(json["oom_message"].is_null());
  CHECK(json["fits"] == true);
  CHECK(json["parameters"] == 124'439'808);
  CHECK(json["peak_at"]["phase"] == "backward");
  CHECK(json["peak_at"]["op"] == "lm_head");
  CHECK(json["peak_at"]["iteration"] == 1);
  REQUIRE(json["phases"].size() == 2);
  for (const char* key : {"name", "allocated_bytes", "reserved_bytes", "peak_allocated_bytes"}) {
    CHECK(json["phases"][0].contains(key));
  }
  CHECK(json["breakdown"]["parameter"] == 4ull << 30);
  CHECK(json["breakdown"]["activation"] == 6ull << 30);
}

// The fixture with the outside-allocator figures a loaded scenario would carry.
Prediction prediction_with_context() {
  Prediction p = fitting_prediction();
  p.scenario.device.cuda_version = 1204;
  p.scenario.device.module_loading = "lazy";
  p.scenario.device.cuda_context_bytes = 426ull << 20;
  p.scenario.device.model.context_bytes = (426ull << 20) + (264ull << 20);
  p.scenario.parallel.nccl_buffer_bytes = 264ull << 20;
  p.scenario.device.context_source = "scenario/outside_allocator.yaml context row 3 (measurement): a citation";
  return p;
}

TEST_CASE("the text report predicts nvidia-smi as reserved plus context plus NCCL, with the context's source",
          "[planner][report]") {
  std::string text = render_text(prediction_with_context());
  CHECK(text.find("nvidia-smi (this process, predicted): 12.67 GiB at the peak = reserved 12.00 GiB + CUDA context "
                  "426.00 MiB + NCCL buffers 264.00 MiB") != std::string::npos);
  CHECK(text.find("context   CUDA 12.4, lazy module loading: scenario/outside_allocator.yaml context row 3") !=
        std::string::npos);
}

TEST_CASE("a job that does not fit says what it would need, never an nvidia-smi reading", "[planner][report]") {
  Prediction p = prediction_with_context();
  p.fits = false;
  std::string text = render_text(p);
  CHECK(text.find("would need (this process, predicted; more than the device has): 12.67 GiB at the peak") !=
        std::string::npos);
  CHECK(text.find("nvidia-smi (this process") == std::string::npos);
}

TEST_CASE("the JSON report adds predicted device usage and the outside-allocator figures", "[planner][report]") {
  nlohmann::json json = nlohmann::json::parse(render_json(prediction_with_context()));
  uint64_t outside = (426ull << 20) + (264ull << 20);
  CHECK(json["predicted_device_used_bytes"] == (12ull << 30) + outside);
  CHECK(json["outside_allocator"]["cuda_context_bytes"] == 426ull << 20);
  CHECK(json["outside_allocator"]["nccl_buffer_bytes"] == 264ull << 20);
  CHECK(json["outside_allocator"]["cuda_version"] == "12.4");
  CHECK(json["outside_allocator"]["module_loading"] == "lazy");
  CHECK(json["phases"][1]["peak_device_used_bytes"] == (12ull << 30) + outside);
  CHECK(json["phases"][0]["device_used_bytes"] == (2ull << 30) + outside);
}

TEST_CASE("the cpu device has no predicted device usage", "[planner][report]") {
  Prediction p = fitting_prediction();
  p.scenario.device = device_config_from_profile(*find_device_profile("cpu"));
  nlohmann::json json = nlohmann::json::parse(render_json(p));
  CHECK(json["predicted_device_used_bytes"].is_null());
  CHECK_FALSE(json.contains("outside_allocator"));
  CHECK(render_text(p).find("nvidia-smi") == std::string::npos);
}

TEST_CASE("the JSON report of an OOM carries the message", "[planner][report]") {
  Prediction p = fitting_prediction();
  p.fits = false;
  p.oom_message = "CUDA out of memory. Tried to allocate 2.00 GiB.";
  nlohmann::json json = nlohmann::json::parse(render_json(p));
  CHECK(json["fits"] == false);
  CHECK(json["oom_message"] == p.oom_message);
}

}  // namespace
}  // namespace oomcast::advisor
