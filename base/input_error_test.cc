#include "base/input_error.h"

#include <catch2/catch.hpp>

using oomcast::InputError;

TEST_CASE("an input error names file, line, column and message", "[base][error]") {
  InputError error({"s.yaml", 14, 3, -1}, "optimiser", "unknown key 'optimiser'");
  CHECK(std::string(error.what()) == "s.yaml:14:3: error: unknown key 'optimiser'");
  CHECK(error.key() == "optimiser");
}

TEST_CASE("an input error about a trace event names the event index", "[base][error]") {
  InputError error({"t.trace", 7, 0, 5}, "", "free of unknown id 'x'");
  CHECK(std::string(error.what()) == "t.trace:7: event 5: error: free of unknown id 'x'");
}
