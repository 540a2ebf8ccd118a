#include "base/edit_distance.h"

#include <catch2/catch.hpp>

using oomcast::did_you_mean;
using oomcast::edit_distance;

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
