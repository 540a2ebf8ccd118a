// The table of memory outside PyTorch's caching allocator (scenario/outside_allocator.yaml):
// CUDA context by architecture x CUDA release x module loading, cuBLAS workspace by torch
// release x architecture, cuDNN rules and NCCL buffer sizes, each row with its source. This
// file reads the table and answers lookups; scenario/outside_allocator.h applies them to a
// scenario.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomcast::scenario {

// "12.4" -> 1204; both torch and CUDA releases use this packing (as sim::TorchVersion does).
using ReleaseNumber = int;

// An inclusive release range: "11.7-12.9", "12.0+" (open-ended) or "2.7" (one release).
struct ReleaseRange {
  ReleaseNumber min = 0;
  ReleaseNumber max = 0;
  bool contains(ReleaseNumber release) const { return release >= min && release <= max; }
  int width() const { return max - min; }
};

enum class ModuleLoading { Lazy, Eager };
const char* module_loading_name(ModuleLoading loading);

// Where a row came from: which section, its position (1-based) and its citation.
struct TableRowOrigin {
  std::string section;  // "context", "cublas_workspace", ...
  int row = 0;
  std::string kind;     // measurement | derived | doc | ours
  std::string source;
};

struct ContextRow {
  std::vector<int> capabilities;  // empty = any architecture; 90 = sm_90
  ReleaseRange cuda;
  // The torch releases measured (optional `torch:`, every release when absent): an eager
  // context loads all of libtorch_cuda's kernels, so it grows with the torch release.
  ReleaseRange torch{0, 1 << 30};
  ModuleLoading loading = ModuleLoading::Lazy;
  uint64_t bytes = 0;
  TableRowOrigin origin;
};

struct CublasWorkspaceRow {
  std::vector<int> capabilities;
  ReleaseRange torch;
  std::string config;  // CUBLAS_WORKSPACE_CONFIG text
  uint64_t bytes = 0;  // what `config` sums to
  TableRowOrigin origin;
};

struct TorchCudaRow {
  ReleaseRange torch;
  ReleaseNumber cuda = 0;
  TableRowOrigin origin;
};

struct LoadingDefaultRow {
  ReleaseRange torch;
  ReleaseRange cuda;
  ModuleLoading loading = ModuleLoading::Lazy;
  TableRowOrigin origin;
};

struct CudnnRule {
  std::string rule;
  bool modelled = false;
  TableRowOrigin origin;
};

struct NcclBuffers {
  uint64_t simple_bytes = 0;
  uint64_t ll128_bytes = 0;
  uint64_t ll_bytes = 0;
  int64_t channels = 0;
  int64_t ring_peers = 0;
  // Per communicator: channels x ring peers x (simple + ll128 + ll).
  uint64_t per_communicator_bytes() const {
    return static_cast<uint64_t>(channels * ring_peers) * (simple_bytes + ll128_bytes + ll_bytes);
  }
};

struct OutsideAllocatorTable {
  std::vector<TorchCudaRow> torch_default_cuda;
  std::vector<LoadingDefaultRow> module_loading_default;
  std::vector<ContextRow> context;
  std::vector<CublasWorkspaceRow> cublas_workspace;
  std::vector<CudnnRule> cudnn;
  NcclBuffers nccl;

  // The most specific matching row (architecture named beats `any`, then the narrowest range,
  // for a context row the CUDA range then the torch range, then the row written last);
  // nullopt/nullptr when none matches.
  std::optional<ReleaseNumber> default_cuda(ReleaseNumber torch) const;
  std::optional<ModuleLoading> default_loading(ReleaseNumber torch, ReleaseNumber cuda) const;
  const ContextRow* find_context(int capability, ReleaseNumber torch, ReleaseNumber cuda, ModuleLoading loading) const;
  const CublasWorkspaceRow* find_cublas_workspace(int capability, ReleaseNumber torch) const;
};

// Parses the table's YAML text; `name` is the file name errors print. Throws InputError
// (file:line:col and key) for a malformed row.
OutsideAllocatorTable parse_outside_allocator_table(const std::string& text, const std::string& name);

// The table compiled into the binary from scenario/outside_allocator.yaml, parsed once.
const OutsideAllocatorTable& outside_allocator_table();

// "12.4" -> 1204. Throws InputError via `fail` semantics of the caller; returns nullopt when
// `text` is not MAJOR.MINOR.
std::optional<ReleaseNumber> parse_release(std::string_view text);
std::string release_text(ReleaseNumber release);  // 1204 -> "12.4"

class YamlNode;
// "11.7-12.9", "12.0+" (open-ended) or "2.7" (one release); throws InputError at the node
// otherwise. Also read by planner/torch_release_facts.cc.
ReleaseRange read_release_range(const YamlNode& node);

// CUBLAS_WORKSPACE_CONFIG ":4096:2:16:8" -> 8,519,680 bytes (":SIZE_KiB:COUNT" pairs summed);
// nullopt when malformed.
std::optional<uint64_t> cublas_workspace_config_bytes(std::string_view config);

}  // namespace oomcast::scenario
