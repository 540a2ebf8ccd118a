// Which combinations of allocator settings get a warning, one rule per TEST_CASE.
#include "sim/allocator_warnings.h"

#include <catch2/catch.hpp>

using namespace oomcast::sim;

namespace {
bool warns_about(const std::vector<std::string>& warnings, const std::string& text) {
  for (const std::string& warning : warnings)
    if (warning.find(text) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("the default settings get no warning", "[sim][config][warnings]") {
  CHECK(allocator_config_warnings(AllocatorConfig{}, false).empty());
  CHECK(allocator_config_warnings(parse_alloc_conf("expandable_segments:True"), false).empty());
  CHECK(allocator_config_warnings(parse_alloc_conf("max_split_size_mb:128"), false).empty());
}

TEST_CASE("max_split_size_mb with expandable segments is warned about", "[sim][config][warnings]") {
  auto warnings = allocator_config_warnings(parse_alloc_conf("expandable_segments:True,max_split_size_mb:128"), false);
  REQUIRE(warnings.size() == 1);
  CHECK(warns_about(warnings, "max_split_size_mb with expandable_segments:True"));
}

TEST_CASE("garbage collection without a memory fraction is warned about as inert", "[sim][config][warnings]") {
  AllocatorConfig config = parse_alloc_conf("garbage_collection_threshold:0.6");
  CHECK(warns_about(allocator_config_warnings(config, false), "garbage_collection_threshold has no effect"));
  CHECK(allocator_config_warnings(config, true).empty());
}

TEST_CASE("garbage collection with expandable segments is warned about", "[sim][config][warnings]") {
  AllocatorConfig config = parse_alloc_conf("garbage_collection_threshold:0.6,expandable_segments:True");
  auto warnings = allocator_config_warnings(config, true);
  REQUIRE(warnings.size() == 1);
  CHECK(warns_about(warnings, "reclaims nothing"));
}

TEST_CASE("max_non_split_rounding_mb without max_split_size_mb is warned about", "[sim][config][warnings]") {
  CHECK(warns_about(allocator_config_warnings(parse_alloc_conf("max_non_split_rounding_mb:64"), false),
                    "max_non_split_rounding_mb has no effect"));
  CHECK(allocator_config_warnings(parse_alloc_conf("max_non_split_rounding_mb:64,max_split_size_mb:256"), false)
            .empty());
}

TEST_CASE("a division count of 1 on torch 2.3 is warned about", "[sim][config][warnings]") {
  AllocatorConfig base;
  base.torch_version = 203;
  CHECK(warns_about(allocator_config_warnings(parse_alloc_conf("roundup_power2_divisions:1", base), false),
                    "turns off even the 512-byte rounding"));
  CHECK(allocator_config_warnings(parse_alloc_conf("roundup_power2_divisions:1"), false).empty());
}
