// The newest PyTorch release whose allocator oomcast was compared with (torch 2.13, the pinned
// scripts/venv-requirements.txt). A later release may differ in ways no test has seen, so a
// torch_version beyond it is refused rather than assumed to behave like this one.
#pragma once

#include "sim/allocator_config.h"

namespace oomcast::sim {

inline constexpr TorchVersion kNewestTorchVersion = 213;

}  // namespace oomcast::sim
