// Tests of the table of memory outside the caching allocator (scenario/outside_allocator.yaml)
// and of how a scenario picks its CUDA release, module loading, context and cuBLAS workspace.
#include "scenario/outside_allocator.h"

#include <catch2/catch.hpp>

#include "scenario/outside_allocator_table.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_test_support.h"

namespace oomcast::scenario {
namespace {

using testing::error_of;

constexpr uint64_t kMiB = 1ull << 20;

// A table whose context section is `rows` (YAML list items), the other sections empty or trivial.
OutsideAllocatorTable context_table(const std::string& rows) {
  return parse_outside_allocator_table("torch_default_cuda: []\nmodule_loading_default: []\ncontext:" + rows + R"(cublas_workspace: []
cudnn: []
nccl:
  - {key: simple_buffer, bytes: 1, source: s, kind: doc}
  - {key: ll128_buffer, bytes: 1, source: s, kind: doc}
  - {key: ll_buffer, bytes: 1, source: s, kind: doc}
  - {key: channels, count: 1, source: s, kind: doc}
  - {key: ring_peers, count: 1, source: s, kind: doc}
)", "t.yaml");
}

Scenario load(const std::string& device, const std::vector<std::string>& overrides = {}) {
  return load_scenario_text("model: gpt2\nbatch_size: 1\nseq_len: 16\n" + device, "s.yaml", overrides);
}

TEST_CASE("every row of the bundled table cites a source and parses", "[planner][outside]") {
  const OutsideAllocatorTable& table = outside_allocator_table();
  CHECK(table.context.size() >= 5);
  for (const ContextRow& row : table.context) {
    CHECK_FALSE(row.origin.source.empty());
    CHECK_FALSE(row.origin.kind.empty());
    CHECK(row.bytes >= 100 * kMiB);
  }
  for (const CublasWorkspaceRow& row : table.cublas_workspace) CHECK_FALSE(row.origin.source.empty());
  CHECK(table.nccl.per_communicator_bytes() == 16 * 2 * (4 * kMiB + 4 * kMiB + 256 * 1024));
}

TEST_CASE("a row for the GPU's architecture beats an any-architecture row", "[planner][outside]") {
  OutsideAllocatorTable table = context_table(R"(
  - {arch: [sm_90], cuda: "12.0+", loading: lazy, mib: 500, kind: ours, source: a}
  - {arch: any, cuda: "12.4", loading: lazy, mib: 400, kind: doc, source: b}
)");
  CHECK(table.find_context(90, 206, 1204, ModuleLoading::Lazy)->bytes == 500 * kMiB);
  CHECK(table.find_context(80, 206, 1204, ModuleLoading::Lazy)->bytes == 400 * kMiB);
  CHECK(table.find_context(80, 206, 1206, ModuleLoading::Lazy) == nullptr);
  CHECK(table.find_context(90, 206, 1204, ModuleLoading::Eager) == nullptr);
}

TEST_CASE("a table row without a source is refused at its line", "[planner][outside]") {
  std::string text = "torch_default_cuda:\n  - {torch: \"2.6\", cuda: \"12.4\", source: \"\"}\n";
  CHECK(error_of([&] { parse_outside_allocator_table(text, "t.yaml"); }).find("t.yaml:2:") != std::string::npos);
}

TEST_CASE("the default torch 2.6 scenario gets CUDA 12.4, lazy loading and a cited context", "[planner][outside]") {
  Scenario s = load("device: h200\n");
  CHECK(s.device.cuda_version == 1204);
  CHECK(s.device.module_loading == "lazy");
  CHECK(s.device.cuda_context_bytes == 426 * kMiB);
  CHECK(s.device.model.context_bytes == 426 * kMiB);
  CHECK(s.device.context_source.find("context row") != std::string::npos);
  CHECK(s.device.context_source.find("unsloth-zoo PR #1053") != std::string::npos);
}

TEST_CASE("torch 1.13 on CUDA 11.7 gets PR 86509's lazy and eager contexts", "[planner][outside]") {
  Scenario lazy = load("device: a100-80gb\nallocator: {torch_version: \"1.13\"}\n");
  CHECK(lazy.device.cuda_version == 1107);
  CHECK(lazy.device.module_loading == "lazy");
  CHECK(lazy.device.cuda_context_bytes == static_cast<uint64_t>(253.75 * kMiB));
  Scenario eager = load("device: {profile: a100-80gb, module_loading: eager}\nallocator: {torch_version: \"1.13\"}\n");
  CHECK(eager.device.cuda_context_bytes == static_cast<uint64_t>(615.75 * kMiB));
}

TEST_CASE("torch before 1.13 on CUDA before 11.7 defaults to eager loading", "[planner][outside]") {
  Scenario s = load("device: v100-32gb\nallocator: {torch_version: \"1.6\"}\n");
  CHECK(s.device.cuda_version == 1002);
  CHECK(s.device.module_loading == "eager");
  CHECK(s.device.cuda_context_bytes == 1008 * kMiB);  // the sm_70 row beats the any row
}

// Issue 26, item 7: the Hugging Face guide measured 1343 MB for torch.ones((1, 1)).cuda() on a
// V100 with torch 1.10; the Titan V row (torch 1.3) said 1008 MiB.
TEST_CASE("a V100 with torch 1.10 takes the context measured under torch 1.10", "[planner][outside]") {
  Scenario s = load("device: v100-16gb\nallocator: {torch_version: \"1.10\"}\n");
  CHECK(s.device.cuda_version == 1002);
  CHECK(s.device.cuda_context_bytes == 1341 * kMiB);
  CHECK(s.device.context_source.find("model_memory_anatomy.md") != std::string::npos);
}

TEST_CASE("a context row with a torch range beats one without for a release inside it", "[planner][outside]") {
  OutsideAllocatorTable table = context_table(R"(
  - {arch: [sm_70], cuda: "10.0-10.2", loading: eager, mib: 1000, kind: measurement, source: a}
  - {arch: [sm_70], cuda: "10.0-10.2", torch: "1.10-1.12", loading: eager, mib: 1300, kind: derived, source: b}
)");
  CHECK(table.find_context(70, 110, 1002, ModuleLoading::Eager)->bytes == 1300 * kMiB);
  CHECK(table.find_context(70, 103, 1002, ModuleLoading::Eager)->bytes == 1000 * kMiB);
}

TEST_CASE("device.context_mib overrides the table and is named as the source", "[planner][outside]") {
  Scenario s = load("device: {profile: l4, context_mib: 300}\n");
  CHECK(s.device.cuda_context_bytes == 300 * kMiB);
  CHECK(s.device.context_source == "scenario: device.context_mib");
}

TEST_CASE("a CUDA release with no table row falls back to 512 MiB and says so", "[planner][outside]") {
  Scenario s = load("device: {profile: l4, cuda_version: \"11.2\", module_loading: lazy}\n");
  CHECK(s.device.cuda_context_bytes == 512 * kMiB);
  CHECK(s.device.context_source.find("no row") != std::string::npos);
}

TEST_CASE("CUBLAS_WORKSPACE_CONFIG text sets the workspace as cuBLAS sums it", "[planner][outside]") {
  CHECK(cublas_workspace_config_bytes(":4096:2:16:8") == 8'519'680u);
  CHECK(cublas_workspace_config_bytes(":4096:8") == 33'554'432u);
  CHECK(cublas_workspace_config_bytes(":0:0") == 0u);
  CHECK_FALSE(cublas_workspace_config_bytes("4096:8").has_value());
  CHECK_FALSE(cublas_workspace_config_bytes(":4096").has_value());
  Scenario s = load("device: {profile: a100-80gb, cublas_workspace_config: \":16:8\"}\n");
  CHECK(s.device.cublas_workspace_bytes == 16 * 1024 * 8);
}

TEST_CASE("Hopper's 32 MiB cuBLAS workspace starts with torch 2.0", "[planner][outside]") {
  CHECK(load("device: h100-80gb\n").device.cublas_workspace_bytes == 33'554'432);
  CHECK(load("device: h100-80gb\nallocator: {torch_version: \"1.13\"}\n").device.cublas_workspace_bytes == 8'519'680);
  CHECK(load("device: a100-80gb\n").device.cublas_workspace_bytes == 8'519'680);
}

TEST_CASE("bad outside-allocator keys are errors at the key", "[planner][outside]") {
  CHECK(error_of([] { load("device: {profile: h200, cuda_version: \"twelve\"}\n"); })
            .find("'device.cuda_version' must be a CUDA release") != std::string::npos);
  CHECK(error_of([] { load("device: {profile: h200, module_loading: lazyy}\n"); }).find("lazy") != std::string::npos);
  CHECK(error_of([] { load("device: {profile: h200, cublas_workspace_config: \":4096:8\", cublas_workspace_bytes: 1}\n"); })
            .find("not both") != std::string::npos);
  CHECK(error_of([] { load("device: {profile: cpu, cuda_version: \"12.4\"}\n"); })
            .find("does not apply to the cpu device") != std::string::npos);
}

}  // namespace
}  // namespace oomcast::scenario
