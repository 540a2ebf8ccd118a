// Turns the decoded pickle of a torch.cuda.memory._dump_snapshot() file into a Snapshot,
// checking each field's type and naming the segment, block or trace entry in every error.
#include "sim/snapshot.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/input_error.h"
#include "sim/gzip_file.h"
#include "sim/pickle_reader.h"

namespace oomcast::sim {
namespace {

using pickle::Document;
using pickle::Kind;
using pickle::Value;

// Where a dict sits in the snapshot, such as segments[3].blocks[2] or device_traces[0][7].
// Formatted only for an error message, as most snapshots have none.
struct Path {
  const char* head;
  int64_t first = -1;
  const char* middle = "";
  int64_t second = -1;

  std::string str() const {
    std::string text = head;
    if (first >= 0) text += "[" + std::to_string(first) + "]";
    text += middle;
    if (second >= 0) text += "[" + std::to_string(second) + "]";
    return text;
  }
};

[[noreturn]] void fail_at(const Document& doc, const Value& at, const Path& path, std::string_view key,
                          const std::string& what, int64_t event = -1) {
  doc.fail(at.offset(), std::string(key), path.str() + ": " + what, event);
}

// Reads typed fields of one dict, and words errors as "<path>: '<key>' ...".
class FieldReader {
 public:
  FieldReader(const Document& doc, Path path, int64_t event = -1)
      : doc_(doc), path_(path), event_(event) {}

  const Path& path() const { return path_; }
  [[noreturn]] void fail(const Value& at, std::string_view key, const std::string& what) const {
    fail_at(doc_, at, path_, key, what, event_);
  }
  [[noreturn]] void missing(const Value& dict, std::string_view key) const {
    fail(dict, key, "missing key '" + std::string(key) + "'");
  }
  [[noreturn]] void wrong_type(const Value& v, std::string_view key, const char* expected) const {
    fail(v, key, "'" + std::string(key) + "' must be " + expected + ", not " +
                     pickle::kind_name(v.kind()));
  }

  // A byte count or address: a non-negative int below 2^64.
  uint64_t size(const Value& v, std::string_view key) const {
    uint64_t out = 0;
    if (doc_.as_uint64(v, &out)) return out;
    if (v.is_int()) {
      fail(v, key, "'" + std::string(key) + "' is negative (" + std::to_string(v.int_value()) + ")");
    }
    if (v.kind() == Kind::BigInt) fail(v, key, "'" + std::string(key) + "' does not fit in 64 bits");
    wrong_type(v, key, "an int");
  }
  int64_t integer(const Value& v, std::string_view key) const {
    if (v.is_int()) return v.int_value();
    if (v.kind() == Kind::BigInt) fail(v, key, "'" + std::string(key) + "' does not fit in 64 bits");
    wrong_type(v, key, "an int");
  }
  // A raw cudaStream_t: any 64-bit pattern, so negative values wrap.
  uint64_t stream(const Value& v, std::string_view key) const {
    uint64_t out = 0;
    if (doc_.as_uint64(v, &out)) return out;
    return static_cast<uint64_t>(integer(v, key));
  }
  bool boolean(const Value& v, std::string_view key) const {
    if (v.kind() == Kind::Bool) return v.bool_value();
    if (v.is_int()) return v.int_value() != 0;
    wrong_type(v, key, "a bool");
  }
  std::string_view string(const Value& v, std::string_view key) const {
    if (!v.is_string()) wrong_type(v, key, "a str");
    return doc_.text(v);
  }
  std::span<const Value> list(const Value& v, std::string_view key) const {
    if (v.kind() != Kind::List && v.kind() != Kind::Tuple) wrong_type(v, key, "a list");
    return doc_.items(v);
  }
  const Value& require(const Value& dict, std::string_view key) const {
    const Value* v = doc_.find(dict, key);
    if (!v) missing(dict, key);
    return *v;
  }

 private:
  const Document& doc_;
  Path path_;
  int64_t event_;
};

const Value& expect_dict(const Document& doc, const Value& v, const Path& path, int64_t event = -1) {
  if (!v.is_dict()) {
    fail_at(doc, v, path, "", std::string("expected a dict, not ") + pickle::kind_name(v.kind()), event);
  }
  return v;
}

SnapshotBlock::State parse_block_state(const FieldReader& fields, const Value& v) {
  const std::string_view state = fields.string(v, "state");
  if (state == "active_allocated") return SnapshotBlock::State::ActiveAllocated;
  // The C++ allocator writes active_pending_free; torch's docstrings say active_awaiting_free.
  if (state == "active_pending_free" || state == "active_awaiting_free") {
    return SnapshotBlock::State::ActivePendingFree;
  }
  if (state == "inactive") return SnapshotBlock::State::Inactive;
  fields.fail(v, "state", "unknown block state '" + std::string(state) + "'");
}

// Old snapshots give blocks no address; they tile the segment in order.
void parse_blocks(const Document& doc, const FieldReader& seg_fields, const Value& blocks_value,
                  SnapshotSegment& segment) {
  std::span<const Value> blocks = seg_fields.list(blocks_value, "blocks");
  segment.blocks.reserve(blocks.size());
  uint64_t next_address = segment.address;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const Path path{"segments", seg_fields.path().first, ".blocks", static_cast<int64_t>(b)};
    const Value& dict = expect_dict(doc, blocks[b], path);
    const FieldReader fields(doc, path);
    SnapshotBlock block;
    block.size = fields.size(fields.require(dict, "size"), "size");
    block.state = parse_block_state(fields, fields.require(dict, "state"));
    const Value* address = doc.find(dict, "address");
    block.address = address ? fields.size(*address, "address") : next_address;
    if (const Value* requested = doc.find(dict, "requested_size")) {
      block.requested_size = fields.size(*requested, "requested_size");
    }
    if (block.address + block.size < block.address) {
      fields.fail(dict, "size", "block end address overflows 64 bits");
    }
    next_address = block.address + block.size;
    segment.blocks.push_back(block);
  }
}

SnapshotSegment parse_segment(const Document& doc, const Value& value, size_t index) {
  const Path path{"segments", static_cast<int64_t>(index)};
  const Value& dict = expect_dict(doc, value, path);
  const FieldReader fields(doc, path);
  SnapshotSegment segment;
  segment.device = fields.integer(fields.require(dict, "device"), "device");
  segment.address = fields.size(fields.require(dict, "address"), "address");
  segment.total_size = fields.size(fields.require(dict, "total_size"), "total_size");
  segment.stream = fields.stream(fields.require(dict, "stream"), "stream");
  const std::string_view type = fields.string(fields.require(dict, "segment_type"), "segment_type");
  if (type != "large" && type != "small") {
    fields.fail(dict, "segment_type", "segment_type must be 'large' or 'small', not '" +
                                          std::string(type) + "'");
  }
  segment.is_small_pool = type == "small";
  if (const Value* v = doc.find(dict, "is_expandable")) {
    segment.is_expandable = fields.boolean(*v, "is_expandable");
  }
  if (const Value* v = doc.find(dict, "segment_pool_id")) {
    std::span<const Value> pool = fields.list(*v, "segment_pool_id");
    if (pool.size() != 2) fields.fail(*v, "segment_pool_id", "segment_pool_id must hold 2 ints");
    segment.pool_id_first = fields.integer(pool[0], "segment_pool_id");
    segment.pool_id_second = fields.integer(pool[1], "segment_pool_id");
  }
  parse_blocks(doc, fields, fields.require(dict, "blocks"), segment);

  // Sums over the blocks stand in for the totals that older snapshots lack.
  uint64_t allocated = 0, active = 0, requested = 0;
  for (const SnapshotBlock& block : segment.blocks) {
    if (block.state == SnapshotBlock::State::ActiveAllocated) {
      allocated += block.size;
      requested += block.requested_size;
    }
    if (block.state != SnapshotBlock::State::Inactive) active += block.size;
  }
  const Value* v = doc.find(dict, "allocated_size");
  segment.allocated_size = v ? fields.size(*v, "allocated_size") : allocated;
  v = doc.find(dict, "active_size");
  segment.active_size = v ? fields.size(*v, "active_size") : active;
  v = doc.find(dict, "requested_size");
  segment.requested_size = v ? fields.size(*v, "requested_size") : requested;
  return segment;
}

// Which of a few names a dict key is (its index in `names`, -1 for another key or a key
// that is not a str), decided once per distinct key string: the pickler memoises keys, so
// every later copy of a key is fetched with the offset of its first.
class KeyNames {
 public:
  explicit KeyNames(std::initializer_list<std::string_view> names) : names_(names) {}
  int index(const Document& doc, const Value& key) {
    if (!key.is_string()) return -1;
    for (size_t i = 0; i < known_; ++i)
      if (offsets_[i] == key.offset()) return indices_[i];
    const std::string_view text = doc.text(key);
    int found = -1;
    for (size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == text) found = static_cast<int>(i);
    if (known_ < kSize) {
      offsets_[known_] = key.offset();
      indices_[known_++] = found;
    }
    return found;
  }

 private:
  static constexpr size_t kSize = 32;
  std::vector<std::string_view> names_;
  uint64_t offsets_[kSize] = {};
  int indices_[kSize] = {};
  size_t known_ = 0;
};

// One pass over the entry's keys: traces hold most of a snapshot's dicts.
// The keys of a trace entry that parse_trace_entry reads.
enum EntryKey { kAction, kAddr, kSize, kStream, kTimeUs, kDeviceFree, kFrames };
KeyNames entry_keys() { return KeyNames{"action", "addr", "size", "stream", "time_us", "device_free", "frames"}; }
// The actions oomcast knows, in SnapshotTraceEntry::Action's order, then the markers.
// Actions that change no block: user_defined (torch.cuda.memory._record_memory_history's
// user markers) and annotate. Any other action is one oomcast does not know; it may allocate
// or free, so dropping it would replay a different run: refused (sim/snapshot_test.cc).
KeyNames action_names() {
  return KeyNames{"alloc",         "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
                  "segment_unmap", "oom",            "snapshot",       "user_defined",  "annotate"};
}

// `frames` receives the entry's "frames" value (nullptr when it has none).
SnapshotTraceEntry parse_trace_entry(const Document& doc, const Value& value, size_t device,
                                     size_t index, KeyNames& keys, KeyNames& actions, const Value** frames) {
  using Action = SnapshotTraceEntry::Action;
  const Path path{"device_traces", static_cast<int64_t>(device), "", static_cast<int64_t>(index)};
  const auto event = static_cast<int64_t>(index);
  const Value& dict = expect_dict(doc, value, path, event);
  const FieldReader fields(doc, path, event);
  SnapshotTraceEntry entry;
  const Value* action = nullptr;
  const Value* addr = nullptr;
  const Value* device_free = nullptr;
  const Value* size = nullptr;
  std::span<const Value> items = doc.items(dict);
  *frames = nullptr;
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    const Value& v = items[i + 1];
    switch (keys.index(doc, items[i])) {
      case kAction: action = &v; break;
      case kAddr: addr = &v; break;
      case kSize: size = &v; break;
      case kStream: entry.stream = fields.stream(v, "stream"); break;
      case kTimeUs: entry.time_us = fields.integer(v, "time_us"); break;
      case kDeviceFree: device_free = &v; break;
      case kFrames: *frames = &v; break;
      default: break;
    }
  }
  if (!action) fields.missing(dict, "action");
  const std::string_view action_name = fields.string(*action, "action");
  // The action strings are memoised too: each distinct one is compared once.
  static constexpr Action kActions[] = {Action::Alloc,        Action::FreeRequested, Action::FreeCompleted,
                                        Action::SegmentAlloc, Action::SegmentFree,   Action::SegmentMap,
                                        Action::SegmentUnmap, Action::Oom,           Action::Snapshot};
  const int action_index = actions.index(doc, *action);
  entry.action = action_index >= 0 && action_index < 9 ? kActions[action_index] : Action::Other;
  if (entry.action == Action::Other && action_index < 0) {
    fields.fail(*action, "action",
                "unknown trace action '" + std::string(action_name) + "' (known: alloc, free_requested, "
                "free_completed, segment_alloc, segment_free, segment_map, segment_unmap, oom, snapshot, "
                "user_defined): a snapshot from a newer PyTorch? Replaying without it could change every "
                "block after it");
  }
  const bool known = entry.action != Action::Other && entry.action != Action::Snapshot;
  const char* addr_key = entry.action == Action::Oom ? "device_free" : "addr";
  const Value* addr_value = entry.action == Action::Oom ? device_free : addr;
  if (addr_value) {
    entry.addr = fields.size(*addr_value, addr_key);
  } else if (known) {
    fields.missing(dict, addr_key);
  }
  if (size) {
    entry.size = fields.size(*size, "size");
  } else if (known) {
    fields.missing(dict, "size");
  }
  return entry;
}

void parse_allocator_settings(const Document& doc, const Value& value, Snapshot& snapshot) {
  if (value.kind() == Kind::None) return;
  const Path path{"allocator_settings"};
  const Value& dict = expect_dict(doc, value, path);
  const FieldReader fields(doc, path);
  snapshot.has_allocator_settings = true;
  if (const Value* v = doc.find(dict, "PYTORCH_CUDA_ALLOC_CONF")) {
    if (v->kind() != Kind::None) {
      snapshot.alloc_conf = std::string(fields.string(*v, "PYTORCH_CUDA_ALLOC_CONF"));
    }
  }
  if (const Value* v = doc.find(dict, "expandable_segments")) {
    snapshot.expandable_segments = fields.boolean(*v, "expandable_segments");
  }
  if (const Value* v = doc.find(dict, "max_split_size")) {
    uint64_t unsigned_value = 0;
    // The C++ side means "no limit" by SIZE_MAX; some versions print that instead of -1.
    if (v->kind() == Kind::BigInt && doc.as_uint64(*v, &unsigned_value)) {
      snapshot.max_split_size = -1;
    } else {
      snapshot.max_split_size = fields.integer(*v, "max_split_size");
    }
  }
}

// A frame as it lies in the pickle: views into the input, hashed without building a string.
struct FrameKey {
  std::string_view filename;
  std::string_view name;
  int64_t line = 0;
  bool operator==(const FrameKey&) const = default;
};

struct FrameKeyHash {
  size_t operator()(const FrameKey& key) const {
    const std::hash<std::string_view> hash;
    size_t h = hash(key.filename);
    h = h * 1000003u ^ hash(key.name);
    return h * 1000003u ^ std::hash<int64_t>{}(key.line);
  }
};

// The same frame as the pickle's own memo shares it: the byte offsets of its strings (a
// string the pickler memoised is fetched with the offset of its first copy), so a repeated
// frame is found by three integers, without hashing or comparing its text again.
struct FramePosition {
  uint64_t filename = 0;
  uint64_t name = 0;
  int64_t line = 0;
  bool operator==(const FramePosition&) const = default;
};

struct FramePositionHash {
  size_t operator()(const FramePosition& at) const {
    return (at.filename * 0x9e3779b97f4a7c15ull) ^ (at.name * 0xc2b2ae3d27d4eb4full) ^ static_cast<uint64_t>(at.line);
  }
};

// Interns the frames of `entries` (one device's trace): strings are built once per distinct
// frame, and a frame dict the pickle shares between entries (torch's snapshots share each
// distinct frame's dict) is read once. Entries, frame lists and frames of an unexpected shape
// contribute nothing.
SnapshotFrames intern_frames(const Document& doc, std::span<const Value* const> entry_frames) {
  SnapshotFrames out;
  size_t references = 0;
  for (const Value* frames : entry_frames)
    if (frames && frames->is_sequence()) references += doc.items(*frames).size();
  out.entry_frames.reserve(entry_frames.size(), references);
  std::unordered_map<FramePosition, uint32_t, FramePositionHash> ids_by_position;
  std::unordered_map<FrameKey, uint32_t, FrameKeyHash> ids;
  // Per container of the document: its frame id + 1 once read as a frame dict (0: not yet).
  std::vector<uint32_t> id_of_container(doc.container_count(), 0);
  enum FrameField { kName, kFilename, kLine };
  KeyNames keys{"name", "filename", "line"};
  for (size_t e = 0; e < entry_frames.size(); ++e) {
    out.entry_frames.start_entry();
    const Value* frames = entry_frames[e];
    if (!frames || !frames->is_sequence()) continue;
    std::span<const Value> list = doc.items(*frames);
    for (const Value& frame : list) {
      if (!frame.is_dict()) continue;
      uint32_t& cached = id_of_container[doc.container_index(frame)];
      if (cached != 0) {
        out.entry_frames.add(cached - 1);
        continue;
      }
      // One pass over the keys; a repeated key keeps its last value, as in Python.
      const Value* name = nullptr;
      const Value* filename = nullptr;
      const Value* line = nullptr;
      std::span<const Value> items = doc.items(frame);
      for (size_t i = 0; i + 1 < items.size(); i += 2) {
        switch (keys.index(doc, items[i])) {
          case kName: name = &items[i + 1]; break;
          case kFilename: filename = &items[i + 1]; break;
          case kLine: line = &items[i + 1]; break;
          default: break;
        }
      }
      if (name && !name->is_string()) name = nullptr;
      if (filename && !filename->is_string()) filename = nullptr;
      const int64_t line_number = line && line->is_int() ? line->int_value() : 0;
      // Offset 0 is the protocol opcode, never a string: it stands for a missing one.
      const FramePosition position{filename ? filename->offset() : 0, name ? name->offset() : 0, line_number};
      auto [known, new_position] = ids_by_position.try_emplace(position, 0);
      if (new_position) {
        const FrameKey key{filename ? doc.text(*filename) : std::string_view(), name ? doc.text(*name) : std::string_view(),
                           line_number};
        auto [at, inserted] = ids.try_emplace(key, static_cast<uint32_t>(out.frames.size()));
        if (inserted) out.frames.push_back(SnapshotFrame{std::string(key.name), std::string(key.filename), key.line});
        known->second = at->second;
      }
      cached = known->second + 1;
      out.entry_frames.add(known->second);
    }
  }
  return out;
}

}  // namespace

bool looks_like_snapshot_path(const std::string& path) {
  for (const char* suffix : {".pickle", ".pickle.gz", ".pkl", ".pkl.gz"}) {
    if (path.ends_with(suffix)) return true;
  }
  return false;
}

Snapshot parse_snapshot(const std::string& name, const uint8_t* data, size_t size,
                        const SnapshotReadOptions& read_options) {
  pickle::ParseOptions options;
  // Stack traces: most of the bytes, and of no use unless the caller attributes call sites.
  if (read_options.frames_of_device < 0) options.skip_value_of_key = "frames";
  const Document doc = pickle::parse_pickle(name, data, size, options);
  const Value& root = doc.root();
  if (!root.is_dict()) {
    doc.fail(root.offset(), "",
             std::string("a snapshot pickle must hold a dict with 'segments' and 'device_traces', "
                         "not ") + pickle::kind_name(root.kind()));
  }
  const FieldReader fields(doc, Path{"snapshot"});
  Snapshot snapshot;
  std::span<const Value> segments = fields.list(fields.require(root, "segments"), "segments");
  snapshot.segments.reserve(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) {
    snapshot.segments.push_back(parse_segment(doc, segments[i], i));
  }
  std::stable_sort(snapshot.segments.begin(), snapshot.segments.end(),
                   [](const SnapshotSegment& a, const SnapshotSegment& b) {
                     return a.address != b.address ? a.address < b.address : a.device < b.device;
                   });
  // A dump of memory_snapshot()-like data may lack traces; it still describes the segments.
  if (const Value* traces = doc.find(root, "device_traces")) {
    std::span<const Value> devices = fields.list(*traces, "device_traces");
    snapshot.device_traces.resize(devices.size());
    KeyNames keys = entry_keys();
    KeyNames actions = action_names();
    for (size_t d = 0; d < devices.size(); ++d) {
      const FieldReader device_fields(doc, Path{"device_traces", static_cast<int64_t>(d)});
      std::span<const Value> entries = device_fields.list(devices[d], "device_traces");
      std::vector<SnapshotTraceEntry>& out = snapshot.device_traces[d];
      out.reserve(entries.size());
      const bool with_frames = static_cast<int64_t>(d) == read_options.frames_of_device;
      std::vector<const Value*> frames(with_frames ? entries.size() : 0);
      const Value* ignored = nullptr;
      for (size_t i = 0; i < entries.size(); ++i) {
        out.push_back(parse_trace_entry(doc, entries[i], d, i, keys, actions, with_frames ? &frames[i] : &ignored));
      }
      if (with_frames) snapshot.frames = intern_frames(doc, frames);
    }
  }
  if (const Value* settings = doc.find(root, "allocator_settings")) {
    parse_allocator_settings(doc, *settings, snapshot);
  }
  return snapshot;
}

Snapshot read_snapshot(const std::string& path, const SnapshotReadOptions& options) {
  FileBytes file = read_file_bytes(path);
  if (!has_gzip_magic(file.data(), file.size())) {
    return parse_snapshot(path, file.data(), file.size(), options);
  }
  const ByteVector bytes = gunzip(path, file.data(), file.size(), kMaxDecompressedSnapshotBytes);
  file = FileBytes();  // the compressed copy is no longer needed
  try {
    return parse_snapshot(path, bytes.data(), bytes.size(), options);
  } catch (const InputError& error) {
    // Offsets count bytes of the pickle, which the user only sees after gunzip.
    throw InputError(error.where(), error.key(), error.message() + " of the decompressed data");
  }
}

}  // namespace oomcast::sim
