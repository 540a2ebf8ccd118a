// The device a recording is replayed on (replay, doctor): --device names a GPU profile,
// --device-memory gives a card's total; either way the CUDA context the process holds outside
// the allocator is counted, as plan counts it (scenario/outside_allocator.yaml), unless
// --context-memory says otherwise.
#pragma once

#include <CLI/CLI.hpp>

#include "advisor/replay_device.h"

namespace oomcast::cli {

using DeviceFlags = advisor::ReplayDeviceRequest;

// Registers --device, --device-memory and --context-memory on `command`, and
// --memory-fraction when `with_fraction`; advisor::replay_device() reads them.
void add_device_flags(CLI::App* command, DeviceFlags* flags, bool with_fraction);

}  // namespace oomcast::cli
