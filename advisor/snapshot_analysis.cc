// Call sites and categories from frames. A user's frame is a Python frame outside torch and
// installed packages; allocations made by the autograd engine's thread carry no Python frame
// and are named by their autograd node (DivBackward0) or, failing that, their aten op.
#include "advisor/snapshot_analysis.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "advisor/byte_text.h"

namespace oomcast::advisor {
namespace {

bool is_library_file(const std::string& filename) {
  return filename.find("/torch/") != std::string::npos || filename.find("site-packages/") != std::string::npos ||
         filename.find("dist-packages/") != std::string::npos || filename.starts_with("<frozen") ||
         filename.find("/lib/python3") != std::string::npos;
}

// The last `parts` components of a path: enough to recognise, short enough to print.
std::string short_path(const std::string& path, int parts) {
  size_t at = path.size();
  for (int i = 0; i < parts && at != std::string::npos && at > 0; ++i) at = path.rfind('/', at - 1);
  return at == std::string::npos || at == 0 ? path : path.substr(at + 1);
}

std::string frame_text(const CallFrame& frame, int parts) {
  return fmt::format("{}:{} {}", short_path(frame.filename, parts), frame.line, frame.name);
}

// "torch::autograd::generated::DivBackward0::apply(...)" -> "DivBackward0".
std::string between(const std::string& text, const std::string& before, const std::string& after) {
  size_t start = text.find(before);
  if (start == std::string::npos) return "";
  start += before.size();
  size_t end = text.find(after, start);
  return end == std::string::npos ? "" : text.substr(start, end - start);
}

std::span<const uint32_t> frames_of(const SnapshotFrameTable& frames, int64_t entry) {
  return entry >= 0 && static_cast<size_t>(entry) < frames.entry_frames.size()
             ? frames.entry_frames[static_cast<size_t>(entry)]
             : std::span<const uint32_t>();
}

void add(std::map<std::pair<std::string, std::string>, SiteBytes>& groups, const CallSite& where, uint64_t bytes) {
  SiteBytes& row = groups[{where.site, where.via}];
  row.where = where;
  row.bytes += bytes;
  row.blocks += 1;
}

std::vector<SiteBytes> largest_first(std::map<std::pair<std::string, std::string>, SiteBytes>& groups) {
  std::vector<SiteBytes> rows;
  for (auto& [key, row] : groups) rows.push_back(std::move(row));
  std::stable_sort(rows.begin(), rows.end(), [](const SiteBytes& a, const SiteBytes& b) { return a.bytes > b.bytes; });
  return rows;
}

}  // namespace

std::string call_site_text(const CallSite& where) {
  return where.via.empty() ? where.site : where.site + "  (via " + where.via + ")";
}

CallSite call_site_of(const SnapshotFrameTable& frames, int64_t entry) {
  const std::span<const uint32_t> ids = frames_of(frames, entry);
  CallSite where;
  const CallFrame* innermost_python = nullptr;
  for (uint32_t id : ids) {
    const CallFrame& frame = frames.frames[id];
    if (!frame.is_python()) continue;
    if (!innermost_python) innermost_python = &frame;
    if (!is_library_file(frame.filename)) {
      where.site = frame_text(frame, 2);
      if (innermost_python != &frame) where.via = frame_text(*innermost_python, 3);
      return where;
    }
  }
  if (innermost_python) {
    where.site = frame_text(*innermost_python, 3);
    return where;
  }
  for (uint32_t id : ids) {
    std::string node = between(frames.frames[id].name, "torch::autograd::generated::", "::apply");
    if (!node.empty()) {
      where.site = node + " (autograd backward, no Python frame)";
      return where;
    }
  }
  for (uint32_t id : ids) {
    std::string op = between(frames.frames[id].name, "at::_ops::", "::");
    if (!op.empty()) {
      where.site = "aten::" + op + " (no Python frame)";
      return where;
    }
  }
  // Frames that are neither Python nor native code: a tool's own (oomcast's exports name the op
  // and tensor this way).
  for (uint32_t id : ids) {
    const CallFrame& frame = frames.frames[id];
    const std::string& file = frame.filename;
    bool native = file.empty() || file == "??" || file.ends_with(".cpp") || file.ends_with(".cc") ||
                  file.ends_with(".h") || file.ends_with(".cu") || file.ends_with(".o") || file.ends_with(".so");
    if (!native) {
      where.site = frame.name + " (" + file + ")";
      return where;
    }
  }
  where.site = ids.empty() ? "(no frames)" : "(native frames only)";
  return where;
}

// First match wins. Optimizer: a Python frame under torch/optim/ or in a file named like an
// optimizer with function step. Backward: the autograd engine's native frames, or a Python
// backward() of torch. Model setup: module construction, reset_parameters or Module._apply
// (.to/.cuda). Forward: any Python frame named forward.
const char* frame_category(const SnapshotFrameTable& frames, int64_t entry) {
  const std::span<const uint32_t> ids = frames_of(frames, entry);
  if (ids.empty()) return "unknown (no frames)";
  bool backward = false, setup = false, forward = false;
  for (uint32_t id : ids) {
    const CallFrame& frame = frames.frames[id];
    const std::string& file = frame.filename;
    if (frame.is_python()) {
      if (file.find("/optim/") != std::string::npos ||
          (frame.name == "step" && short_path(file, 1).find("optim") != std::string::npos))
        return "optimizer step";
      if (frame.name == "backward" && is_library_file(file)) backward = true;
      if (frame.name == "__init__" || frame.name == "reset_parameters" || frame.name == "_apply") setup = true;
      if (frame.name == "forward") forward = true;
    } else if (frame.name.find("torch::autograd::Engine::") != std::string::npos) {
      backward = true;
    }
  }
  if (backward) return "backward";
  if (setup) return "model setup";
  if (forward) return "forward";
  return "other";
}

namespace {

// call_site_of() for many entries: an entry's call site depends only on a few of its frames
// (the user's, the innermost Python one, or the first native frame that names an autograd
// node, an aten op or a tool), so it is computed once per distinct choice of those frames and
// each entry costs a scan of its frame ids against flags computed once per distinct frame.
class CallSiteIndex {
 public:
  explicit CallSiteIndex(const SnapshotFrameTable& frames) : frames_(frames) {
    flags_.reserve(frames.frames.size());
    for (const CallFrame& frame : frames.frames) {
      uint8_t flags = 0;
      if (frame.is_python()) flags |= kPython;
      if (is_library_file(frame.filename)) flags |= kLibrary;
      if (!between(frame.name, "torch::autograd::generated::", "::apply").empty()) flags |= kAutogradNode;
      if (!between(frame.name, "at::_ops::", "::").empty()) flags |= kAtenOp;
      const std::string& file = frame.filename;
      if (file.empty() || file == "??" || file.ends_with(".cpp") || file.ends_with(".cc") || file.ends_with(".h") ||
          file.ends_with(".cu") || file.ends_with(".o") || file.ends_with(".so"))
        flags |= kNative;
      flags_.push_back(flags);
      // frame_category's rules, per frame.
      uint8_t category = 0;
      if (frame.is_python()) {
        if (file.find("/optim/") != std::string::npos ||
            (frame.name == "step" && short_path(file, 1).find("optim") != std::string::npos))
          category |= kOptimizer;
        if (frame.name == "backward" && is_library_file(file)) category |= kBackward;
        if (frame.name == "__init__" || frame.name == "reset_parameters" || frame.name == "_apply") category |= kSetup;
        if (frame.name == "forward") category |= kForward;
      } else if (frame.name.find("torch::autograd::Engine::") != std::string::npos) {
        category |= kBackward;
      }
      categories_.push_back(category);
    }
  }

  // frame_category(frames, entry), from the flags of its frames.
  const char* category_of(int64_t entry) const {
    const std::span<const uint32_t> ids = frames_of(frames_, entry);
    if (ids.empty()) return "unknown (no frames)";
    uint8_t seen = 0;
    for (uint32_t id : ids) seen |= categories_[id];
    if (seen & kOptimizer) return "optimizer step";
    if (seen & kBackward) return "backward";
    if (seen & kSetup) return "model setup";
    if (seen & kForward) return "forward";
    return "other";
  }

  // The id of `entry`'s call site (see site()).
  uint32_t id_of(int64_t entry) {
    const std::span<const uint32_t> ids = frames_of(frames_, entry);
    const uint64_t key = key_of(ids);
    auto [at, inserted] = ids_by_key_.try_emplace(key, static_cast<uint32_t>(sites_.size()));
    if (inserted) sites_.push_back(call_site_of(frames_, entry));
    return at->second;
  }
  const CallSite& site(uint32_t id) const { return sites_[id]; }
  size_t size() const { return sites_.size(); }

 private:
  static constexpr uint8_t kPython = 1, kLibrary = 2, kAutogradNode = 4, kAtenOp = 8, kNative = 16;
  static constexpr uint8_t kOptimizer = 1, kBackward = 2, kSetup = 4, kForward = 8;

  // Which frames decide the call site (the order of call_site_of's rules): kind in the top 4
  // bits, then one or two frame ids of 30 bits each.
  uint64_t key_of(std::span<const uint32_t> ids) const {
    constexpr uint32_t kNone = (1u << 30) - 1;
    auto key = [](uint64_t kind, uint64_t first, uint64_t second = 0) { return kind << 60 | first << 30 | second; };
    uint32_t innermost_python = kNone;
    for (uint32_t id : ids) {
      const uint8_t flags = id < flags_.size() && id < kNone ? flags_[id] : 0;
      if (!(flags & kPython)) continue;
      if (innermost_python == kNone) innermost_python = id;
      if (!(flags & kLibrary)) return key(1, id, innermost_python);
    }
    if (innermost_python != kNone) return key(2, innermost_python);
    for (uint8_t rule : {kAutogradNode, kAtenOp}) {
      for (uint32_t id : ids)
        if (id < flags_.size() && id < kNone && (flags_[id] & rule)) return key(rule == kAutogradNode ? 3 : 4, id);
    }
    for (uint32_t id : ids)
      if (id < flags_.size() && id < kNone && !(flags_[id] & kNative)) return key(5, id);
    return key(ids.empty() ? 6 : 7, 0);
  }

  const SnapshotFrameTable& frames_;
  std::vector<uint8_t> flags_;
  std::vector<uint8_t> categories_;
  std::unordered_map<uint64_t, uint32_t> ids_by_key_;
  std::vector<CallSite> sites_;
};

// Bytes and blocks per call-site id, then the rows by call-site text (several ids may print
// the same), as add() groups them.
std::vector<SiteBytes> rows_of(const CallSiteIndex& index, const std::vector<uint64_t>& bytes,
                               const std::vector<size_t>& blocks,
                               std::map<std::pair<std::string, std::string>, SiteBytes> groups = {}) {
  for (uint32_t id = 0; id < bytes.size(); ++id) {
    if (blocks[id] == 0) continue;
    const CallSite& where = index.site(id);
    SiteBytes& row = groups[{where.site, where.via}];
    row.where = where;
    row.bytes += bytes[id];
    row.blocks += blocks[id];
  }
  return largest_first(groups);
}

}  // namespace

SnapshotAnalysis analyze_snapshot(const std::string& name, const sim::Snapshot& snapshot,
                                  const sim::AllocatorConfig& config, int device_index,
                                  const sim::SnapshotReplayReport& report, const SnapshotFrameTable& frames) {
  (void)snapshot, (void)config, (void)device_index;
  SnapshotAnalysis analysis;
  analysis.name = name;
  analysis.has_frames = frames.has_frames();
  analysis.peak_allocated_bytes = report.replay.peak_allocated_bytes;
  analysis.peak_event = report.replay.peak_allocated_event;
  const std::vector<int64_t>& entries = report.entry_of_event;
  auto entry_of = [&](size_t event) { return event < entries.size() ? entries[event] : int64_t{-1}; };
  analysis.peak_site = call_site_of(frames, entry_of(analysis.peak_event));
  CallSiteIndex index(frames);

  // The allocated blocks right after the peak event, each with the event that allocated it:
  // from the replay's block sizes, without replaying again.
  std::map<std::pair<std::string, std::string>, SiteBytes> live_before, categories;
  std::vector<uint64_t> live_bytes;
  std::vector<size_t> live_blocks;
  for (const sim::LiveBlock& block : sim::live_blocks_after(report, analysis.peak_event)) {
    if (block.alloc_event == SIZE_MAX) {
      CallSite before{"(allocated before the recording window)", ""};
      add(live_before, before, block.bytes);
      add(categories, before, block.bytes);
      continue;
    }
    int64_t entry = entry_of(block.alloc_event);
    uint32_t id = index.id_of(entry);
    if (id >= live_bytes.size()) {
      live_bytes.resize(id + 1, 0);
      live_blocks.resize(id + 1, 0);
    }
    live_bytes[id] += block.bytes;
    live_blocks[id] += 1;
    add(categories, CallSite{index.category_of(entry), ""}, block.bytes);
  }
  analysis.live_at_peak = rows_of(index, live_bytes, live_blocks, std::move(live_before));
  analysis.categories = largest_first(categories);

  std::vector<uint64_t> allocated_bytes;
  std::vector<size_t> allocated_blocks;
  for (size_t event = 0; event < report.trace.events.size(); ++event) {
    const sim::Event& e = report.trace.events[event];
    if (e.kind != sim::EventKind::Alloc) continue;
    uint32_t id = index.id_of(entry_of(event));
    if (id >= allocated_bytes.size()) {
      allocated_bytes.resize(index.size(), 0);
      allocated_blocks.resize(index.size(), 0);
    }
    allocated_bytes[id] += e.bytes;
    allocated_blocks[id] += 1;
  }
  analysis.allocated_in_window = rows_of(index, allocated_bytes, allocated_blocks);
  return analysis;
}

std::string render_analysis_text(const SnapshotAnalysis& analysis, size_t top) {
  std::string text;
  if (!analysis.has_frames)
    text += "  (the snapshot has no frames: record it with _record_memory_history(stacks=\"python\") to see call sites)\n";
  text += fmt::format("  the peak allocation came from {}\n", call_site_text(analysis.peak_site));
  text += "  largest live allocations at the peak, by call site:\n";
  double total = std::max<double>(1.0, static_cast<double>(analysis.peak_allocated_bytes));
  for (size_t i = 0; i < analysis.live_at_peak.size() && i < top; ++i) {
    const SiteBytes& row = analysis.live_at_peak[i];
    text += fmt::format("    {:>12} {:>5.1f}% {:>6} blocks  {}\n", byte_text(row.bytes),
                        100.0 * static_cast<double>(row.bytes) / total, row.blocks, call_site_text(row.where));
  }
  if (analysis.live_at_peak.size() > top)
    text += fmt::format("    ... {} more call sites\n", analysis.live_at_peak.size() - top);
  text += "  categories at the peak (from the frames):\n";
  for (const SiteBytes& row : analysis.categories) {
    text += fmt::format("    {:>12} {:>5.1f}%  {}\n", byte_text(row.bytes), 100.0 * static_cast<double>(row.bytes) / total,
                        row.where.site);
  }
  return text;
}

nlohmann::json analysis_json(const SnapshotAnalysis& analysis, size_t top) {
  auto rows = [top](const std::vector<SiteBytes>& sites, const char* key) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < sites.size() && i < top; ++i) {
      nlohmann::json row;
      row[key] = sites[i].where.site;
      if (std::string(key) == "site") row["via"] = sites[i].where.via;
      row["bytes"] = sites[i].bytes;
      row["blocks"] = sites[i].blocks;
      out.push_back(std::move(row));
    }
    return out;
  };
  nlohmann::json out;
  out["has_frames"] = analysis.has_frames;
  out["peak_site"] = call_site_text(analysis.peak_site);
  out["live_at_peak"] = rows(analysis.live_at_peak, "site");
  out["categories"] = rows(analysis.categories, "category");
  out["allocated_in_window"] = rows(analysis.allocated_in_window, "site");
  return out;
}

}  // namespace oomcast::advisor
