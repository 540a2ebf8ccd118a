// Warnings for allocator settings that do not do what they seem to: options that are inert
// in the configuration they appear in, or that undo each other (spec §3.4-§4, §10). Each
// names the options and says what the allocator will actually do.
#pragma once

#include <string>
#include <vector>

#include "sim/allocator_config.h"

namespace oomcast::sim {

// `memory_fraction_set`: torch.cuda.set_per_process_memory_fraction was called (or
// per_process_memory_fraction given); garbage collection needs it.
std::vector<std::string> allocator_config_warnings(const AllocatorConfig& config, bool memory_fraction_set);

}  // namespace oomcast::sim
