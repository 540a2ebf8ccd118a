// AllocatorConfig: the settings PYTORCH_CUDA_ALLOC_CONF controls, and the parser of that
// string with PyTorch's syntax and error texts (docs/allocator-model.md, spec §6).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace oomcast::sim {

// Which PyTorch release's allocator to mimic where releases differ (spec §10).
// Encoded as 100*major + minor: 203 = 2.3, 206 = 2.6, 209 = 2.9.
using TorchVersion = int;
inline constexpr TorchVersion kDefaultTorchVersion = 206;

struct AllocatorConfig {
  static constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

  uint64_t max_split_size = kUnlimited;                  // bytes; kUnlimited = not set
  uint64_t max_non_split_rounding_size = 20ull << 20;    // bytes (2.6+; 20 MiB before)
  std::array<uint64_t, 16> roundup_power2_divisions{};   // index = floor(log2(MiB)), clamped
  double garbage_collection_threshold = 0.0;             // 0 = off
  bool expandable_segments = false;
  bool release_lock_on_cudamalloc = false;               // no accounting effect
  bool pinned_use_cuda_host_register = false;            // host allocator only
  uint64_t pinned_num_register_threads = 1;              // host allocator only
  bool pinned_use_background_threads = false;            // host allocator only
  TorchVersion torch_version = kDefaultTorchVersion;
  std::string source_text;                               // the string it was parsed from
};

// Parses a PYTORCH_CUDA_ALLOC_CONF value on top of `base`. As in PyTorch, each parse resets
// max_split_size, the roundup table and garbage_collection_threshold before applying keys.
// Throws InputError naming the option and the PyTorch error text for invalid input.
AllocatorConfig parse_alloc_conf(std::string_view text, const AllocatorConfig& base = {});

}  // namespace oomcast::sim
