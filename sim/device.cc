// SimulatedDevice: capacity accounting and address placement.
#include "sim/device.h"

#include <algorithm>

namespace oomcast::sim {
namespace {
constexpr uint64_t kAddressAlignment = 2ull << 20;  // cudaMalloc regions > 1 MiB are 2 MiB aligned
}

SimulatedDevice::SimulatedDevice(const DeviceModel& model) : model_(model) {}

uint64_t SimulatedDevice::free_bytes() const { return model_.free_bytes(physical_in_use_); }

uint64_t SimulatedDevice::bump(uint64_t size) {
  uint64_t address = next_address_;
  uint64_t span = (size + kAddressAlignment - 1) / kAddressAlignment * kAddressAlignment;
  next_address_ += std::max(span, kAddressAlignment);
  return address;
}

std::optional<uint64_t> SimulatedDevice::malloc(uint64_t size) {
  if (size > free_bytes()) return std::nullopt;
  physical_in_use_ += size;
  if (!scripted_.empty() && scripted_.front().first == size) {
    uint64_t address = scripted_.front().second;
    scripted_.pop_front();
    return address;
  }
  return bump(size);
}

void SimulatedDevice::free(uint64_t, uint64_t size) { physical_in_use_ -= std::min(size, physical_in_use_); }

uint64_t SimulatedDevice::reserve_address_space(uint64_t size) {
  if (!scripted_reservations_.empty()) {
    uint64_t address = scripted_reservations_.front();
    scripted_reservations_.pop_front();
    return address;
  }
  return bump(size);
}

void SimulatedDevice::release_address_space(uint64_t, uint64_t) {}

bool SimulatedDevice::map(uint64_t, uint64_t size) {
  if (size > free_bytes()) return false;
  physical_in_use_ += size;
  return true;
}

void SimulatedDevice::unmap(uint64_t, uint64_t size) { physical_in_use_ -= std::min(size, physical_in_use_); }

void SimulatedDevice::script_addresses(std::deque<std::pair<uint64_t, uint64_t>> sizes_and_addresses) {
  scripted_ = std::move(sizes_and_addresses);
}

void SimulatedDevice::place_new_regions_above(uint64_t address) {
  uint64_t aligned = (address + kAddressAlignment - 1) / kAddressAlignment * kAddressAlignment;
  next_address_ = std::max(next_address_, aligned);
}

void SimulatedDevice::adopt_region(uint64_t address, uint64_t size) {
  physical_in_use_ += size;
  place_new_regions_above(address + size);
}

}  // namespace oomcast::sim
