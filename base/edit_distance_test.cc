#include "base/edit_distance.h"
#include "base/name_numbers.h"

#include <catch2/catch.hpp>

using oomcast::did_you_mean;
using oomcast::edit_distance;
using oomcast::with_same_numbers;

TEST_CASE("edit distance counts a transposition as two edits", "[base][edit_distance]") {
  CHECK(edit_distance("batch_size", "batch_szie") == 2);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("same", "same") == 0);
}

TEST_CASE("did_you_mean suggests the closest key for a typo", "[base][edit_distance]") {
  std::vector<std::string> keys = {"batch_size", "seq_len", "precision"};
  CHECK(did_you_mean("batch_szie", keys) == " (did you mean 'batch_size'?)");
}

TEST_CASE("did_you_mean stays silent when nothing is close", "[base][edit_distance]") {
  std::vector<std::string> keys = {"batch_size", "seq_len"};
  CHECK(did_you_mean("optimizer", keys).empty());
}

TEST_CASE("a name with other numbers is never offered as a typo of a model or GPU name", "[base][edit_distance]") {
  const std::vector<std::string> presets = {"llama-2-70b", "llama-2-7b", "h200", "b200", "rtx-3090"};
  CHECK(did_you_mean("llama33-70b", with_same_numbers("llama33-70b", presets)).empty());
  CHECK(with_same_numbers("llama2-7b", presets) == std::vector<std::string>{"llama-2-7b"});
  CHECK(with_same_numbers("b200", presets) == std::vector<std::string>{"b200"});
  CHECK(with_same_numbers("rtx3090", presets) == std::vector<std::string>{"rtx-3090"});
}

TEST_CASE("a misspelt word before a model's number still finds the model", "[base][edit_distance]") {
  const std::vector<std::string> presets = {"gpt2", "h200", "b200"};
  CHECK(with_same_numbers("gtp2", presets) == std::vector<std::string>{"gpt2"});
  CHECK(with_same_numbers("x200", presets).empty());  // a lone letter is part of the GPU's number
}
