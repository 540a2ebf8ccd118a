// The run is replayed with the allocator's segment decisions going to a local sink, so after
// each event the decisions it caused are known and are written before its own entry, as
// PyTorch orders them: [segment_free ...] [segment_alloc | segment_map] alloc, and
// free_requested, free_completed for a free (one stream: no event waits between the two).
// Key names and value types follow real snapshots (allocator-spec §8; tests/data/*.pickle.gz).
#include "sim/snapshot_export.h"

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <unordered_map>

#include "base/input_error.h"
#include "sim/caching_allocator.h"
#include "sim/pickle_writer.h"

namespace oomcast::sim {
namespace {

using pickle::PickleWriter;

// What a live slot needs for its free entries and its block in the dump.
struct SlotRecord {
  uint64_t address = 0;  // 0: not allocated (or a zero-byte request, which PyTorch does not record)
  uint64_t requested = 0;
  size_t alloc_event = 0;
};

void write_frames(PickleWriter& out, const std::vector<SnapshotFrame>& frames) {
  out.begin_list();
  for (const SnapshotFrame& frame : frames) {
    out.begin_dict();
    out.key("name");
    out.string(frame.name);
    out.key("filename");
    out.string(frame.filename);
    out.key("line");
    out.integer(frame.line);
    out.end();
  }
  out.end();
}

class TraceEntryWriter {
 public:
  TraceEntryWriter(PickleWriter& out, const SnapshotFramesOf& frames_of) : out_(out), frames_of_(frames_of) {}

  void entry(const char* action, uint64_t addr, uint64_t size, uint64_t stream, size_t frames_event,
             const char* addr_key = "addr") {
    out_.begin_dict();
    out_.key("action");
    out_.string(action);
    out_.key(addr_key);
    out_.unsigned_integer(addr);
    out_.key("size");
    out_.unsigned_integer(size);
    out_.key("stream");
    out_.unsigned_integer(stream);
    out_.key("time_us");
    out_.integer(static_cast<int64_t>(count_));  // a clock that only orders the entries
    out_.key("frames");
    frames_.clear();
    if (frames_of_ && frames_event != SIZE_MAX) frames_of_(frames_event, frames_);
    write_frames(out_, frames_);
    out_.end();
    count_ += 1;
  }
  void decision(const SegmentDecision& decision, uint64_t stream) {
    static constexpr const char* kNames[] = {"segment_alloc", "segment_free", "segment_map", "segment_unmap"};
    entry(kNames[static_cast<int>(decision.kind)], decision.address, decision.size, stream, decision.event_index);
  }
  size_t count() const { return count_; }

 private:
  PickleWriter& out_;
  const SnapshotFramesOf& frames_of_;
  std::vector<SnapshotFrame> frames_;
  size_t count_ = 0;
};

void write_allocator_settings(PickleWriter& out, const AllocatorConfig& config) {
  out.key("allocator_settings");
  out.begin_dict();
  out.key("PYTORCH_CUDA_ALLOC_CONF");
  out.string(config.source_text);
  out.key("max_split_size");
  if (config.max_split_size == AllocatorConfig::kUnlimited) out.integer(-1);
  else out.unsigned_integer(config.max_split_size);
  out.key("garbage_collection_threshold");
  out.real(config.garbage_collection_threshold);
  out.key("expandable_segments");
  out.boolean(config.expandable_segments);
  out.key("pinned_num_register_threads");
  out.unsigned_integer(config.pinned_num_register_threads);
  out.key("release_lock_on_cudamalloc");
  out.boolean(config.release_lock_on_cudamalloc);
  out.key("pinned_use_cuda_host_register");
  out.boolean(config.pinned_use_cuda_host_register);
  out.key("roundup_power2_divisions");
  out.begin_dict();
  for (size_t i = 0; i < config.roundup_power2_divisions.size(); ++i) {
    out.key(std::to_string(1ull << i));
    out.unsigned_integer(config.roundup_power2_divisions[i]);
  }
  out.end();
  out.end();
}

// The dump-time segments: every mapped run of blocks, in address order, with its blocks.
size_t write_segments(PickleWriter& out, const CachingAllocator& allocator, const std::vector<SlotRecord>& slots,
                      const SnapshotFramesOf& frames_of) {
  std::unordered_map<uint64_t, size_t> alloc_event_at;
  for (const SlotRecord& slot : slots)
    if (slot.address) alloc_event_at[slot.address] = slot.alloc_event;
  std::vector<SnapshotFrame> frames;
  size_t written = 0;
  out.key("segments");
  out.begin_list();
  for (const Block* head : allocator.segment_heads()) {
    const Block* block = head;
    while (block) {
      while (block && !block->mapped) block = block->next;
      if (!block) break;
      std::vector<const Block*> run;
      for (; block && block->mapped; block = block->next) run.push_back(block);
      uint64_t total = 0, allocated = 0, requested = 0;
      for (const Block* b : run) {
        total += b->size;
        if (b->allocated) {
          allocated += b->size;
          requested += b->requested_size;
        }
      }
      out.begin_dict();
      out.key("device");
      out.integer(0);
      out.key("address");
      out.unsigned_integer(run.front()->address);
      out.key("total_size");
      out.unsigned_integer(total);
      out.key("allocated_size");
      out.unsigned_integer(allocated);
      out.key("active_size");
      out.unsigned_integer(allocated);
      out.key("requested_size");
      out.unsigned_integer(requested);
      out.key("stream");
      out.unsigned_integer(head->stream);
      out.key("segment_type");
      out.string(head->pool && head->pool->is_small() ? "small" : "large");
      out.key("segment_pool_id");
      out.begin_tuple();
      out.integer(0);
      out.integer(0);
      out.end();
      out.key("is_expandable");
      out.boolean(head->expandable != nullptr);
      out.key("frames");
      out.begin_list();
      out.end();
      out.key("blocks");
      out.begin_list();
      for (const Block* b : run) {
        out.begin_dict();
        out.key("address");
        out.unsigned_integer(b->address);
        out.key("size");
        out.unsigned_integer(b->size);
        out.key("requested_size");
        out.unsigned_integer(b->requested_size);
        out.key("state");
        out.string(b->allocated ? "active_allocated" : "inactive");
        out.key("frames");
        frames.clear();
        auto found = b->allocated ? alloc_event_at.find(b->address) : alloc_event_at.end();
        if (found != alloc_event_at.end() && frames_of) frames_of(found->second, frames);
        write_frames(out, frames);
        out.end();
      }
      out.end();
      out.end();
      written += 1;
    }
  }
  out.end();
  return written;
}

}  // namespace

SnapshotExport build_snapshot_pickle(const Trace& trace, const AllocatorConfig& config, const DeviceModel& device,
                                     const SnapshotFramesOf& frames_of, std::string& pickle_out) {
  SnapshotExport result;
  ReplayOptions options;
  options.stop_at_first_oom = true;
  options.record_segment_decisions = false;  // they go to our own sink below
  Replayer replayer(config, device, options);
  std::vector<SegmentDecision> decisions;
  replayer.allocator().record_segment_decisions(&decisions);
  std::vector<SlotRecord> slots(trace.slot_names.size());

  PickleWriter out;
  out.begin_dict();
  out.key("device_traces");
  out.begin_list();
  out.begin_list();
  TraceEntryWriter entries(out, frames_of);
  size_t written_decisions = 0;
  auto flush_decisions = [&](uint64_t stream) {
    for (; written_decisions < decisions.size(); ++written_decisions) entries.decision(decisions[written_decisions], stream);
  };
  replayer.on_event([&](size_t index) {
    const Event& event = trace.events[index];
    if (event.slot >= slots.size() && event.kind != EventKind::Mark) slots.resize(event.slot + 1);
    flush_decisions(event.stream);
    if (event.kind == EventKind::Alloc) {
      uint64_t address = replayer.address_of(event.slot);
      slots[event.slot] = SlotRecord{address, event.bytes, index};
      if (address) entries.entry("alloc", address, event.bytes, event.stream, index);
    } else if (event.kind == EventKind::Free || event.kind == EventKind::FreeRequested ||
               event.kind == EventKind::FreeCompleted) {
      // A plain free is both entries; a trace that splits them (record_stream) keeps its order.
      // Frees the allocator completes on its own (an event polled inside a malloc) are not
      // trace events and so are not written.
      SlotRecord& slot = slots[event.slot];
      if (slot.address && event.kind != EventKind::FreeCompleted)
        entries.entry("free_requested", slot.address, slot.requested, event.stream, slot.alloc_event);
      if (slot.address && event.kind != EventKind::FreeRequested) {
        entries.entry("free_completed", slot.address, slot.requested, event.stream, slot.alloc_event);
        slot = SlotRecord{};
      }
    }
  });
  result.replay = replayer.run(trace);
  if (result.replay.oom) {
    // The failed malloc: what it released while retrying, then the oom entry (the key is
    // device_free: cudaMemGetInfo's free bytes; the size is the rounded request).
    const Event& event = trace.events[result.replay.oom->event_index];
    flush_decisions(event.stream);
    const auto& details = replayer.allocator().last_oom();
    entries.entry("oom", replayer.device().free_bytes(), details ? details->rounded_bytes : event.bytes, event.stream,
                  result.replay.oom->event_index, "device_free");
  }
  result.trace_entries = entries.count();
  out.end();
  out.end();
  result.segments = write_segments(out, replayer.allocator(), slots, frames_of);
  write_allocator_settings(out, config);
  out.key("external_annotations");
  out.begin_list();
  out.end();
  out.end();
  pickle_out = out.finish();
  result.bytes = pickle_out.size();
  return result;
}

SnapshotExport export_snapshot(const std::string& path, const Trace& trace, const AllocatorConfig& config,
                               const DeviceModel& device, const SnapshotFramesOf& frames_of, const std::string& flag) {
  std::string pickle;
  SnapshotExport result = build_snapshot_pickle(trace, config, device, frames_of, pickle);
  bool ok = false;
  if (path.ends_with(".gz")) {
    if (gzFile file = gzopen(path.c_str(), "wb6")) {
      ok = true;
      for (size_t at = 0; at < pickle.size() && ok;) {
        unsigned chunk = static_cast<unsigned>(std::min<size_t>(pickle.size() - at, size_t{1} << 30));
        ok = gzwrite(file, pickle.data() + at, chunk) == static_cast<int>(chunk);
        at += chunk;
      }
      ok = gzclose(file) == Z_OK && ok;
    }
  } else {
    std::ofstream file(path, std::ios::binary);
    file.write(pickle.data(), static_cast<std::streamsize>(pickle.size()));
    ok = static_cast<bool>(file);
  }
  if (!ok) throw InputError({path, 0, 0, -1}, flag, "cannot write the snapshot file");
  return result;
}

}  // namespace oomcast::sim
