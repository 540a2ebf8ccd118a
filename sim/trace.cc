// TraceBuilder: string ids and tags to dense indices.
#include "sim/trace.h"

namespace oomcast::sim {

TraceBuilder::TraceBuilder() {
  trace_.strings.emplace_back();
  string_index_.emplace("", 0);
}

uint32_t TraceBuilder::intern(const std::string& text) {
  auto [it, inserted] = string_index_.emplace(text, static_cast<uint32_t>(trace_.strings.size()));
  if (inserted) trace_.strings.push_back(text);
  return it->second;
}

uint32_t TraceBuilder::alloc(const std::string& id, Bytes bytes, StreamId stream, const std::string& tag) {
  auto slot = static_cast<uint32_t>(trace_.slot_names.size());
  trace_.slot_names.push_back(id);
  live_slots_[id] = slot;
  trace_.events.push_back(Event{EventKind::Alloc, slot, intern(tag), bytes, stream});
  if (line_ > 0) trace_.source_lines.push_back(line_);
  return slot;
}

uint32_t TraceBuilder::adopt(const std::string& id) {
  auto slot = static_cast<uint32_t>(trace_.slot_names.size());
  trace_.slot_names.push_back(id);
  live_slots_[id] = slot;
  return slot;
}

uint32_t TraceBuilder::adopt_pending(const std::string& id) {
  uint32_t slot = adopt(id);
  free_requested_.insert(id);
  return slot;
}

bool TraceBuilder::free_requested(const std::string& id) {
  auto it = live_slots_.find(id);
  if (it == live_slots_.end() || free_requested_.count(id)) return false;
  trace_.events.push_back(Event{EventKind::FreeRequested, it->second, 0, 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
  free_requested_.insert(id);
  return true;
}

bool TraceBuilder::free_completed(const std::string& id) {
  auto it = live_slots_.find(id);
  if (it == live_slots_.end() || !free_requested_.erase(id)) return false;
  trace_.events.push_back(Event{EventKind::FreeCompleted, it->second, 0, 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
  live_slots_.erase(it);
  return true;
}

bool TraceBuilder::record_stream(const std::string& id, StreamId stream) {
  auto it = live_slots_.find(id);
  if (it == live_slots_.end() || free_requested_.count(id)) return false;
  trace_.events.push_back(Event{EventKind::RecordStream, it->second, 0, 0, stream});
  if (line_ > 0) trace_.source_lines.push_back(line_);
  return true;
}

void TraceBuilder::sync(StreamId stream) {
  trace_.events.push_back(Event{EventKind::StreamSync, 0, 0, 0, stream});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

void TraceBuilder::sync_device() {
  trace_.events.push_back(Event{EventKind::DeviceSync, 0, 0, 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

bool TraceBuilder::free(const std::string& id) {
  auto it = live_slots_.find(id);
  if (it == live_slots_.end() || free_requested_.count(id)) return false;
  trace_.events.push_back(Event{EventKind::Free, it->second, 0, 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
  live_slots_.erase(it);
  return true;
}

void TraceBuilder::mark(const std::string& label) {
  trace_.events.push_back(Event{EventKind::Mark, 0, intern(label), 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

void TraceBuilder::empty_cache() {
  trace_.events.push_back(Event{EventKind::EmptyCache, 0, 0, 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

void TraceBuilder::capture_begin(const std::string& graph, StreamId stream, const std::string& pool) {
  trace_.events.push_back(Event{EventKind::CaptureBegin, intern(pool), intern(graph), 0, stream});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

void TraceBuilder::capture_end(const std::string& graph) {
  trace_.events.push_back(Event{EventKind::CaptureEnd, 0, intern(graph), 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

void TraceBuilder::graph_release(const std::string& graph) {
  trace_.events.push_back(Event{EventKind::GraphRelease, 0, intern(graph), 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

void TraceBuilder::capture_join(const std::string& graph, StreamId stream) {
  trace_.events.push_back(Event{EventKind::CaptureJoin, 0, intern(graph), 0, stream});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

void TraceBuilder::mempool_enter(const std::string& pool, uint32_t options) {
  trace_.events.push_back(Event{EventKind::MemPoolEnter, options, intern(pool), 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

void TraceBuilder::mempool_exit(const std::string& pool) {
  trace_.events.push_back(Event{EventKind::MemPoolExit, 0, intern(pool), 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

void TraceBuilder::mempool_release(const std::string& pool) {
  trace_.events.push_back(Event{EventKind::MemPoolRelease, 0, intern(pool), 0, 0});
  if (line_ > 0) trace_.source_lines.push_back(line_);
}

Trace TraceBuilder::take() {
  live_slots_.clear();
  free_requested_.clear();
  string_index_.clear();
  Trace out = std::move(trace_);
  trace_ = Trace{};
  trace_.strings.emplace_back();
  string_index_.emplace("", 0);
  return out;
}

const char* action_name(EventKind kind) {
  switch (kind) {
    case EventKind::Alloc: return "alloc";
    case EventKind::Free: return "free";
    case EventKind::Mark: return "mark";
    case EventKind::EmptyCache: return "empty_cache";
    case EventKind::RecordStream: return "record_stream";
    case EventKind::FreeRequested: return "free_requested";
    case EventKind::FreeCompleted: return "free_completed";
    case EventKind::StreamSync:
    case EventKind::DeviceSync: return "sync";
    case EventKind::CaptureBegin: return "capture_begin";
    case EventKind::CaptureEnd: return "capture_end";
    case EventKind::GraphRelease: return "graph_release";
    case EventKind::CaptureJoin: return "capture_join";
    case EventKind::MemPoolEnter: return "mempool_enter";
    case EventKind::MemPoolExit: return "mempool_exit";
    case EventKind::MemPoolRelease: return "mempool_release";
  }
  return "?";
}

}  // namespace oomcast::sim
