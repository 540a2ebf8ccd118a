// SlotNames: a slot's id reads as its prefix piece followed by its name piece, and a whole id
// given as one string reads back unchanged.
#include <catch2/catch.hpp>

#include "sim/slot_names.h"

namespace oomcast::sim {
namespace {

TEST_CASE("a slot named by a prefix piece and a name piece reads as the two joined") {
  SlotNames names;
  const uint32_t prefix = names.add_piece("i1.m0/");
  const uint32_t name = names.add_piece("layers.0.mlp.out");
  names.push_back(prefix, name);
  names.push_back(0, name);
  REQUIRE(names.size() == 2);
  CHECK(names[0] == "i1.m0/layers.0.mlp.out");
  CHECK(names[1] == "layers.0.mlp.out");
}

TEST_CASE("a slot named by one whole id reads it back unchanged, and a resized slot has the empty id") {
  SlotNames names;
  names.push_back(std::string("x.grad"));
  names.resize(3);
  CHECK(names[0] == "x.grad");
  CHECK(names[2].empty());
  CHECK(names.size() == 3);
}

TEST_CASE("the ids read in slot order when iterated, and an id can be built from a character range") {
  SlotNames names;
  const std::string text = "a.b";
  names.emplace_back(text.data(), text.data() + 1);
  names.push_back(names.add_piece("p/"), names.add_piece("b"));
  std::vector<std::string> read;
  for (const std::string& id : names) read.push_back(id);
  CHECK(read == std::vector<std::string>{"a", "p/b"});
}

}  // namespace
}  // namespace oomcast::sim
