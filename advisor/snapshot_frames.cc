// One more pass over the pickle, this time keeping "frames"; interning keeps a 100,000-entry
// trace whose entries share a few hundred distinct frames small.
#include "advisor/snapshot_frames.h"

#include <unordered_map>

#include "sim/gzip_file.h"
#include "sim/pickle_reader.h"

namespace oomcast::planner {

bool CallFrame::is_python() const { return filename.size() > 3 && filename.ends_with(".py"); }

bool SnapshotFrameTable::has_frames() const {
  for (const auto& list : entry_frames)
    if (!list.empty()) return true;
  return false;
}

SnapshotFrameTable read_snapshot_frames(const std::string& path, int device_index) {
  using sim::pickle::Value;
  sim::FileBytes bytes = sim::read_maybe_gzipped_file(path);
  const sim::pickle::Document doc = sim::pickle::parse_pickle(path, bytes.data(), bytes.size());
  SnapshotFrameTable table;
  if (!doc.root().is_dict()) return table;
  const Value* traces = doc.find(doc.root(), "device_traces");
  if (!traces || !traces->is_sequence()) return table;
  auto devices = doc.items(*traces);
  if (device_index < 0 || static_cast<size_t>(device_index) >= devices.size()) return table;
  auto entries = doc.items(devices[static_cast<size_t>(device_index)]);
  table.entry_frames.resize(entries.size());
  std::unordered_map<std::string, uint32_t> index;
  std::string key;
  for (size_t e = 0; e < entries.size(); ++e) {
    if (!entries[e].is_dict()) continue;
    const Value* frames = doc.find(entries[e], "frames");
    if (!frames || !frames->is_sequence()) continue;
    for (const Value& frame : doc.items(*frames)) {
      if (!frame.is_dict()) continue;
      CallFrame call;
      if (const Value* v = doc.find(frame, "name"); v && v->is_string()) call.name = std::string(doc.text(*v));
      if (const Value* v = doc.find(frame, "filename"); v && v->is_string()) call.filename = std::string(doc.text(*v));
      if (const Value* v = doc.find(frame, "line"); v && v->is_int()) call.line = v->int_value();
      key = call.filename + '\n' + std::to_string(call.line) + '\n' + call.name;
      auto [it, inserted] = index.try_emplace(key, static_cast<uint32_t>(table.frames.size()));
      if (inserted) table.frames.push_back(std::move(call));
      table.entry_frames[e].push_back(it->second);
    }
  }
  return table;
}

}  // namespace oomcast::planner
