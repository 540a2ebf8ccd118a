// Trace: the simulator's input language. An ordered list of events (alloc, free, mark,
// empty_cache, the stream events: record_stream, free_requested / free_completed, sync,
// the CUDA graph events: capture_begin / capture_join / capture_end, graph_release, and the
// torch.cuda.MemPool events: mempool_enter / mempool_exit / mempool_release) that the planner
// emits and the snapshot reader produces; sim never learns where a trace came from. The text form is documented in docs/trace-format.md.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim/slot_names.h"

namespace oomcast::sim {

using Bytes = uint64_t;
using StreamId = uint64_t;

enum class EventKind : uint8_t {
  Alloc,       // allocate `bytes` on `stream` for tensor `slot`
  Free,        // free the block allocated for `slot`
  Mark,        // a named point (phase boundary); `tag` is the label
  EmptyCache,  // torch.cuda.empty_cache()
  RecordStream,   // tensor `slot`.record_stream(`stream`): its free waits for that stream
  FreeRequested,  // the free of `slot` is requested; the block returns at FreeCompleted
  FreeCompleted,  // the pending free of `slot` completes (as a snapshot records it)
  StreamSync,     // all work queued on `stream` so far has finished (its events complete)
  DeviceSync,     // torch.cuda.synchronize(): every stream's work has finished
  CaptureBegin,   // graph `tag` starts capturing on `stream` into the pool named by `slot`
  CaptureEnd,     // graph `tag` ends its capture
  GraphRelease,   // graph `tag` is destroyed or reset: its pool loses a user
  CaptureJoin,    // `stream` joins graph `tag`'s capture (it waited on the capturing stream)
  MemPoolEnter,   // `with torch.cuda.use_mem_pool(pool)` opens for the user pool named by `tag`
  MemPoolExit,    // that context closes
  MemPoolRelease, // the MemPool object named by `tag` is destroyed: its pool loses its last user
};

// One event. `slot` is a dense index naming the allocation (0..Trace::slot_names.size()-1),
// so the replay needs no hash lookup; `tag` indexes Trace::strings (0 = no tag). The graph
// events name their graph by `tag`; CaptureBegin's `slot` indexes Trace::strings too: the
// pool to share (another graph's name, a pool handle or a MemPool), 0 for a fresh pool of its
// own. The MemPool events name their pool by `tag`; the MemPoolEnter that creates a pool
// carries its torch.cuda.MemPool options in `slot` (MemPoolOptions bits, 0 for none).
struct Event {
  EventKind kind = EventKind::Alloc;
  uint32_t slot = 0;
  uint32_t tag = 0;
  Bytes bytes = 0;
  StreamId stream = 0;
};

// The trace-format action of an event kind (docs/trace-format.md): "alloc", "capture_begin", ...
// Both sync kinds are "sync".
const char* action_name(EventKind kind);

// torch.cuda.MemPool(use_on_oom=..., no_split=...), as bits of a creating MemPoolEnter's slot.
enum MemPoolOptions : uint32_t {
  kMemPoolUseOnOom = 1u << 0,  // 2.8+: a default-pool allocation about to OOM may take the pool's cached blocks
  kMemPoolNoSplit = 1u << 1,   // 2.10+: the pool's blocks are handed out whole, never split
};

// A trace plus the names behind its dense indices. Build one with TraceBuilder.
struct Trace {
  std::vector<Event> events;
  SlotNames slot_names;                 // slot -> the id as written in the trace file
  std::vector<std::string> strings;     // tag -> text; strings[0] is ""
  std::vector<int64_t> source_lines;    // event -> 1-based line in its file (may be empty)
  std::string source_name;              // the file it was read from, for errors ("" if built in memory)
};

// Appends events to a Trace, turning string ids and tags into dense indices. Reuse of an id
// after it was freed makes a fresh slot, as a new tensor would. Does not validate frees:
// the replay reports a free of an unknown or already-freed slot as an error.
class TraceBuilder {
 public:
  TraceBuilder();
  // Returns the slot given to `id`.
  uint32_t alloc(const std::string& id, Bytes bytes, StreamId stream = 0, const std::string& tag = "");
  // Makes a live slot for `id` without an event: an allocation made before the trace
  // starts (the state at a snapshot window's start). Returns the slot.
  uint32_t adopt(const std::string& id);
  // The slot may also start with its free requested (a pending free at a window's start).
  uint32_t adopt_pending(const std::string& id);
  // Returns false (and appends nothing) when `id` is not currently allocated (or its free
  // was already requested).
  bool free(const std::string& id);
  // Same rules; free_requested keeps `id` until free_completed, which needs a request.
  bool free_requested(const std::string& id);
  bool free_completed(const std::string& id);
  bool record_stream(const std::string& id, StreamId stream);
  void sync(StreamId stream);
  void sync_device();
  void mark(const std::string& label);
  void empty_cache();
  // torch.cuda.CUDAGraph capture_begin(pool) / capture_end / reset on one graph. `pool` is
  // empty for a fresh pool, else the name of a graph to share with or of a pool handle.
  void capture_begin(const std::string& graph, StreamId stream, const std::string& pool = "");
  void capture_end(const std::string& graph);
  void graph_release(const std::string& graph);
  // side_stream.wait_stream(capture_stream) while `graph` captures: `stream` joins the capture.
  void capture_join(const std::string& graph, StreamId stream);
  // torch.cuda.MemPool: entering and leaving `with torch.cuda.use_mem_pool(pool)`, and the
  // destruction of the pool object (`del pool`). `options` (MemPoolOptions bits) belong to
  // the enter that creates the pool.
  void mempool_enter(const std::string& pool, uint32_t options = 0);
  void mempool_exit(const std::string& pool);
  void mempool_release(const std::string& pool);
  void set_source_line(int64_t line) { line_ = line; }
  uint32_t intern(const std::string& text);
  size_t size() const { return trace_.events.size(); }
  Trace take();

 private:
  Trace trace_;
  std::unordered_map<std::string, uint32_t> live_slots_;
  std::unordered_set<std::string> free_requested_;
  std::unordered_map<std::string, uint32_t> string_index_;
  int64_t line_ = 0;
};

}  // namespace oomcast::sim
