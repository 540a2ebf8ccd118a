// The allocator's per-release table: every fact has one row with a source, and a release
// picks the rows whose range holds it.
#include "sim/allocator_release_facts.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

using namespace oomcast::sim;

TEST_CASE("every allocator release fact has exactly one row, with a source and a valid range", "[sim][release]") {
  std::set<std::string> names;
  size_t rows = 0;
  for (const AllocatorReleaseFactRow& row : allocator_release_fact_rows()) {
    ++rows;
    CHECK(std::string(row.source).size() > 20);
    CHECK(row.first >= 100);
    CHECK((row.last == 0 || row.last >= row.first));
    names.insert(row.name);
    // The row's member and name agree: only that member is set when the row alone holds.
    AllocatorReleaseFacts facts;
    facts.*(row.fact) = true;
    size_t set = 0;
    for (const AllocatorReleaseFactRow& other : allocator_release_fact_rows()) set += facts.*(other.fact) ? 1 : 0;
    CHECK(set == 1);
  }
  CHECK(names.size() == rows);
  CHECK(rows == sizeof(AllocatorReleaseFacts) / sizeof(bool));  // one row per field: every field is a bool
}

TEST_CASE("a release below 2.1 has the legacy OOM text and none of the later facts", "[sim][release]") {
  const AllocatorReleaseFacts& facts = allocator_release_facts(200);
  CHECK_FALSE(facts.oom_text_total_capacity);
  CHECK_FALSE(facts.roundup_one_division_rounds);
  CHECK_FALSE(facts.conf_max_non_split_rounding_mb);
}

TEST_CASE("a fact with a closed range holds only inside it", "[sim][release]") {
  CHECK_FALSE(allocator_release_facts(200).oom_text_capacity_typo);
  CHECK(allocator_release_facts(201).oom_text_capacity_typo);
  CHECK_FALSE(allocator_release_facts(202).oom_text_capacity_typo);
}

TEST_CASE("a release holds every open-ended fact that starts at or before it", "[sim][release]") {
  CHECK_FALSE(allocator_release_facts(205).conf_max_non_split_rounding_mb);
  CHECK(allocator_release_facts(206).conf_max_non_split_rounding_mb);
  CHECK_FALSE(allocator_release_facts(209).use_on_oom_pools_before_release);
  CHECK(allocator_release_facts(210).use_on_oom_pools_before_release);
  const AllocatorReleaseFacts& newest = allocator_release_facts(213);
  CHECK(newest.oom_text_no_hint_when_expandable);
  CHECK(newest.mem_pool_no_split);
  CHECK_FALSE(newest.oom_text_capacity_typo);
}
