// Tests of search_max_fitting(): it agrees with a brute-force scan, finds a value that fits
// above one that does not (a fragmentation case built on purpose), and its shortcut of
// editing the Scenario struct gives what `--set` would.
#include "advisor/search.h"

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "advisor/predict.h"
#include "base/progress.h"
#include "scenario/scenario_loader.h"

namespace oomcast::advisor {

using scenario::Scenario;
using scenario::ScenarioSource;
using scenario::load_scenario_text;

namespace {

// gpt2-tiny on a 256 MiB GPU with no context and no cuBLAS workspaces.
const char* kTinyGpt2 = R"(
model: gpt2-tiny
batch_size: 1
seq_len: 128
precision: fp32
attention: eager
iterations: 2
device: {total_gib: 0.25, context_mib: 0, cublas_workspaces: 0}
)";

// A one-hidden-layer MLP with 52,429 inputs (~205 KiB per sample) on a 35 MiB GPU. The
// batch-sized tensors cross the caching allocator's 10 MiB large-block threshold near batch
// 50: below it they are carved from shared 20 MiB segments, above it each gets its own
// 2 MiB-rounded segment. Reserved memory peaks at 22 MiB up to batch 41, at 42 MiB for
// 42..49 and at 34 MiB for 50..59: 41 fits, 42..49 do not, 50..59 fit again, 60+ do not.
const char* kFragmentingMlp = R"(
model: {preset: mlp, input: 52429, hidden: 16, layers: 1, output: 10}
batch_size: 1
precision: fp32
optimizer: sgd
iterations: 2
device: {total_gib: 0.0341796875, context_mib: 0, cublas_workspaces: 0}
)";

// The largest value in 1..max_value that fits, by simulating every one.
int64_t brute_force_max(const Scenario& scenario, SearchParam param, double margin, int64_t max_value) {
  Scenario with_budget = with_margin(scenario, margin);
  int64_t best = 0;
  for (int64_t value = 1; value <= max_value; ++value) {
    if (evaluate_value(with_budget, param, value).fits) best = value;
  }
  return best;
}

SearchResult search(const char* yaml, SearchParam param, double margin, int64_t max_value) {
  SearchOptions options;
  options.param = param;
  options.margin = margin;
  options.max_value = max_value;
  options.jobs = 2;
  return search_max_fitting(ScenarioSource::yaml(yaml, "test.yaml"), options);
}

TEST_CASE("The batch-size search agrees with a brute-force scan on a tiny GPT-2") {
  Scenario scenario = load_scenario_text(kTinyGpt2, "test.yaml");
  for (double margin : {0.0, 0.05, 0.3}) {
    SearchResult result = search(kTinyGpt2, SearchParam::BatchSize, margin, 200);
    INFO("margin " << margin);
    REQUIRE(result.max_fitting);
    CHECK(*result.max_fitting == brute_force_max(scenario, SearchParam::BatchSize, margin, 200));
    // The probes, the fragmentation window above the answer and the 64 values below it: fewer
    // than half of the 200 a scan simulates.
    CHECK(result.evaluated.size() < 100);
  }
}

TEST_CASE("The sequence-length search agrees with a brute-force scan and stops at max_positions") {
  Scenario scenario = load_scenario_text(kTinyGpt2, "test.yaml", {"batch_size=96"});
  SearchOptions options;
  options.param = SearchParam::SeqLen;
  options.margin = 0.05;
  SearchResult result = search_max_fitting(ScenarioSource::yaml(kTinyGpt2, "test.yaml", {"batch_size=96"}), options);
  CHECK(result.max_value == 128);  // gpt2-tiny's max_positions
  REQUIRE(result.max_fitting);
  CHECK(*result.max_fitting == brute_force_max(scenario, SearchParam::SeqLen, 0.05, 128));
}

// gpt2-tiny generating for 64 prompts on a 41 MiB GPU: the KV cache and the logits grow with
// the prompt and with the tokens generated.
const char* kTinyGenerate = R"(
model: gpt2-tiny
batch_size: 64
precision: fp32
attention: eager
job: {kind: generate, prompt_len: 16, new_tokens: 8}
device: {total_gib: 0.04, context_mib: 0, cublas_workspaces: 0}
)";

TEST_CASE("A generate job's prompt length is searched as job.prompt_len and agrees with a brute-force scan") {
  Scenario scenario = load_scenario_text(kTinyGenerate, "test.yaml");
  SearchResult result = search(kTinyGenerate, SearchParam::PromptLen, 0.0, 100);
  REQUIRE(result.max_fitting);
  CHECK(*result.max_fitting < 100);  // the budget binds: the parameter acts on the plan
  CHECK(*result.max_fitting == brute_force_max(scenario, SearchParam::PromptLen, 0.0, 100));
}

TEST_CASE("A generate job's new tokens are searched as job.new_tokens and agree with a brute-force scan") {
  const std::vector<std::string> small_device = {"device.total_gib=0.027"};
  Scenario scenario = load_scenario_text(kTinyGenerate, "test.yaml", small_device);
  SearchOptions options;
  options.param = SearchParam::NewTokens;
  options.margin = 0.0;
  options.max_value = 100;
  SearchResult result = search_max_fitting(ScenarioSource::yaml(kTinyGenerate, "test.yaml", small_device), options);
  REQUIRE(result.max_fitting);
  CHECK(*result.max_fitting < 100);
  CHECK(*result.max_fitting == brute_force_max(scenario, SearchParam::NewTokens, 0.0, 100));
}

TEST_CASE("A batch size that fits above one that does not is found and reported as non-monotone") {
  Scenario scenario = load_scenario_text(kFragmentingMlp, "test.yaml");
  Scenario exact = with_margin(scenario, 0.0);
  // The construction: 41 fits, 45 does not, 55 does, 60 does not.
  REQUIRE(evaluate_value(exact, SearchParam::BatchSize, 41).fits);
  REQUIRE_FALSE(evaluate_value(exact, SearchParam::BatchSize, 45).fits);
  REQUIRE(evaluate_value(exact, SearchParam::BatchSize, 55).fits);
  REQUIRE_FALSE(evaluate_value(exact, SearchParam::BatchSize, 60).fits);

  // Plain bisection probes 1..32 (fit), 64, 48, 44, 42 (fail), 40, 41 (fit) and would answer 41.
  SearchResult result = search(kFragmentingMlp, SearchParam::BatchSize, 0.0, 64);
  REQUIRE(result.largest_fitting);
  CHECK(*result.largest_fitting == brute_force_max(scenario, SearchParam::BatchSize, 0.0, 64));
  CHECK(*result.largest_fitting == 59);
  CHECK(result.non_monotone);
  CHECK(result.witness_fit == 59);
  CHECK(result.witness_fail == 42);
  CHECK(result.scanned);
  CHECK(render_search_text(result).find("non-monotone") != std::string::npos);
  CHECK(render_search_json(result).find("\"non_monotone\": true") != std::string::npos);
}

TEST_CASE("The answer is the largest batch size below which everything fits; the fits above a failure are "
          "noted as isolated") {
  SearchResult result = search(kFragmentingMlp, SearchParam::BatchSize, 0.0, 64);
  REQUIRE(result.max_fitting);
  CHECK(*result.max_fitting == 41);
  std::vector<int64_t> band;
  for (int64_t value = 50; value <= 59; ++value) band.push_back(value);
  CHECK(result.isolated_fits == band);
  const std::string text = render_search_text(result);
  CHECK_THAT(text, Catch::Contains("largest batch_size that fits: 41"));
  CHECK_THAT(text, Catch::Contains("below it  every value from 1 to 41 was simulated and fits"));
  CHECK_THAT(text, Catch::Contains("isolated fits above 41: 50..59 (10 of them)"));
  CHECK_THAT(render_search_json(result), Catch::Contains("\"largest_fitting\": 59"));
}

TEST_CASE("A ceiling the probes reach through fits is not the answer when values below it fail") {
  // With --max 59 the probes 1, 2, 4, ... 32 and 59 all fit, and 42..49 (never probed) do not.
  SearchResult result = search(kFragmentingMlp, SearchParam::BatchSize, 0.0, 59);
  REQUIRE(result.max_fitting);
  CHECK(*result.max_fitting == 41);
  CHECK(result.non_monotone);
  CHECK(result.largest_fitting == 59);
  CHECK(result.consecutive_from == 1);
  const std::string text = render_search_text(result);
  CHECK_THAT(text, Catch::Contains("largest batch_size that fits: 41"));
  CHECK_THAT(text, Catch::Contains("isolated fits above 41: 50..59"));
}

TEST_CASE("On a GPU the values just below the answer are each simulated, and the answer says how far down") {
  // gpt2-tiny's seq_len: the answer is in the hundreds, so the run below it is the window of 64.
  SearchOptions options;
  options.param = SearchParam::SeqLen;
  options.margin = 0.0;
  options.jobs = 2;
  const SearchResult result = search_max_fitting(ScenarioSource::yaml(kTinyGpt2, "test.yaml"), options);
  REQUIRE(result.max_fitting);
  REQUIRE(*result.max_fitting > options.exhaustive_window + 1);
  CHECK(result.consecutive_from <= *result.max_fitting - options.exhaustive_window);
  for (int64_t value = result.consecutive_from; value <= *result.max_fitting; ++value) {
    const bool simulated_and_fits = std::any_of(result.evaluated.begin(), result.evaluated.end(),
                                                [&](const Evaluation& e) { return e.value == value && e.fits; });
    INFO(value);
    CHECK(simulated_and_fits);
  }
  CHECK_THAT(render_search_text(result),
             Catch::Contains("below it  every value from " + std::to_string(result.consecutive_from) + " to " +
                             std::to_string(*result.max_fitting) + " was simulated and fits; below"));
  CHECK_THAT(render_search_json(result),
             Catch::Contains("\"consecutive_from\": " + std::to_string(result.consecutive_from)));
}

TEST_CASE("The progress line's expected probes grow with each stage, so it shows 100% only at a stage's end") {
  // A window of 4: the fragmenting MLP's window above 41 is sampled, then scanned value by value.
  std::vector<std::pair<uint64_t, uint64_t>> reports;  // (done, total) of the search's own task
  set_progress_sink([&](const ProgressEvent& event) {
    if (event.task == "search probes" && !event.finished && event.done > 0) reports.emplace_back(event.done, event.total);
  });
  SearchOptions options;
  options.margin = 0.0;
  options.max_value = 64;
  options.jobs = 1;
  options.exhaustive_window = 4;
  const SearchResult result = search_max_fitting(ScenarioSource::yaml(kFragmentingMlp, "test.yaml"), options);
  set_progress_sink({});
  REQUIRE(result.scanned);
  REQUIRE(reports.size() == result.evaluated.size());
  const auto at_the_end = std::count_if(reports.begin(), reports.end(), [](const auto& r) { return r.first >= r.second; });
  INFO(at_the_end << " of " << reports.size() << " reports at 100%");
  CHECK(at_the_end <= 5);  // the probes, the neighbours, the window's sample, its scan, the scan below
  CHECK(reports.back().first == reports.back().second);
}

TEST_CASE("The search table folds a run of values with the same answer into its ends and one line") {
  SearchResult result = search(kFragmentingMlp, SearchParam::BatchSize, 0.0, 64);
  const std::string text = render_search_text(result);
  // 50..59 all fit: 50 and 59 shown, the 8 between folded.
  CHECK_THAT(text, Catch::Contains("8 values between 50 and 59: all fit"));
  CHECK(text.find("\n        55  yes") == std::string::npos);
  CHECK(text.find("\n        59  yes") != std::string::npos);
}

TEST_CASE("A monotone search does not claim non-monotonicity") {
  SearchResult result = search(kTinyGpt2, SearchParam::BatchSize, 0.05, 200);
  CHECK_FALSE(result.non_monotone);
  CHECK(render_search_json(result).find("\"non_monotone\": false") != std::string::npos);
}

TEST_CASE("Editing the scenario struct predicts the same as reloading it with --set") {
  Scenario scenario = load_scenario_text(kTinyGpt2, "test.yaml");
  struct Case {
    SearchParam param;
    const char* key;
    int64_t value;
  };
  for (Case c : {Case{SearchParam::BatchSize, "batch_size", 7}, Case{SearchParam::SeqLen, "seq_len", 100},
                 Case{SearchParam::GradAccumSteps, "grad_accum_steps", 3}}) {
    Scenario edited = with_parameter(scenario, c.param, c.value);
    Scenario reloaded = load_scenario_text(kTinyGpt2, "test.yaml", {std::string(c.key) + "=" + std::to_string(c.value)});
    Prediction a = predict(edited), b = predict(reloaded);
    INFO(c.key);
    CHECK(a.events == b.events);
    CHECK(a.peak_allocated_bytes == b.peak_allocated_bytes);
    CHECK(a.peak_reserved_bytes == b.peak_reserved_bytes);
    CHECK(a.fits == b.fits);
  }
}

TEST_CASE("Editing the struct rejects what --set rejects") {
  Scenario scenario = load_scenario_text(kTinyGpt2, "test.yaml");
  CHECK_THROWS(load_scenario_text(kTinyGpt2, "test.yaml", {"seq_len=129"}));
  CHECK_THROWS(with_parameter(scenario, SearchParam::SeqLen, 129));
  CHECK_THROWS(load_scenario_text(kTinyGpt2, "test.yaml", {"batch_size=0"}));
  CHECK_THROWS(with_parameter(scenario, SearchParam::BatchSize, 0));
}

TEST_CASE("The margin is held back from the allocator's usable memory") {
  Scenario scenario = load_scenario_text(kTinyGpt2, "test.yaml", {"allocator.memory_fraction=0.5"});
  uint64_t usable = usable_bytes_of(scenario);
  CHECK(usable == (uint64_t{1} << 27));
  uint64_t with_ten_percent = usable_bytes_of(with_margin(scenario, 0.1));
  CHECK(with_ten_percent == Approx(0.9 * static_cast<double>(usable)).epsilon(1e-6));
  Scenario plain = load_scenario_text(kTinyGpt2, "test.yaml");
  CHECK(usable_bytes_of(with_margin(plain, 0.25)) == (uint64_t{3} << 26));
}

TEST_CASE("An absolute margin takes exactly that many bytes out of the budget") {
  SearchOptions options;
  options.margin_bytes = uint64_t{40} << 20;
  options.max_value = 200;
  options.jobs = 2;
  SearchResult result = search_max_fitting(ScenarioSource::yaml(kTinyGpt2, "test.yaml"), options);
  CHECK(static_cast<double>(result.budget_bytes) ==
        Approx(static_cast<double>(result.usable_bytes - options.margin_bytes)).margin(2));
  REQUIRE(result.max_fitting);
  Scenario scenario = load_scenario_text(kTinyGpt2, "test.yaml");
  double fraction = static_cast<double>(options.margin_bytes) / static_cast<double>(usable_bytes_of(scenario));
  CHECK(*result.max_fitting == brute_force_max(scenario, SearchParam::BatchSize, fraction, 200));
  CHECK(render_search_text(result).find("minus a 40.00 MiB margin") != std::string::npos);
}

TEST_CASE("A data-parallel search is per rank and says that the busiest rank decides") {
  SearchOptions options;
  options.max_value = 64;
  options.jobs = 2;
  SearchResult result = search_max_fitting(
      ScenarioSource::yaml("model: llama-tiny\nbatch_size: 2\nseq_len: 64\nprecision: amp_bf16\niterations: 2\n"
                           "device: {total_gib: 0.01, context_mib: 0, cublas_workspaces: 0}\n"
                           "parallel: {world_size: 4, nccl_buffer_mib: 0, ddp: {}}\n",
                           "ddp.yaml"),
      options);
  CHECK(result.ranks == 4);
  CHECK(render_search_text(result).find("per rank  ddp with 4 ranks") != std::string::npos);
  CHECK(render_search_json(result).find("\"ranks\": 4") != std::string::npos);
}

TEST_CASE("Nothing fits when even the smallest value needs more than the device") {
  SearchResult result = search(kTinyGpt2, SearchParam::BatchSize, 0.0, 64);
  REQUIRE(result.max_fitting);
  SearchOptions options;
  options.max_value = 64;
  SearchResult none = search_max_fitting(
      ScenarioSource::yaml(kTinyGpt2, "test.yaml", {"device.total_gib=0.001"}), options);
  CHECK_FALSE(none.max_fitting);
  CHECK(render_search_json(none).find("\"max_fitting\": null") != std::string::npos);
}

TEST_CASE("An unknown search parameter is an input error with a suggestion") {
  CHECK_THROWS_WITH(parse_search_param("batchsize"), Catch::Contains("batch_size"));
}

}  // namespace
}  // namespace oomcast::advisor
