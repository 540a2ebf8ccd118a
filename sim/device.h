// Device: the GPU as the allocator sees it (cudaMalloc, cudaFree, virtual-memory map and
// unmap, cudaMemGetInfo), and SimulatedDevice, the in-memory implementation driven by a
// DeviceModel. The outside world enters the simulator only through this interface.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "sim/device_model.h"

namespace oomcast::sim {

class Device {
 public:
  virtual ~Device() = default;
  // Contract: returns the start of `size` fresh bytes, or nullopt when the GPU cannot hold
  // them (cudaErrorMemoryAllocation). Never returns an address that is still in use.
  virtual std::optional<uint64_t> malloc(uint64_t size) = 0;
  // Contract: `address` and `size` are those of an earlier successful malloc.
  virtual void free(uint64_t address, uint64_t size) = 0;
  // Contract: reserves virtual address space only; physical memory is unchanged.
  virtual uint64_t reserve_address_space(uint64_t size) = 0;
  virtual void release_address_space(uint64_t address, uint64_t size) = 0;
  // Contract: maps `size` physical bytes at `address` (inside a reservation), all or
  // nothing; false when the GPU cannot hold them.
  virtual bool map(uint64_t address, uint64_t size) = 0;
  virtual void unmap(uint64_t address, uint64_t size) = 0;
  // Contract: counts a region that was cudaMalloc'd before the simulation started (state
  // restored from a snapshot) as in use, and never hands out addresses inside it.
  virtual void adopt_region(uint64_t address, uint64_t size) = 0;
  virtual uint64_t total_bytes() const = 0;
  virtual uint64_t free_bytes() const = 0;  // what cudaMemGetInfo would report
  virtual const DeviceModel& model() const = 0;
};

// A device with the capacity of a DeviceModel. New regions are placed above every earlier
// one (CUDA promises no order; this rule is documented in docs/allocator-model.md), except
// that addresses can be scripted: a replay of a real snapshot hands out the recorded
// segment addresses, in order, while the requested sizes agree with the recording.
class SimulatedDevice : public Device {
 public:
  explicit SimulatedDevice(const DeviceModel& model);

  std::optional<uint64_t> malloc(uint64_t size) override;
  void free(uint64_t address, uint64_t size) override;
  uint64_t reserve_address_space(uint64_t size) override;
  void release_address_space(uint64_t address, uint64_t size) override;
  bool map(uint64_t address, uint64_t size) override;
  void unmap(uint64_t address, uint64_t size) override;
  uint64_t total_bytes() const override { return model_.total_bytes; }
  uint64_t free_bytes() const override;
  const DeviceModel& model() const override { return model_; }

  // Queues (size, address) pairs the next mallocs of those sizes get, in order.
  void script_addresses(std::deque<std::pair<uint64_t, uint64_t>> sizes_and_addresses);
  // Queues the addresses the next address-space reservations get, in order.
  void script_reservations(std::deque<uint64_t> addresses) { scripted_reservations_ = std::move(addresses); }
  // Places bump-allocated regions at or above `address`.
  void place_new_regions_above(uint64_t address);
  void adopt_region(uint64_t address, uint64_t size) override;

 private:
  uint64_t bump(uint64_t size);

  DeviceModel model_;
  uint64_t physical_in_use_ = 0;
  uint64_t next_address_ = 0x7f0000000000ull;
  std::deque<std::pair<uint64_t, uint64_t>> scripted_;
  std::deque<uint64_t> scripted_reservations_;
};

}  // namespace oomcast::sim
