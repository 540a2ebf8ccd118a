// The transformers release facts: each holds from the release its source names.
#include <catch2/catch.hpp>

#include "planner/transformers_release_facts.h"

using oomcast::planner::transformers_release_facts;

TEST_CASE("DynamicCache copies the prefill's K and V from transformers 4.56, not in 4.55", "[planner][transformers]") {
  CHECK_FALSE(transformers_release_facts(455).dynamic_cache_copies_prefill);
  CHECK(transformers_release_facts(456).dynamic_cache_copies_prefill);
  CHECK(transformers_release_facts(524).dynamic_cache_copies_prefill);
}

TEST_CASE("Gemma's scaled embedding and the stacked grouped_mm experts are transformers 5's", "[planner][transformers]") {
  CHECK_FALSE(transformers_release_facts(456).scaled_word_embedding);
  CHECK_FALSE(transformers_release_facts(456).stacked_experts);
  CHECK(transformers_release_facts(524).scaled_word_embedding);
  CHECK(transformers_release_facts(524).stacked_experts);
}
