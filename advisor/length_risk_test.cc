// Tests of the length distribution and its tail risk: reading a file, the order statistics of
// a padded micro-batch, and a sequence-length search over a distribution, checked against
// simulating every length the distribution holds.
#include "advisor/length_risk.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "advisor/search.h"
#include "base/input_error.h"
#include "scenario/scenario_loader.h"

namespace oomcast::advisor {

using scenario::Scenario;
using scenario::ScenarioSource;
using scenario::load_scenario_text;

namespace {

// gpt2-tiny at batch 96 on a 200 MiB GPU: sequences up to 117 tokens fit, 128 does not.
const char* kTinyGpt2 = R"(
model: gpt2-tiny
batch_size: 96
seq_len: 128
precision: fp32
attention: eager
iterations: 2
device: {total_gib: 0.2, context_mib: 0, cublas_workspaces: 0}
)";

// llama-tiny on 4 DDP ranks, 8 sequences a micro-batch, 2 accumulation steps, a 6 MiB GPU.
const char* kTinyLlamaDdp = R"(
model: llama-tiny
batch_size: 8
grad_accum_steps: 2
seq_len: 64
precision: amp_bf16
iterations: 2
device: {total_gib: 0.006, context_mib: 0, cublas_workspaces: 0}
parallel: {world_size: 4, nccl_buffer_mib: 0, ddp: {}}
)";

SearchResult search_lengths(const char* yaml, const std::string& lengths, Batching batching = Batching::Pad) {
  SearchOptions options;
  options.param = SearchParam::SeqLen;
  options.jobs = 2;
  options.lengths = parse_length_distribution(lengths, "lengths.txt");
  options.length_options.batching = batching;
  return search_max_fitting(ScenarioSource::yaml(yaml, "test.yaml"), options);
}

// The share of the distribution's sequences whose length, simulated on its own, does not fit.
double failing_share(const char* yaml, const LengthDistribution& lengths) {
  Scenario scenario = with_margin(load_scenario_text(yaml, "test.yaml"), 0.05);
  double failing = 0;
  for (const auto& [length, count] : lengths.counts) {
    if (!evaluate_value(scenario, SearchParam::SeqLen, length).fits) failing += count;
  }
  return failing / lengths.total;
}

TEST_CASE("A length file is read alike as a sample or as a histogram") {
  LengthDistribution sample = parse_length_distribution("# lengths\n128\n256\n256\n\n512  # a long one\n", "a.txt");
  LengthDistribution histogram = parse_length_distribution("128 1\n256,2\n512 1\n", "b.txt");
  CHECK(sample.counts == histogram.counts);
  CHECK(sample.total == 4);
  CHECK(sample.mean() == Approx(288.0));
  CHECK(sample.quantile(0.5) == 256);
  CHECK(sample.quantile(1.0) == 512);
  CHECK(sample.cdf(255) == Approx(0.25));
}

TEST_CASE("A malformed length line is an input error naming the file and the line") {
  try {
    parse_length_distribution("128 3\n256 x\n", "lengths.txt");
    FAIL("no error");
  } catch (const InputError& error) {
    CHECK(error.where().file == "lengths.txt");
    CHECK(error.where().line == 2);
  }
  CHECK_THROWS_AS(parse_length_distribution("0\n", "zero.txt"), InputError);
  CHECK_THROWS_AS(parse_length_distribution("# nothing\n", "empty.txt"), InputError);
  CHECK_THROWS_AS(parse_length_distribution("99999999999\n", "long.txt"), InputError);
}

TEST_CASE("A padded micro-batch is as long as the longest of its independent draws") {
  LengthDistribution uniform = parse_length_distribution("1\n2\n3\n4\n", "u.txt");
  CHECK(padded_cdf(uniform, 2, 2, 1) == Approx(0.25));  // both draws <= 2
  CHECK(padded_cdf(uniform, 3, 3, 1) == Approx(27.0 / 64.0));
  CHECK(padded_quantile(uniform, 0.5, 2, 1) == 3);       // (3/4)^2 = 0.5625 >= 0.5 > (2/4)^2
  // Rounded up to a multiple of 4, every batch pads to 4.
  CHECK(padded_cdf(uniform, 3, 1, 4) == Approx(0.0));
  CHECK(padded_quantile(uniform, 0.1, 1, 4) == 4);
}

TEST_CASE("The tail risk of a padded search is the risk of drawing a length that does not fit") {
  const std::string lengths = "16 900\n64 90\n128 10\n";
  SearchResult result = search_lengths(kTinyGpt2, lengths);
  REQUIRE(result.length_risk);
  const LengthRisk& risk = *result.length_risk;
  REQUIRE(risk.safe_length);
  CHECK(*risk.safe_length >= 64);
  CHECK(*risk.safe_length < 128);
  double p = failing_share(kTinyGpt2, parse_length_distribution(lengths, "l.txt"));
  CHECK(p == Approx(0.01));
  CHECK(risk.sequences_longer == Approx(p));
  CHECK(risk.micro_batch_risk == Approx(1.0 - std::pow(1.0 - p, 96)));
  CHECK(risk.step_risk == Approx(risk.micro_batch_risk));
  CHECK(risk.mean_fits);  // the mean (about 22 tokens) fits: only the tail does not
  std::string text = render_search_text(result);
  CHECK(text.find("an answer from the mean alone would hide this tail") != std::string::npos);
  CHECK(render_search_json(result).find("\"step_risk\"") != std::string::npos);
}

TEST_CASE("Every rank and every accumulation step draws its own micro-batch") {
  const std::string lengths = "16 990\n128 10\n";
  SearchResult result = search_lengths(kTinyLlamaDdp, lengths);
  REQUIRE(result.length_risk);
  const LengthRisk& risk = *result.length_risk;
  CHECK(risk.ranks == 4);
  CHECK(risk.accum_steps == 2);
  double p = failing_share(kTinyLlamaDdp, parse_length_distribution(lengths, "l.txt"));
  CHECK(p == Approx(0.01));
  CHECK(risk.micro_batch_risk == Approx(1.0 - std::pow(1.0 - p, 8)));
  CHECK(risk.step_risk == Approx(1.0 - std::pow(1.0 - p, 8 * 2 * 4)));
}

TEST_CASE("A distribution whose longest padded micro-batch fits has no risk") {
  SearchResult result = search_lengths(kTinyGpt2, "16 900\n64 100\n");
  REQUIRE(result.length_risk);
  CHECK(result.max_value == 64);  // the search stops at the longest length
  CHECK(result.length_risk->step_risk == 0.0);
  CHECK(render_search_text(result).find("risk      none") != std::string::npos);
}

TEST_CASE("Packing into rows that fit has no risk however long the tail") {
  SearchResult packed = search_lengths(kTinyGpt2, "16 900\n64 90\n4096 10\n", Batching::Pack);
  REQUIRE(packed.length_risk);
  CHECK(packed.length_risk->step_risk == 1.0);  // rows of the scenario's 128 tokens do not fit
  SearchOptions options;
  options.param = SearchParam::SeqLen;
  options.jobs = 2;
  options.lengths = parse_length_distribution("16 900\n64 90\n4096 10\n", "l.txt");
  options.length_options.batching = Batching::Pack;
  SearchResult fitting = search_max_fitting(ScenarioSource::yaml(kTinyGpt2, "test.yaml", {"seq_len=64"}), options);
  REQUIRE(fitting.length_risk);
  CHECK(fitting.length_risk->step_risk == 0.0);
  CHECK(fitting.length_risk->sequences_longer == Approx(0.01));  // split across rows
}

TEST_CASE("A length distribution needs a sequence-length search") {
  SearchOptions options;
  options.param = SearchParam::BatchSize;
  options.lengths = parse_length_distribution("16\n", "l.txt");
  CHECK_THROWS_WITH(search_max_fitting(ScenarioSource::yaml(kTinyGpt2, "test.yaml"), options),
                    Catch::Contains("needs --param seq_len"));
}

}  // namespace
}  // namespace oomcast::advisor
