// Tests of the sweep: the grid syntax, every combination in nested-loop order, invalid
// combinations kept as rows, and the same numbers whatever the thread count.
#include "advisor/sweep.h"

#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "advisor/predict.h"
#include "scenario/scenario_loader.h"

namespace oomcast::advisor {

using scenario::ScenarioSource;
using scenario::load_scenario_text;

namespace {

const char* kTinyGpt2 = R"(
model: gpt2-tiny
batch_size: 1
seq_len: 64
precision: amp_bf16
iterations: 2
device: {total_gib: 0.25, context_mib: 0, cublas_workspaces: 0}
)";

TEST_CASE("A grid is parsed into axes with lists and integer ranges") {
  auto axes = parse_grid("batch_size=1,2,4  precision=fp32,amp_bf16 seq_len=30..32");
  REQUIRE(axes.size() == 3);
  CHECK(axes[0].key == "batch_size");
  CHECK(axes[0].values == std::vector<std::string>{"1", "2", "4"});
  CHECK(axes[2].values == std::vector<std::string>{"30", "31", "32"});
  CHECK(combination_count(axes) == 18);
  CHECK_THROWS_AS(parse_grid("batch_size"), InputError);
  CHECK_THROWS_AS(parse_grid("batch_size=1,,2"), InputError);
  CHECK_THROWS_AS(parse_grid("batch_size=1 batch_size=2"), InputError);
  CHECK_THROWS_AS(parse_grid("batch_size=4..x"), InputError);
}

TEST_CASE("A sweep predicts every combination as --set would, first axis slowest") {
  auto axes = parse_grid("batch_size=1,8 checkpointing=none,full");
  SweepOptions options;
  options.jobs = 2;
  SweepResult result = run_sweep(ScenarioSource::yaml(kTinyGpt2, "tiny.yaml"), axes, options);
  REQUIRE(result.rows.size() == 4);
  CHECK(result.rows[1].values == std::vector<std::string>{"1", "full"});
  CHECK(result.rows[2].values == std::vector<std::string>{"8", "none"});
  Prediction direct = predict(load_scenario_text(kTinyGpt2, "tiny.yaml", {"batch_size=8", "checkpointing=none"}));
  CHECK(result.rows[2].peak_reserved_bytes == direct.peak_reserved_bytes);
  CHECK(result.rows[2].peak_allocated_bytes == direct.peak_allocated_bytes);
}

TEST_CASE("An invalid combination keeps its error in its row and the sweep goes on") {
  auto axes = parse_grid("precision=fp32,amp_bf16 attention=flash,sdpa_math");
  SweepResult result = run_sweep(ScenarioSource::yaml(kTinyGpt2, "tiny.yaml"), axes, SweepOptions{});
  REQUIRE(result.rows.size() == 4);
  CHECK_FALSE(result.rows[0].valid);  // flash with fp32
  CHECK(result.rows[0].error.find("flash") != std::string::npos);
  CHECK(result.rows[1].valid);
  CHECK(result.rows[2].valid);
  CHECK(render_sweep_csv(result).find("false,,,,,,") != std::string::npos);
  CHECK(render_sweep_json(result).find("\"valid\": false") != std::string::npos);
  CHECK(render_sweep_text(result).find("1 invalid") != std::string::npos);
}

TEST_CASE("A sweep gives the same rows on one thread and on several, and reports progress") {
  auto axes = parse_grid("batch_size=1..6 seq_len=32,64");
  SweepOptions one;
  one.jobs = 1;
  SweepOptions several;
  several.jobs = 3;
  size_t last_done = 0, calls = 0;
  several.progress = [&](size_t done, size_t total) {
    ++calls;
    last_done = done;
    CHECK(total == 12);
  };
  SweepResult a = run_sweep(ScenarioSource::yaml(kTinyGpt2, "tiny.yaml"), axes, one);
  SweepResult b = run_sweep(ScenarioSource::yaml(kTinyGpt2, "tiny.yaml"), axes, several);
  CHECK(calls == 12);
  CHECK(last_done == 12);
  CHECK(render_sweep_csv(a) == render_sweep_csv(b));
}

}  // namespace
}  // namespace oomcast::advisor
