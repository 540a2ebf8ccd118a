// Tests for the transformer_encoder family (nn.TransformerEncoder classifiers): parameter
// counts as PyTorch reports them, and the template layer the constructor deep-copies.
#include <catch2/catch.hpp>

#include "planner/families/families.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::ModelConfig;
using oomcast::scenario::OptimizerType;
using oomcast::scenario::Scenario;
using oomcast::scenario::resolve_model;
using oomcast::planner::families::parameter_count;
using oomcast::scenario::testing::inline_model;

namespace {

ModelConfig tiny_encoder(std::map<std::string, std::string> options = {}) {
  return inline_model("transformer_encoder",
                      {{"layers", 2}, {"hidden", 64}, {"heads", 4}, {"ffn_hidden", 128}, {"vocab", 128},
                       {"max_positions", 32}, {"num_labels", 8}},
                      std::move(options));
}

// The highest live bytes before the first forward starts: the setup phase's peak.
uint64_t setup_peak(const PlannedTrace& planned, uint64_t* live_after) {
  uint64_t live = 0, peak = 0;
  std::vector<uint64_t> bytes(planned.trace.slot_names.size(), 0);
  for (const oomcast::sim::Event& event : planned.trace.events) {
    if (event.kind == oomcast::sim::EventKind::Mark && planned.trace.strings[event.tag] != "setup") break;
    if (event.kind == oomcast::sim::EventKind::Alloc) {
      bytes[event.slot] = event.bytes;
      live += event.bytes;
      peak = std::max(peak, live);
    } else if (event.kind == oomcast::sim::EventKind::Free) {
      live -= bytes[event.slot];
    }
  }
  *live_after = live;
  return peak;
}

Scenario tiny_encoder_job(bool cpu) {
  Scenario scenario;
  scenario.model = tiny_encoder({{"batch_first", "true"}});
  scenario.batch_size = 2;
  scenario.seq_len = 32;
  scenario.iterations = 1;
  scenario.optimizer.type = OptimizerType::Sgd;
  scenario.device.is_cpu = cpu;
  scenario.device.profile = cpu ? "cpu" : "h200";
  return scenario;
}

}  // namespace

TEST_CASE("the transformer-encoder-base preset has the parameter count PyTorch reports", "[planner][models]") {
  // sum(p.numel() for p in model.parameters()) of validate/models.py's classifier, torch 1.13:
  // pos 262,144 + embed 15,627,264 + 6 * 3,152,384 + head 1,026.
  CHECK(parameter_count(resolve_model("transformer-encoder-base", "")) == 34804738ull);
}

TEST_CASE("a seq-first encoder with a final LayerNorm counts the norm once and pos as [P, 1, d]",
          "[planner][models]") {
  // The same classifier built by torch 1.13 with batch_first=False and norm=nn.LayerNorm(64).
  CHECK(parameter_count(tiny_encoder({{"final_norm", "true"}})) == 77832ull);
}

TEST_CASE("a CPU job's setup holds nn.TransformerEncoder's template layer until the constructor returns",
          "[planner][transformer_encoder]") {
  uint64_t live_after = 0;
  uint64_t peak = setup_peak(plan_steps(tiny_encoder_job(/*cpu=*/true)), &live_after);
  // One nn.TransformerEncoderLayer(64, 4, 128): in_proj 12,480 + out_proj 4,160 + linear1
  // 8,320 + linear2 8,256 + two norms 256 = 33,472 fp32 elements.
  CHECK(peak - live_after == 33472u * 4u);
}

TEST_CASE("a GPU job never sees the template layer: the model is built on the CPU and moved",
          "[planner][transformer_encoder]") {
  uint64_t live_after = 0;
  uint64_t peak = setup_peak(plan_steps(tiny_encoder_job(/*cpu=*/false)), &live_after);
  CHECK(peak == live_after);
}
