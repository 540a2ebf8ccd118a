// Tests of checkpointing: auto's knapsack: the least recompute that frees what is asked.
#include <catch2/catch.hpp>

#include "planner/timing/checkpoint_knapsack.h"

using namespace oomcast::planner;
using oomcast::scenario::CheckpointConfig;
using oomcast::scenario::CheckpointMode;

namespace {

// Two blocks, each with "full" (frees 10, costs 3) and "attention" (frees 6, costs 1).
CheckpointCosts two_blocks() {
  CheckpointCosts costs;
  costs.freed_bytes = {{10, 6}, {10, 6}};
  costs.recompute_seconds = {{3, 1}, {3, 1}};
  return costs;
}

}  // namespace

TEST_CASE("auto checkpoints nothing when nothing needs freeing", "[planner][checkpointing]") {
  CheckpointChoice choice = choose_checkpoints(two_blocks(), 0.0);
  CHECK(choice.enough);
  CHECK(choice.option == std::vector<int>{-1, -1});
  CHECK(choice.recompute_seconds == 0.0);
}

TEST_CASE("auto picks the cheaper set when two sets free enough", "[planner][checkpointing]") {
  // full + full frees 20 for 6 s, full + attention 16 for 4 s, attention + attention 12 for 2 s.
  CheckpointChoice choice = choose_checkpoints(two_blocks(), 12.0);
  CHECK(choice.enough);
  CHECK(choice.option == std::vector<int>{1, 1});
  CHECK(choice.recompute_seconds == Approx(2.0));
  CHECK(choice.freed_bytes >= 12.0);
}

TEST_CASE("auto checkpoints a single block when one is enough", "[planner][checkpointing]") {
  CheckpointChoice choice = choose_checkpoints(two_blocks(), 5.0);
  CHECK(choice.enough);
  CHECK(choice.recompute_seconds == Approx(1.0));
  CHECK(choice.freed_bytes >= 5.0);
}

TEST_CASE("auto frees the most it can when nothing frees enough", "[planner][checkpointing]") {
  CheckpointChoice choice = choose_checkpoints(two_blocks(), 100.0);
  CHECK_FALSE(choice.enough);
  CHECK(choice.freed_bytes == Approx(20.0));
}

TEST_CASE("a resolved choice becomes a per-block checkpointing section", "[planner][checkpointing]") {
  CheckpointChoice choice;
  choice.option = {0, -1, 1};
  CheckpointConfig config = checkpoint_config_for(choice, 0.1);
  REQUIRE(config.units.size() == 3);
  CHECK(config.mode == CheckpointMode::Auto);
  CHECK(config.units[0].on);
  CHECK(config.units[0].recompute_ops.empty());  // the whole block
  CHECK_FALSE(config.units[1].on);
  CHECK(config.units[2].choice == "attention");
  CHECK_FALSE(config.units[2].recompute_ops.empty());
}
