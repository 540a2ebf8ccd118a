// ScheduleWriter: the one place that appends to the planned trace.
#include "planner/schedule_writer.h"

#include <stdexcept>

namespace oomcast::planner {

ScheduleWriter::ScheduleWriter(PlannedTrace* out) : out_(out) {
  if (out_->names.empty()) out_->names.emplace_back();
  for (uint32_t i = 0; i < out_->names.size(); ++i) name_index_.emplace(out_->names[i], i);
  if (out_->trace.strings.empty()) out_->trace.strings.emplace_back();
}

uint32_t ScheduleWriter::intern(const std::string& text) {
  auto [it, inserted] = name_index_.emplace(text, static_cast<uint32_t>(out_->names.size()));
  if (inserted) out_->names.push_back(text);
  return it->second;
}

void ScheduleWriter::reserve(size_t events) {
  out_->trace.events.reserve(events);
  out_->info.reserve(events);
  out_->trace.slot_names.reserve(events / 2 + 16);
  slot_tensor_.reserve(events / 2 + 16);
  slot_category_.reserve(events / 2 + 16);
  slot_live_.reserve(events / 2 + 16);
  slot_bytes_.reserve(events / 2 + 16);
}

uint32_t ScheduleWriter::graph_name(const std::vector<std::string>& names, std::vector<uint32_t>* cache,
                                    uint32_t index) {
  if (cache->size() != names.size()) cache->assign(names.size(), UINT32_MAX);
  uint32_t& mapped = (*cache)[index];
  if (mapped == UINT32_MAX) mapped = intern(names[index]);
  return mapped;
}

uint32_t ScheduleWriter::trace_string(const std::string& text) {
  auto [it, inserted] = mark_index_.emplace(text, static_cast<uint32_t>(out_->trace.strings.size()));
  if (inserted) out_->trace.strings.push_back(text);
  return it->second;
}

void ScheduleWriter::push(const sim::Event& event) {
  out_->trace.events.push_back(event);
  out_->info.push_back(EventInfo{iteration_, phase_, op_, 0, TensorCategory::Activation});
}

void ScheduleWriter::begin_phase(const std::string& label) {
  phase_ = intern(label);
  out_->trace.events.push_back(sim::Event{sim::EventKind::Mark, 0, trace_string(label), 0, 0});
  out_->info.push_back(EventInfo{iteration_, phase_, 0, 0, TensorCategory::Activation});
}

void ScheduleWriter::record_stream(uint32_t slot, sim::StreamId stream) {
  out_->trace.events.push_back(sim::Event{sim::EventKind::RecordStream, slot, 0, 0, stream});
  out_->info.push_back(EventInfo{iteration_, phase_, op_, slot_tensor_[slot], slot_category_[slot]});
}

void ScheduleWriter::sync(sim::StreamId stream) { push(sim::Event{sim::EventKind::StreamSync, 0, 0, 0, stream}); }
void ScheduleWriter::sync_device() { push(sim::Event{sim::EventKind::DeviceSync, 0, 0, 0, 0}); }
void ScheduleWriter::empty_cache() { push(sim::Event{sim::EventKind::EmptyCache, 0, 0, 0, 0}); }

void ScheduleWriter::capture_begin(const std::string& graph, sim::StreamId stream, const std::string& pool) {
  push(sim::Event{sim::EventKind::CaptureBegin, pool.empty() ? 0 : trace_string(pool), trace_string(graph), 0, stream});
}

void ScheduleWriter::capture_end(const std::string& graph) {
  push(sim::Event{sim::EventKind::CaptureEnd, 0, trace_string(graph), 0, 0});
}

void ScheduleWriter::graph_release(const std::string& graph) {
  push(sim::Event{sim::EventKind::GraphRelease, 0, trace_string(graph), 0, 0});
}

void ScheduleWriter::set_slot_prefix(const std::string& prefix) {
  if (prefix.empty()) {
    slot_prefix_ = 0;
    return;
  }
  auto [it, inserted] = prefix_piece_.emplace(prefix, 0);
  if (inserted) it->second = out_->trace.slot_names.add_piece(prefix);
  slot_prefix_ = it->second;
}

uint32_t ScheduleWriter::alloc(uint32_t tensor_name, uint64_t bytes, TensorCategory category) {
  auto slot = static_cast<uint32_t>(out_->trace.slot_names.size());
  if (tensor_name >= name_piece_.size()) name_piece_.resize(out_->names.size() > tensor_name ? out_->names.size() : tensor_name + 1, 0);
  uint32_t& piece = name_piece_[tensor_name];
  if (piece == 0 && !out_->names[tensor_name].empty()) piece = out_->trace.slot_names.add_piece(out_->names[tensor_name]);
  out_->trace.slot_names.push_back(slot_prefix_, piece);
  slot_tensor_.push_back(tensor_name);
  slot_category_.push_back(category);
  slot_live_.push_back(1);
  slot_bytes_.push_back(bytes);
  out_->trace.events.push_back(sim::Event{sim::EventKind::Alloc, slot, 0, bytes, stream_});
  out_->info.push_back(EventInfo{iteration_, phase_, op_, tensor_name, category});
  live_bytes_ += bytes;
  ++live_count_;
  return slot;
}

void ScheduleWriter::free(uint32_t slot) {
  if (slot >= slot_live_.size() || !slot_live_[slot]) throw std::logic_error("planner freed a slot twice");
  slot_live_[slot] = 0;
  out_->trace.events.push_back(sim::Event{sim::EventKind::Free, slot, 0, 0, 0});
  out_->info.push_back(EventInfo{iteration_, phase_, op_, slot_tensor_[slot], slot_category_[slot]});
  --live_count_;
  live_bytes_ -= slot_bytes_[slot];
}

}  // namespace oomcast::planner
