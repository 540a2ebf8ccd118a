// PYTORCH_CUDA_ALLOC_CONF parsing: syntax, the division-list quirks of spec §1.3, and errors.
#include "sim/allocator_config.h"

#include <catch2/catch.hpp>

#include "base/input_error.h"

using namespace oomcast::sim;
using oomcast::InputError;

namespace {
std::string error_of(const std::string& text, int version = 206) {
  AllocatorConfig base;
  base.torch_version = version;
  try {
    parse_alloc_conf(text, base);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("an empty configuration keeps every default", "[sim][config]") {
  AllocatorConfig config = parse_alloc_conf("");
  CHECK(config.max_split_size == AllocatorConfig::kUnlimited);
  CHECK_FALSE(config.expandable_segments);
  CHECK(config.garbage_collection_threshold == 0.0);
}

TEST_CASE("several options separated by commas are all applied", "[sim][config]") {
  AllocatorConfig config =
      parse_alloc_conf("max_split_size_mb:128, garbage_collection_threshold:0.6,expandable_segments:True,");
  CHECK(config.max_split_size == 128ull << 20);
  CHECK(config.garbage_collection_threshold == 0.6);
  CHECK(config.expandable_segments);
}

TEST_CASE("a single division count fills the whole table", "[sim][config]") {
  AllocatorConfig config = parse_alloc_conf("roundup_power2_divisions:4");
  for (uint64_t divisions : config.roundup_power2_divisions) CHECK(divisions == 4);
}

TEST_CASE("through 2.8 the '>' entry overwrites the last key's own interval", "[sim][config]") {
  // Keys 256, 512, 1024 MiB have indices 8, 9, 10. The first key fills 0..7 with 1;
  // '>' fills from index 10 on, losing the 4.
  AllocatorConfig config = parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  CHECK(config.roundup_power2_divisions[0] == 1);
  CHECK(config.roundup_power2_divisions[8] == 1);
  CHECK(config.roundup_power2_divisions[9] == 2);
  CHECK(config.roundup_power2_divisions[10] == 8);
  CHECK(config.roundup_power2_divisions[15] == 8);
}

TEST_CASE("from 2.9 the '>' entry starts after the last key", "[sim][config]") {
  AllocatorConfig base;
  base.torch_version = 209;
  AllocatorConfig config = parse_alloc_conf("roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]", base);
  // The 2.9 gtest: 32 MiB -> 8, 64 -> 8, 128 -> 2, 256 -> 4, 512 -> 2, 1024 -> 4, 2048 -> 1.
  CHECK(config.roundup_power2_divisions[5] == 8);
  CHECK(config.roundup_power2_divisions[6] == 8);
  CHECK(config.roundup_power2_divisions[7] == 2);
  CHECK(config.roundup_power2_divisions[8] == 4);
  CHECK(config.roundup_power2_divisions[9] == 2);
  CHECK(config.roundup_power2_divisions[10] == 4);
  CHECK(config.roundup_power2_divisions[11] == 1);
}

TEST_CASE("a zero division in a list is accepted from 2.4 and rejected before", "[sim][config]") {
  CHECK(error_of("roundup_power2_divisions:[256:0,>:2]") == "no error");
  CHECK(error_of("roundup_power2_divisions:[256:0,>:2]", 203) ==
        "PYTORCH_CUDA_ALLOC_CONF: error: invalid option 'roundup_power2_divisions': "
        "For roundups, the divisions has to be power of 2 ");
}

TEST_CASE("max_split_size_mb of 20 or less is rejected with PyTorch's text", "[sim][config]") {
  CHECK(error_of("max_split_size_mb:20") ==
        "PYTORCH_CUDA_ALLOC_CONF: error: invalid option 'max_split_size_mb': "
        "CachingAllocator option max_split_size_mb too small, must be > 20");
}

TEST_CASE("expandable_segments takes exactly True or False", "[sim][config]") {
  CHECK(error_of("expandable_segments:true") ==
        "PYTORCH_CUDA_ALLOC_CONF: error: invalid option 'expandable_segments': "
        "Expected a single True/False argument for expandable_segments");
}

TEST_CASE("an unknown option is named with a suggestion", "[sim][config]") {
  CHECK(error_of("max_split_size:128") ==
        "PYTORCH_CUDA_ALLOC_CONF: error: Unrecognized CachingAllocator option: max_split_size "
        "(did you mean 'max_split_size_mb'?)");
}

TEST_CASE("a missing colon is a parse error naming the expected token", "[sim][config]") {
  CHECK(error_of("expandable_segments True") ==
        "PYTORCH_CUDA_ALLOC_CONF: error: Unrecognized CachingAllocator option: expandable_segmentsTrue "
        "(did you mean 'expandable_segments'?)");
  CHECK(error_of("max_split_size_mb:128:4") ==
        "PYTORCH_CUDA_ALLOC_CONF: error: invalid option 'max_split_size_mb': "
        "Error parsing CachingAllocator settings, expected ,");
}

TEST_CASE("a non-numeric size is rejected rather than read as zero", "[sim][config]") {
  CHECK(error_of("max_split_size_mb:lots").find("is not an integer") != std::string::npos);
}

TEST_CASE("garbage_collection_threshold must lie strictly between 0 and 1", "[sim][config]") {
  CHECK(error_of("garbage_collection_threshold:1.0").find("garbage_collect_threshold too big") != std::string::npos);
  CHECK(error_of("garbage_collection_threshold:0").find("garbage_collect_threshold too small") != std::string::npos);
}

TEST_CASE("each parse resets max_split_size, the division table and the gc threshold", "[sim][config]") {
  AllocatorConfig first = parse_alloc_conf("max_split_size_mb:64,expandable_segments:True");
  AllocatorConfig second = parse_alloc_conf("garbage_collection_threshold:0.5", first);
  CHECK(second.max_split_size == AllocatorConfig::kUnlimited);
  CHECK(second.expandable_segments);  // not reset, as in PyTorch
}
