// Tests of the scenario's activation_offloading section.
#include "scenario/activation_offload_config_loader.h"

#include <catch2/catch.hpp>

#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;

const std::string kBase = "model: llama-tiny\nbatch_size: 2\nseq_len: 32\n";

Scenario load(const std::string& extra) { return load_scenario_text(kBase + extra, "s.yaml", {}); }

std::string load_error(const std::string& extra) {
  return error_of([&] { load(extra); });
}

TEST_CASE("activation_offloading true is torchtune's offloading of tensors of at least 1024 bytes to pinned memory",
          "[scenario][offload]") {
  const ActivationOffloadConfig config = load("activation_offloading: true\n").activation_offloading;
  CHECK(config.enabled);
  CHECK(config.method == OffloadMethod::Torchtune);
  CHECK(config.min_offload_bytes == 1024);
  CHECK(config.pin_memory);
}

TEST_CASE("save_on_cpu offloads tensors of every size unless a minimum is given", "[scenario][offload]") {
  CHECK(load("activation_offloading: {method: save_on_cpu}\n").activation_offloading.min_offload_bytes == 0);
  CHECK(load("activation_offloading: {method: save_on_cpu, min_offload_bytes: 64}\n")
            .activation_offloading.min_offload_bytes == 64);
}

TEST_CASE("torchtune's side-stream offloading is refused by name", "[scenario][offload]") {
  CHECK_THAT(load_error("activation_offloading: {use_streams: true}\n"),
             Catch::Contains("'activation_offloading.use_streams' true"));
}

TEST_CASE("activation offloading with checkpointing or a sharding engine is refused at the key", "[scenario][offload]") {
  CHECK_THAT(load_error("checkpointing: full\nactivation_offloading: true\n"),
             Catch::Contains("'activation_offloading' with checkpointing"));
  CHECK_THAT(load_error("job: inference\nactivation_offloading: true\n"), Catch::Contains("applies to job train"));
  CHECK_THAT(load_error("activation_offloading: {method: cpu}\n"), Catch::Contains("cpu"));
}

}  // namespace
}  // namespace oomcast::scenario
