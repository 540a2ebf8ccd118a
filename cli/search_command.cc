// `oomcast search SCENARIO --param batch_size|seq_len|grad_accum_steps [--margin 5%|2GiB]
// [--max N] [--set k=v]... [--fit] [--json]`: the largest value that fits with the margin left
// free; `--keep-global-batch N`: the largest micro-batch (and its accumulation) of a global
// batch N. Exit code 0 when some value fits, 1 when none does.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "cli/commands.h"
#include "cli/count_flags.h"
#include "cli/environment.h"
#include "cli/print_scenario.h"
#include "advisor/global_batch_search.h"
#include "advisor/search.h"
#include "advisor/search_margin.h"

namespace oomcast::cli {

namespace {

struct SearchFlags {
  std::string scenario;
  std::string param = "batch_size";
  std::string margin = "5%";
  int64_t max_value = 0;
  int64_t keep_global_batch = 0;
  std::string seq_len_distribution;
  std::string batching = "pad";
  int64_t pad_to_multiple_of = 1;
  size_t jobs = 0;
  std::vector<std::string> overrides;
  bool print_scenario = false;
  bool fit = false;
  bool json = false;
  bool param_given = false;
};

int run_keep_global_batch(const SearchFlags& flags, const scenario::ScenarioSource& source,
                          const advisor::SearchMargin& margin) {
  advisor::GlobalBatchOptions options;
  options.global_batch = flags.keep_global_batch;
  options.margin = margin.fraction;
  options.margin_bytes = margin.bytes;
  if (flags.jobs > 0) options.jobs = flags.jobs;
  advisor::GlobalBatchResult result = advisor::search_keep_global_batch(source, options);
  std::string text = flags.json ? advisor::render_global_batch_json(result) : advisor::render_global_batch_text(result);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return result.best ? 0 : 1;
}

int run_search(const SearchFlags& flags) {
  advisor::SearchMargin margin = advisor::parse_search_margin(flags.margin);
  scenario::ScenarioSource source =
      scenario::ScenarioSource::file(flags.scenario, with_environment_alloc_conf(flags.scenario, flags.overrides));
  if (flags.keep_global_batch > 0) {
    if (flags.param_given || flags.fit || flags.max_value > 0 || !flags.seq_len_distribution.empty()) {
      throw InputError(SourceLocation{}, "--keep-global-batch",
                       "--keep-global-batch varies batch_size and grad_accum_steps together: it takes no --param, "
                       "--max, --fit or --seq-len-distribution");
    }
    return run_keep_global_batch(flags, source, margin);
  }
  advisor::SearchOptions options;
  options.param = advisor::parse_search_param(flags.param);
  options.margin = margin.fraction;
  options.margin_bytes = margin.bytes;
  options.max_value = flags.max_value;
  if (flags.jobs > 0) options.jobs = flags.jobs;
  if (!flags.seq_len_distribution.empty()) {
    options.lengths = advisor::read_length_distribution(flags.seq_len_distribution);
    if (flags.batching != "pad" && flags.batching != "pack") {
      throw InputError(SourceLocation{}, "--batching", "--batching must be pad or pack; got '" + flags.batching + "'");
    }
    options.length_options.batching = flags.batching == "pack" ? advisor::Batching::Pack : advisor::Batching::Pad;
    options.length_options.pad_to_multiple_of = flags.pad_to_multiple_of;
  }
  options.with_fit = flags.fit;
  advisor::SearchResult result = advisor::search_max_fitting(source, options);
  std::string text = flags.json ? advisor::render_search_json(result) : advisor::render_search_text(result);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return result.max_fitting ? 0 : 1;
}

}  // namespace

void add_search_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<SearchFlags>();
  CLI::App* command = app.add_subcommand(
      "search", "the largest batch_size, seq_len or grad_accum_steps that fits with a margin left free");
  command->add_option("scenario", flags->scenario, "scenario YAML file, or a torchtune, torchtitan, Axolotl or Trainer config (docs/recipes.md)")->required();
  command->add_option("--param", flags->param, "batch_size (default), seq_len (image_size), grad_accum_steps; on a generate job also job.prompt_len or job.new_tokens")
      ->each([flags](const std::string&) { flags->param_given = true; });
  command->add_option("--margin", flags->margin,
                      "usable memory to leave free: 5% (default), 0.05, or an amount such as 2GiB");
  command->add_option("--keep-global-batch", flags->keep_global_batch,
                      "keep micro-batch x grad_accum_steps x data-parallel ranks = N and find the largest micro-batch "
                      "that fits")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  command->add_option("--max", flags->max_value,
                      "largest value to try (default 65536 for batch_size, 2^20 or max_positions for seq_len, "
                      "1024 for grad_accum_steps)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  command->add_option("--seq-len-distribution", flags->seq_len_distribution,
                      "with --param seq_len: a file of the data set's lengths (LENGTH or LENGTH COUNT a line); the "
                      "answer gives the OOM risk of the distribution's tail");
  command->add_option("--batching", flags->batching,
                      "with --seq-len-distribution: pad (default: each micro-batch padded to its longest) or pack "
                      "(fixed rows of seq_len)");
  command->add_option("--pad-to-multiple", flags->pad_to_multiple_of,
                      "with --batching pad: padded lengths round up to a multiple of N (pad_to_multiple_of)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  command->add_option("--jobs", flags->jobs, "values simulated at once (default: every hardware thread)")
      ->check(at_least_one("values simulated at once"));
  command->add_option("--set", flags->overrides, "override a scenario key first (repeatable)")->allow_extra_args(false);
  add_print_scenario_flag(*command, flags->print_scenario);
  command->add_flag("--fit", flags->fit, "also print the closed-form fit peak ≈ a + b·B + c·B·S + d·B·S²");
  command->add_flag("--json", flags->json, "print JSON (max_fitting, param, margin, non_monotone, evaluated)");
  command->callback([flags, &exit_code] {
    if (printed_scenario(flags->print_scenario, flags->scenario, flags->overrides, exit_code)) return;
    exit_code = run_search(*flags);
  });
}

}  // namespace oomcast::cli
