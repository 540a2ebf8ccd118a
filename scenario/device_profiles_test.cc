// Tests of the device profile table: totals as OOM texts print them, cuBLAS workspace sizes
// per architecture, name matching and the cpu profile.
#include "scenario/device_profiles.h"

#include <cstdio>

#include <catch2/catch.hpp>

namespace oomcast::scenario {
namespace {

// The capacity as PyTorch's OOM text prints it ("%.2f GiB").
std::string capacity_text(const char* name) {
  const DeviceProfile* profile = find_device_profile(name);
  REQUIRE(profile != nullptr);
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(profile->total_bytes) / (1ull << 30));
  return text;
}

TEST_CASE("device totals print as the capacities real OOM texts show", "[planner][device]") {
  CHECK(capacity_text("a100-80gb") == "79.15 GiB");
  CHECK(capacity_text("a100-40gb") == "39.38 GiB");
  CHECK(capacity_text("h100-80gb") == "79.19 GiB");
  CHECK(capacity_text("h200") == "139.80 GiB");
  CHECK(capacity_text("t4") == "14.75 GiB");
  CHECK(capacity_text("v100-16gb") == "15.77 GiB");
  CHECK(capacity_text("v100-32gb") == "31.75 GiB");
  CHECK(capacity_text("rtx-3090") == "23.70 GiB");
  CHECK(capacity_text("rtx-4090") == "23.68 GiB");
  CHECK(capacity_text("a10g") == "22.06 GiB");
  CHECK(capacity_text("l4") == "22.03 GiB");
  CHECK(capacity_text("l40s") == "44.42 GiB");
  CHECK(capacity_text("b200") == "178.35 GiB");
  CHECK(capacity_text("h100-nvl") == "93.00 GiB");
  CHECK(capacity_text("h20") == "95.00 GiB");
  CHECK(capacity_text("rtx-5090") == "31.37 GiB");
  CHECK(capacity_text("rtx-6000-ada") == "44.43 GiB");
}

TEST_CASE("every GPU profile has a memory bandwidth, a bf16 peak and a streaming multiprocessor count",
          "[planner][device]") {
  for (const auto& profile : device_profiles()) {
    if (profile.is_cpu) continue;
    INFO(profile.name);
    CHECK(profile.throughput.hbm_gbps > 0.0);
    CHECK(profile.peak_tflops > 0.0);
    CHECK(profile.throughput.sm_count > 0);
  }
}

TEST_CASE("Hopper GPUs get a 32 MiB cuBLAS workspace and the others 8,519,680 bytes", "[planner][device]") {
  CHECK(find_device_profile("h100-80gb")->cublas_workspace_bytes == 33'554'432);
  CHECK(find_device_profile("h200")->cublas_workspace_bytes == 33'554'432);
  CHECK(find_device_profile("a100-80gb")->cublas_workspace_bytes == 8'519'680);
  CHECK(find_device_profile("t4")->cublas_workspace_bytes == 8'519'680);
}

TEST_CASE("every GPU profile holds two cuBLAS workspaces and the 512 MiB fallback context", "[planner][device]") {
  for (const auto& profile : device_profiles()) {
    if (profile.is_cpu) continue;
    INFO(profile.name);
    CHECK(profile.cublas_workspaces == 2);
    CHECK(profile.context_bytes == (512ull << 20));
    CHECK(profile.compute_capability >= 70);
  }
}

TEST_CASE("profile names match ignoring case, spaces and dashes", "[planner][device]") {
  CHECK(find_device_profile("RTX 3090") == find_device_profile("rtx-3090"));
  CHECK(find_device_profile("rtx3090") == find_device_profile("rtx-3090"));
  CHECK(find_device_profile("A100-80GB")->name == "a100-80gb");
  CHECK(find_device_profile("a100") == nullptr);
}

TEST_CASE("a near-miss profile name is suggested by prefix before edit distance", "[planner][device]") {
  CHECK(device_did_you_mean("h100") == " (did you mean one of h100-80gb, h100-nvl?)");
  CHECK(device_did_you_mean("a100") == " (did you mean one of a100-80gb, a100-40gb?)");
  CHECK(device_did_you_mean("rxt-4090") == " (did you mean 'rtx-4090'?)");
}

TEST_CASE("another GPU model is never suggested as a typo: the error says how to describe it", "[planner][device]") {
  const std::string custom = " (no profile for that GPU: describe it as device: {total_gib: N, compute_capability: X.Y})";
  CHECK(device_did_you_mean("rtx 4080") == custom);
  CHECK(device_did_you_mean("a5000") == custom);
  CHECK(device_did_you_mean("b100") == custom);
  CHECK(device_did_you_mean("tpu-v5") == custom);
}

TEST_CASE("the cpu profile has no context, no workspace and no real capacity limit", "[planner][device]") {
  const DeviceProfile* cpu = find_device_profile("cpu");
  REQUIRE(cpu != nullptr);
  CHECK(cpu->is_cpu);
  CHECK(cpu->context_bytes == 0);
  CHECK(cpu->cublas_workspace_bytes == 0);
  CHECK(cpu->cublas_workspaces == 0);
  DeviceConfig config = device_config_from_profile(*cpu);
  CHECK(config.is_cpu);
  CHECK(config.model.total_bytes >= (1ull << 50));
}

TEST_CASE("the eleven GPUs of the issue, the L40S, the GPUs of issue 33 and cpu are listed", "[planner][device]") {
  CHECK(device_profile_names() == std::vector<std::string>{"a100-80gb", "a100-40gb", "h100-80gb", "h200", "l4", "t4",
                                                           "v100-16gb", "v100-32gb", "rtx-3090", "rtx-4090", "a10g",
                                                           "l40s", "b200", "h100-nvl", "h20", "rtx-5090",
                                                           "rtx-6000-ada", "a6000", "a40", "cpu"});
}

}  // namespace
}  // namespace oomcast::scenario
