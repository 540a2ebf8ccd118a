// replay_device(); see replay_device.h.
#include "advisor/replay_device.h"

#include <fmt/core.h>

#include "base/byte_size.h"
#include "base/input_error.h"
#include "scenario/device_profiles.h"
#include "scenario/outside_allocator.h"

namespace oomcast::advisor {

std::optional<sim::DeviceModel> replay_device(const ReplayDeviceRequest& flags, sim::TorchVersion torch_version) {
  const bool fraction_given = flags.memory_fraction != -1.0;
  if (flags.profile.empty() && flags.device_memory.empty()) {
    if (!flags.context_memory.empty()) {
      throw InputError({}, "--context-memory", "--context-memory needs --device or --device-memory (outside of what total?)");
    }
    if (fraction_given) {
      throw InputError({}, "--memory-fraction", "--memory-fraction needs --device or --device-memory (a fraction of what total?)");
    }
    return std::nullopt;
  }
  if (!flags.profile.empty() && !flags.device_memory.empty()) {
    throw InputError({}, "--device-memory", "give --device (a GPU profile) or --device-memory (a total), not both");
  }
  scenario::DeviceConfig device;
  if (!flags.profile.empty()) {
    const scenario::DeviceProfile* profile = scenario::find_device_profile(flags.profile);
    if (!profile || profile->is_cpu) {
      throw InputError({}, "--device",
                       "--device: no GPU profile '" + flags.profile + "'" + scenario::device_did_you_mean(flags.profile));
    }
    device = scenario::device_config_from_profile(*profile);
  } else {
    // A card known only by its total: the context of the scenario's custom device (sm_80).
    device.compute_capability = 80;
    device.model.total_bytes = parse_byte_size(flags.device_memory, "--device-memory");
  }
  scenario::resolve_outside_allocator({}, torch_version, device);
  sim::DeviceModel model = device.model;
  if (!flags.context_memory.empty()) model.context_bytes = parse_byte_size(flags.context_memory, "--context-memory");
  if (fraction_given) {
    // nan and 0 would silently mean "no fraction": refused (a fraction of 0 allows nothing).
    if (!(flags.memory_fraction > 0.0 && flags.memory_fraction <= 1.0)) {
      throw InputError({}, "--memory-fraction",
                       fmt::format("--memory-fraction must be above 0 and at most 1, got {}", flags.memory_fraction));
    }
    model.memory_fraction = flags.memory_fraction;
  }
  return model;
}

}  // namespace oomcast::advisor
