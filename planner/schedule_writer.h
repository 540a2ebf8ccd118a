// ScheduleWriter: appends alloc/free/mark events to a PlannedTrace with their EventInfo,
// giving every allocation a unique slot name without per-event formatting or strings: a slot's
// name is two pieces of the trace's SlotNames, the micro-batch prefix and the tensor name.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/planned_trace.h"

namespace oomcast::planner {

class ScheduleWriter {
 public:
  explicit ScheduleWriter(PlannedTrace* out);

  uint32_t intern(const std::string& text);
  // Reserves room for about `events` events (avoids regrowing the trace vectors).
  void reserve(size_t events);
  const std::string& names_of(uint32_t name) const { return out_->names[name]; }
  // Maps a graph's name table into the trace's names (memoised per graph).
  uint32_t graph_name(const std::vector<std::string>& names, std::vector<uint32_t>* cache, uint32_t index);

  void set_iteration(int32_t iteration) { iteration_ = iteration; }
  int32_t iteration() const { return iteration_; }
  // Starts a phase: emits the mark "iter<i>/<phase>" (or the label as given when `raw`).
  void begin_phase(const std::string& label);
  // Prefix that keeps slot names unique across micro-batches ("i1.m0/").
  void set_slot_prefix(const std::string& prefix);
  void set_op(uint32_t op) { op_ = op; }

  // The stream later allocations are made on (0, the default stream, unless set).
  void set_stream(sim::StreamId stream) { stream_ = stream; }
  sim::StreamId stream() const { return stream_; }
  // Returns the slot of the new allocation.
  uint32_t alloc(uint32_t tensor_name, uint64_t bytes, TensorCategory category);
  void free(uint32_t slot);
  // The allocator events beyond alloc and free (docs/trace-format.md).
  void record_stream(uint32_t slot, sim::StreamId stream);
  void sync(sim::StreamId stream);
  void sync_device();
  void empty_cache();
  // torch.cuda.graph capture of `graph` on `stream`; `pool`: the graph (or pool handle)
  // whose pool it shares, "" for a fresh pool.
  void capture_begin(const std::string& graph, sim::StreamId stream, const std::string& pool);
  void capture_end(const std::string& graph);
  void graph_release(const std::string& graph);
  uint64_t live_bytes() const { return live_bytes_; }
  size_t live_count() const { return live_count_; }
  // Category of a live or freed slot.
  TensorCategory category(uint32_t slot) const { return slot_category_[slot]; }
  bool is_live(uint32_t slot) const { return slot < slot_live_.size() && slot_live_[slot]; }
  // Calls visit(slot, category, bytes) for every live slot.
  template <typename Visit>
  void for_each_live(Visit visit) const {
    for (uint32_t slot = 0; slot < slot_live_.size(); ++slot) {
      if (slot_live_[slot]) visit(slot, slot_category_[slot], slot_bytes_[slot]);
    }
  }

 private:
  uint32_t trace_string(const std::string& text);
  void push(const sim::Event& event);

  PlannedTrace* out_;
  std::unordered_map<std::string, uint32_t> name_index_;
  std::unordered_map<std::string, uint32_t> mark_index_;
  uint32_t slot_prefix_ = 0;                      // piece of the trace's slot names
  std::unordered_map<std::string, uint32_t> prefix_piece_;
  std::vector<uint32_t> name_piece_;              // names index -> slot-name piece (0: none yet)
  std::vector<uint32_t> slot_tensor_;
  std::vector<TensorCategory> slot_category_;
  std::vector<uint8_t> slot_live_;
  std::vector<uint64_t> slot_bytes_;
  int32_t iteration_ = 0;
  uint32_t phase_ = 0;
  uint32_t op_ = 0;
  sim::StreamId stream_ = 0;
  uint64_t live_bytes_ = 0;
  size_t live_count_ = 0;
};

}  // namespace oomcast::planner
