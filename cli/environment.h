// The environment PyTorch itself reads: PYTORCH_CUDA_ALLOC_CONF. A job launched from this
// shell would run under it, so a scenario (or trace replay) that sets no allocator
// configuration of its own is predicted under it, and a note on stderr says so.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace oomcast::cli {

// PYTORCH_CUDA_ALLOC_CONF when set and not empty.
std::optional<std::string> environment_alloc_conf();

// `overrides` plus allocator.conf=$PYTORCH_CUDA_ALLOC_CONF when the variable is set and the
// scenario at `path` (with `overrides`) configures no allocator option itself.
std::vector<std::string> with_environment_alloc_conf(const std::string& path, std::vector<std::string> overrides);

}  // namespace oomcast::cli
