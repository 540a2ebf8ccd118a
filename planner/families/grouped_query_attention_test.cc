// Tests of grouped-query attention in the rotary decoder families (rotary_decoder.h), as
// transformers 5.24's attention code runs it: SDPA with enable_gqa takes k and v with their kv
// heads under the flash kernel, while eager attention (repeat_kv) and SDPA's math kernel
// (repeat_interleave) copy them to every query head.
#include <catch2/catch.hpp>

#include <string>

#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::Scenario;

namespace {

// llama-tiny has 4 query heads and 2 kv heads.
size_t repeated_kv_slots(AttentionImpl attention) {
  Scenario scenario = oomcast::scenario::testing::cpu_scenario("llama-tiny", 2, 32, oomcast::scenario::Precision::Fp32, attention);
  PlannedTrace planned = plan_steps(scenario);
  REQUIRE(testing::check_schedule(planned).ok);
  size_t count = 0;
  for (const std::string& name : planned.trace.slot_names) {
    if (name.find("repeat_k") != std::string::npos || name.find("repeat_v") != std::string::npos) ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("grouped kv heads reach the flash kernel without repeat_kv copies", "[families][gqa]") {
  CHECK(repeated_kv_slots(AttentionImpl::Flash) == 0);
}

TEST_CASE("eager and math attention copy grouped kv heads to every query head", "[families][gqa]") {
  CHECK(repeated_kv_slots(AttentionImpl::Eager) > 0);
  CHECK(repeated_kv_slots(AttentionImpl::SdpaMath) > 0);
}
