// Tests for the per-release facts table (planner/torch_release_facts.yaml): which release gets
// which fact, and that a malformed row is refused by name.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "planner/torch_release_facts.h"

using namespace oomcast::planner;

TEST_CASE("torch 1.13 keeps mean's and select's inputs and runs MultiheadAttention without SDPA",
          "[planner][torch_version]") {
  const TorchReleaseFacts& facts = torch_release_facts(113);
  CHECK(facts.mean_saves_input);
  CHECK(facts.foreach_adam_denom_out_of_place);
  CHECK(facts.select_backward_clones_zeros);
  CHECK_FALSE(facts.multihead_attention_calls_sdpa);
  CHECK_FALSE(facts.softmax_saves_input);
}

TEST_CASE("torch 2.13 saves only mean's sizes and runs MultiheadAttention through SDPA", "[planner][torch_version]") {
  const TorchReleaseFacts& facts = torch_release_facts(213);
  CHECK_FALSE(facts.mean_saves_input);
  CHECK_FALSE(facts.foreach_adam_denom_out_of_place);
  CHECK_FALSE(facts.select_backward_clones_zeros);
  CHECK(facts.multihead_attention_calls_sdpa);
  CHECK(facts.cpu_sdpa_flash_without_dropout);
}

TEST_CASE("before torch 1.11 softmax keeps its input", "[planner][torch_version]") {
  CHECK(torch_release_facts(110).softmax_saves_input);
  CHECK_FALSE(torch_release_facts(111).softmax_saves_input);
}

TEST_CASE("a facts row naming an unknown fact or without a source is refused", "[planner][torch_version]") {
  CHECK_THROWS_AS(parse_torch_release_facts("facts:\n  - {fact: mean_saves_inputs, releases: \"1.0+\", source: x}\n",
                                            "facts.yaml", 213),
                  oomcast::InputError);
  CHECK_THROWS_AS(parse_torch_release_facts("facts:\n  - {fact: mean_saves_input, releases: \"1.0+\"}\n", "facts.yaml", 213),
                  oomcast::InputError);
  CHECK_THROWS_AS(parse_torch_release_facts("facts:\n  - {fact: mean_saves_input, releases: \"two\", source: x}\n",
                                            "facts.yaml", 213),
                  oomcast::InputError);
}
