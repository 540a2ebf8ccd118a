// The scenario's `parallel.fsdp2` section (torch.distributed.fsdp.fully_shard): its defaults,
// MixedPrecisionPolicy's dtypes, and errors naming the file, line and key for what is not
// modelled (an int reshard_after_forward).
#include <catch2/catch.hpp>

#include <algorithm>

#include "base/input_error.h"
#include "scenario/scenario_loader.h"

using namespace oomcast;
using namespace oomcast::scenario;

namespace {

Scenario load(const std::string& parallel) {
  return load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 64\nparallel: " + parallel + "\n", "x.yaml");
}

}  // namespace

TEST_CASE("an empty fsdp2 section selects FSDP2 with fully_shard's defaults", "[parallel][loader][fsdp2]") {
  Scenario s = load("{world_size: 8, fsdp2: {}}");
  CHECK(s.parallel.engine == ParallelEngine::Fsdp2);
  CHECK(s.parallel.fsdp2.reshard_after_forward);
  CHECK_FALSE(s.parallel.fsdp2.mixed_precision);
  CHECK(s.precision == Precision::Fp32);
}

TEST_CASE("FSDP2 bf16 MixedPrecisionPolicy plans the model in bf16 and reduces in param_dtype unless told",
          "[parallel][loader][fsdp2]") {
  Scenario s = load("{world_size: 8, engine: fsdp2, fsdp2: {reshard_after_forward: false, mixed_precision: {param_dtype: bf16}}}");
  CHECK(s.precision == Precision::PureBf16);
  CHECK_FALSE(s.parallel.fsdp2.reshard_after_forward);
  CHECK(s.parallel.fsdp2.param_dtype == FloatDtype::BFloat16);
  CHECK(s.parallel.fsdp2.reduce_dtype == FloatDtype::BFloat16);
  Scenario fp32_reduce = load("{world_size: 8, fsdp2: {mixed_precision: {param_dtype: bf16, reduce_dtype: fp32}}}");
  CHECK(fp32_reduce.parallel.fsdp2.reduce_dtype == FloatDtype::Float32);
}

TEST_CASE("an integer reshard_after_forward is refused at its key", "[parallel][loader][fsdp2]") {
  CHECK_THROWS_WITH(load("{world_size: 8, fsdp2: {reshard_after_forward: 2}}"),
                    Catch::Contains("x.yaml:4") && Catch::Contains("parallel.fsdp2.reshard_after_forward") &&
                        Catch::Contains("not modelled"));
}

TEST_CASE("offload_policy cpu selects FSDP2's CPUOffloadPolicy and any other value is refused at its key",
          "[parallel][loader][fsdp2]") {
  CHECK(load("{world_size: 8, fsdp2: {offload_policy: cpu}}").parallel.fsdp2.cpu_offload);
  CHECK_FALSE(load("{world_size: 8, fsdp2: {}}").parallel.fsdp2.cpu_offload);
  CHECK_THROWS_WITH(load("{world_size: 8, fsdp2: {offload_policy: nvme}}"),
                    Catch::Contains("x.yaml:4") && Catch::Contains("offload_policy"));
}

TEST_CASE("an FSDP2 output_dtype is accepted with a warning that its cast is not modelled", "[parallel][loader][fsdp2]") {
  Scenario s = load("{world_size: 2, fsdp2: {mixed_precision: {param_dtype: bf16, output_dtype: fp32}}}");
  const auto& warnings = s.parallel.warnings;
  CHECK(std::any_of(warnings.begin(), warnings.end(),
                    [](const std::string& w) { return w.find("output_dtype") != std::string::npos; }));
  Scenario plain = load("{world_size: 2, fsdp2: {mixed_precision: {param_dtype: bf16}}}");
  CHECK(std::none_of(plain.parallel.warnings.begin(), plain.parallel.warnings.end(),
                     [](const std::string& w) { return w.find("output_dtype") != std::string::npos; }));
}

TEST_CASE("fsdp and fsdp2 sections cannot both be given", "[parallel][loader][fsdp2]") {
  CHECK_THROWS_WITH(load("{world_size: 2, fsdp: {}, fsdp2: {}}"), Catch::Contains("one engine section"));
  CHECK_THROWS_WITH(load("{world_size: 2, engine: fsdp, fsdp2: {}}"), Catch::Contains("does not match"));
}

TEST_CASE("an unknown fsdp2 key is named with the section's path", "[parallel][loader][fsdp2]") {
  CHECK_THROWS_WITH(load("{world_size: 2, fsdp2: {sharding_strategy: FULL_SHARD}}"),
                    Catch::Contains("sharding_strategy"));
}
