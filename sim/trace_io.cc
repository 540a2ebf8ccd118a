// The plain-text trace format: reader (with file:line errors for every kind of bad input)
// and writer. gzip-compressed files are read transparently through zlib.
#include "sim/trace_io.h"

#include <unistd.h>
#include <zlib.h>

#include <charconv>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/bounded_file.h"
#include "base/edit_distance.h"
#include "base/input_error.h"

namespace oomcast::sim {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t position = 0;
  while (position < line.size()) {
    while (position < line.size() && is_blank(line[position])) ++position;
    size_t start = position;
    while (position < line.size() && !is_blank(line[position])) ++position;
    if (position > start) fields.push_back(line.substr(start, position - start));
  }
  return fields;
}

class TraceParser {
 public:
  explicit TraceParser(const std::string& name) : name_(name) {}

  Trace parse(std::string_view text) {
    size_t position = 0;
    while (position <= text.size()) {
      size_t end = text.find('\n', position);
      if (end == std::string_view::npos) end = text.size();
      parse_next_line(text.substr(position, end - position));
      if (end == text.size()) break;
      position = end + 1;
    }
    return finish();
  }

  // One line of a trace read in pieces (without its '\n').
  void parse_next_line(std::string_view line) {
    ++line_number_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    parse_line(line);
    if (builder_.size() > kMaxTraceEvents) {
      fail("", "the trace has more than " + std::to_string(kMaxTraceEvents) +
                   " events, over the limit (about 2 GB of host memory): replay a window of it");
    }
  }

  // A line longer than any action needs: refused before it fills the host's memory.
  [[noreturn]] void fail_long_line() {
    ++line_number_;
    fail("", "a line longer than " + std::to_string(kMaxTraceLineBytes >> 20) + " MiB; a trace line is one event");
  }

  Trace finish() {
    Trace trace = builder_.take();
    trace.source_name = name_;
    return trace;
  }

 private:
  [[noreturn]] void fail(std::string_view key, const std::string& message) const {
    throw InputError({name_, line_number_, 0, static_cast<int64_t>(builder_.size())}, std::string(key), message);
  }

  uint64_t parse_number(std::string_view field, const char* what) const {
    if (!field.empty() && field[0] == '-') fail(field, std::string(what) + " '" + std::string(field) + "' is negative");
    uint64_t value = 0;
    auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (error == std::errc::result_out_of_range)
      fail(field, std::string(what) + " '" + std::string(field) + "' does not fit in 64 bits");
    if (error != std::errc() || end != field.data() + field.size())
      fail(field, std::string(what) + " '" + std::string(field) + "' is not a non-negative integer");
    return value;
  }

  void parse_line(std::string_view line) {
    size_t comment = line.find('#');
    if (comment != std::string_view::npos) line = line.substr(0, comment);
    std::vector<std::string_view> fields = split_fields(line);
    if (fields.empty()) return;
    std::string_view action = fields[0];
    builder_.set_source_line(line_number_);
    if (action == "alloc") {
      if (fields.size() < 3) fail(action, "alloc needs an id and a size: 'alloc <id> <bytes> [stream] [tag]'");
      if (fields.size() > 5) fail(fields[5], "unexpected field '" + std::string(fields[5]) + "' after the tag");
      std::string id(fields[1]);
      uint64_t bytes = parse_number(fields[2], "size");
      uint64_t stream = fields.size() > 3 ? parse_number(fields[3], "stream") : 0;
      std::string tag = fields.size() > 4 ? std::string(fields[4]) : std::string();
      auto live = live_since_.find(id);
      if (live != live_since_.end())
        fail(id, "id '" + id + "' is allocated again while still live (allocated on line " +
                     std::to_string(live->second) + ")");
      live_since_[id] = line_number_;
      freed_at_.erase(id);
      builder_.alloc(id, bytes, stream, tag);
    } else if (action == "free" || action == "free_requested" || action == "free_completed") {
      if (fields.size() != 2)
        fail(action, std::string(action) + " takes exactly one id: '" + std::string(action) + " <id>'");
      std::string id(fields[1]);
      bool ok = action == "free"             ? builder_.free(id)
                : action == "free_requested" ? builder_.free_requested(id)
                                             : builder_.free_completed(id);
      if (!ok) {
        auto freed = freed_at_.find(id);
        if (freed != freed_at_.end())
          fail(id, "double free of id '" + id + "' (already freed on line " + std::to_string(freed->second) + ")");
        if (!live_since_.count(id)) fail(id, std::string(action) + " of unknown id '" + id + "'");
        if (action == "free_completed") fail(id, "free_completed of id '" + id + "' whose free was not requested");
        fail(id, std::string(action) + " of id '" + id + "' whose free was already requested on line " +
                     std::to_string(requested_at_[id]));
      }
      if (action == "free_requested") {
        requested_at_[id] = line_number_;
      } else {
        live_since_.erase(id);
        requested_at_.erase(id);
        freed_at_[id] = line_number_;
      }
    } else if (action == "record_stream") {
      if (fields.size() != 3) fail(action, "record_stream takes an id and a stream: 'record_stream <id> <stream>'");
      std::string id(fields[1]);
      uint64_t stream = parse_number(fields[2], "stream");
      if (!builder_.record_stream(id, stream)) {
        if (!live_since_.count(id)) fail(id, "record_stream of id '" + id + "', which is not allocated");
        fail(id, "record_stream of id '" + id + "' after its free was requested");
      }
    } else if (action == "sync") {
      if (fields.size() > 2) fail(fields[2], "sync takes at most one stream: 'sync [stream]'");
      if (fields.size() == 2) {
        builder_.sync(parse_number(fields[1], "stream"));
      } else {
        builder_.sync_device();
      }
    } else if (action == "mark") {
      size_t label_start = line.find("mark") + 4;
      std::string_view label = line.substr(label_start);
      while (!label.empty() && is_blank(label.front())) label.remove_prefix(1);
      while (!label.empty() && is_blank(label.back())) label.remove_suffix(1);
      if (label.empty()) fail(action, "mark needs a label: 'mark <label>'");
      builder_.mark(std::string(label));
    } else if (action == "empty_cache") {
      if (fields.size() != 1) fail(fields[1], "empty_cache takes no arguments");
      if (!capturing_.empty())
        fail(action, "empty_cache while graph '" + capturing_.begin()->first + "' is capturing (line " +
                         std::to_string(capturing_.begin()->second) + "): PyTorch forbids synchronising during a capture");
      builder_.empty_cache();
    } else if (action == "capture_begin") {
      if (fields.size() < 3 || fields.size() > 4)
        fail(action, "capture_begin takes a graph, a stream and an optional pool: 'capture_begin <graph> <stream> [pool]'");
      std::string graph(fields[1]);
      uint64_t stream = parse_number(fields[2], "stream");
      std::string pool = fields.size() == 4 ? std::string(fields[3]) : std::string();
      if (auto capturing = capturing_.find(graph); capturing != capturing_.end())
        fail(graph, "graph '" + graph + "' begins a capture while its capture from line " +
                        std::to_string(capturing->second) + " is underway");
      if (auto captured = captured_.find(graph); captured != captured_.end())
        fail(graph, "graph '" + graph + "' was already captured on line " + std::to_string(captured->second) +
                        "; release it (graph_release) before capturing it again");
      for (const auto& [other, line] : capturing_)
        if (stream_of_capture_[other] == stream)
          fail(fields[2], "stream " + std::to_string(stream) + " is already capturing graph '" + other + "' (line " +
                              std::to_string(line) + ")");
      if (pool == graph) fail(fields[3], "graph '" + graph + "' cannot share its own pool; omit the pool for a fresh one");
      capturing_[graph] = line_number_;
      stream_of_capture_[graph] = stream;
      builder_.capture_begin(graph, stream, pool);
    } else if (action == "capture_end" || action == "graph_release") {
      if (fields.size() != 2)
        fail(action, std::string(action) + " takes exactly one graph: '" + std::string(action) + " <graph>'");
      std::string graph(fields[1]);
      if (action == "capture_end") {
        if (!capturing_.count(graph)) fail(graph, "capture_end of graph '" + graph + "', which is not capturing");
        capturing_.erase(graph);
        captured_[graph] = line_number_;
        builder_.capture_end(graph);
      } else {
        if (capturing_.count(graph))
          fail(graph, "graph_release of graph '" + graph + "' while it is capturing; end the capture first");
        if (!captured_.count(graph)) fail(graph, "graph_release of graph '" + graph + "', which was never captured");
        captured_.erase(graph);
        builder_.graph_release(graph);
      }
      if (action == "capture_end")
        for (auto it = joined_.begin(); it != joined_.end();) it = it->second == graph ? joined_.erase(it) : std::next(it);
    } else if (action == "capture_join") {
      if (fields.size() != 3) fail(action, "capture_join takes a graph and a stream: 'capture_join <graph> <stream>'");
      std::string graph(fields[1]);
      uint64_t stream = parse_number(fields[2], "stream");
      if (!capturing_.count(graph)) fail(graph, "capture_join of graph '" + graph + "', which is not capturing");
      for (const auto& [other, line] : capturing_)
        if (other != graph && stream_of_capture_[other] == stream)
          fail(fields[2], "stream " + std::to_string(stream) + " is capturing graph '" + other + "' (line " +
                              std::to_string(line) + "); a stream takes part in one capture at a time");
      if (auto joined = joined_.find(stream); joined != joined_.end() && joined->second != graph)
        fail(fields[2], "stream " + std::to_string(stream) + " already joined the capture of graph '" +
                            joined->second + "'; a stream takes part in one capture at a time");
      joined_[stream] = graph;
      builder_.capture_join(graph, stream);
    } else if (action == "mempool_enter") {
      if (fields.size() < 2) fail(action, "mempool_enter takes a pool and, where it creates it, options: "
                                          "'mempool_enter <pool> [use_on_oom] [no_split]'");
      std::string pool(fields[1]);
      if (auto open = entered_.find(pool); open != entered_.end())
        fail(pool, "mempool_enter of pool '" + pool + "', whose use_mem_pool context from line " +
                       std::to_string(open->second) + " is still open");
      uint32_t options = parse_mempool_options(fields);
      auto created = mempools_.find(pool);
      if (options != 0 && created != mempools_.end())
        fail(fields[2], "option '" + std::string(fields[2]) + "' on a later mempool_enter of pool '" + pool +
                            "': options belong to the pool's creation, its first mempool_enter (line " +
                            std::to_string(created->second) + ")");
      entered_[pool] = line_number_;
      mempools_.emplace(pool, line_number_);
      builder_.mempool_enter(pool, options);
    } else if (action == "mempool_exit" || action == "mempool_release") {
      if (fields.size() != 2)
        fail(action, std::string(action) + " takes exactly one pool: '" + std::string(action) + " <pool>'");
      std::string pool(fields[1]);
      if (action == "mempool_exit") {
        if (!entered_.count(pool)) fail(pool, "mempool_exit of pool '" + pool + "', which is not entered");
        entered_.erase(pool);
        builder_.mempool_exit(pool);
      } else {
        if (entered_.count(pool))
          fail(pool, "mempool_release of pool '" + pool + "' inside its use_mem_pool context; exit it first");
        if (!mempools_.count(pool)) fail(pool, "mempool_release of pool '" + pool + "', which was never entered");
        mempools_.erase(pool);
        builder_.mempool_release(pool);
      }
    } else {
      static const std::vector<std::string> actions = {
          "alloc",          "free", "mark",          "empty_cache", "record_stream", "free_requested",
          "free_completed", "sync", "capture_begin", "capture_end", "graph_release", "capture_join",
          "mempool_enter",  "mempool_exit", "mempool_release"};
      fail(action, "unknown trace action '" + std::string(action) + "'" + did_you_mean(action, actions) +
                       "; expected alloc, free, mark, empty_cache, record_stream, free_requested, "
                       "free_completed, sync, capture_begin, capture_join, capture_end, graph_release, "
                       "mempool_enter, mempool_exit or mempool_release");
    }
  }

  // The torch.cuda.MemPool options after a creating mempool_enter's pool name.
  uint32_t parse_mempool_options(const std::vector<std::string_view>& fields) const {
    static const std::vector<std::string> known = {"use_on_oom", "no_split"};
    uint32_t options = 0;
    for (size_t i = 2; i < fields.size(); ++i) {
      uint32_t bit = 0;
      if (fields[i] == "use_on_oom") bit = kMemPoolUseOnOom;
      if (fields[i] == "no_split") bit = kMemPoolNoSplit;
      if (bit == 0)
        fail(fields[i], "unknown memory pool option '" + std::string(fields[i]) + "'" + did_you_mean(fields[i], known) +
                            "; expected use_on_oom or no_split");
      if (options & bit) fail(fields[i], "memory pool option '" + std::string(fields[i]) + "' is given twice");
      options |= bit;
    }
    return options;
  }

  std::string name_;
  int64_t line_number_ = 0;
  TraceBuilder builder_;
  std::unordered_map<std::string, int64_t> live_since_;
  std::unordered_map<std::string, int64_t> freed_at_;
  std::unordered_map<std::string, int64_t> requested_at_;
  std::map<std::string, int64_t> capturing_;  // graph -> line of its capture_begin
  std::unordered_map<std::string, uint64_t> stream_of_capture_;
  std::unordered_map<std::string, int64_t> captured_;  // graph -> line of its capture_end
  std::unordered_map<uint64_t, std::string> joined_;   // side stream -> the capture it joined
  std::unordered_map<std::string, int64_t> entered_;   // MemPool -> line of its open mempool_enter
  std::unordered_map<std::string, int64_t> mempools_;  // MemPools not yet released -> line of their creation
};

}  // namespace

Trace parse_trace_text(const std::string& name, std::string_view text) { return TraceParser(name).parse(text); }

// Reads the file in chunks and parses each line as it completes, so memory holds the events,
// not the text (a small gzip of a gigabyte of comments costs nothing). A gzip stream that ends
// early (a truncated download) is an error, never a shorter trace.
Trace read_trace_file(const std::string& path) {
  const int descriptor = open_input_file(path, "");  // a FIFO nobody writes to is an error, not a hang
  gzFile file = gzdopen(descriptor, "rb");
  if (!file) {
    close(descriptor);
    throw InputError({path, 0, 0, -1}, "", "cannot open trace file");
  }
  struct Closer {
    gzFile file;
    ~Closer() { gzclose(file); }
  } closer{file};
  TraceParser parser(path);
  std::string pending;  // the start of a line whose '\n' is in a later chunk
  std::vector<char> buffer(size_t{1} << 16);
  const std::string not_text = "not a text trace (it contains NUL bytes); snapshots must end in .pickle or .pickle.gz";
  while (true) {
    const int count = gzread(file, buffer.data(), static_cast<unsigned>(buffer.size()));
    int code = Z_OK;
    const char* why = gzerror(file, &code);
    if (count < 0 || (count == 0 && code != Z_OK)) {
      // zlib reports a stream that stops before its end (and its CRC) as Z_BUF_ERROR.
      throw InputError({path, 0, 0, -1}, "",
                       code == Z_BUF_ERROR ? std::string("truncated compressed trace: the file ends before the end of "
                                                         "its gzip stream (an interrupted copy?)")
                                           : "corrupt compressed trace: " + std::string(why));
    }
    if (count == 0) break;
    std::string_view chunk(buffer.data(), static_cast<size_t>(count));
    // Checked per chunk, so /dev/zero or a huge binary file is refused after one read.
    if (chunk.find('\0') != std::string_view::npos) throw InputError({path, 0, 0, -1}, "", not_text);
    size_t position = 0;
    for (size_t end = chunk.find('\n'); end != std::string_view::npos; end = chunk.find('\n', position)) {
      if (pending.empty()) {
        parser.parse_next_line(chunk.substr(position, end - position));
      } else {
        pending.append(chunk.substr(position, end - position));
        if (pending.size() > kMaxTraceLineBytes) parser.fail_long_line();
        parser.parse_next_line(pending);
        pending.clear();
      }
      position = end + 1;
    }
    pending.append(chunk.substr(position));
    if (pending.size() > kMaxTraceLineBytes) parser.fail_long_line();
  }
  parser.parse_next_line(pending);
  return parser.finish();
}

void write_trace(std::ostream& out, const Trace& trace) {
  out << "# oomcast trace v1: alloc <id> <bytes> [stream] [tag] | free <id> | mark <label> | empty_cache |"
         " record_stream <id> <stream> | free_requested <id> | free_completed <id> | sync [stream] |"
         " capture_begin <graph> <stream> [pool] | capture_join <graph> <stream> | capture_end <graph> |"
         " graph_release <graph> | mempool_enter <pool> [use_on_oom] [no_split] | mempool_exit <pool> |"
         " mempool_release <pool>\n";
  // A Trace's slots are distinct even when two live slots share a name (the planner's names
  // are labels); the text form needs unique live ids, so a clash gets the slot appended.
  std::unordered_map<std::string, uint32_t> live_names;
  std::vector<std::string> written(trace.slot_names.size());
  auto name_of = [&](uint32_t slot) -> const std::string& {
    if (slot >= written.size()) written.resize(slot + 1);
    if (written[slot].empty()) {
      std::string name = slot < trace.slot_names.size() && !trace.slot_names[slot].empty()
                             ? trace.slot_names[slot]
                             : "slot" + std::to_string(slot);
      for (char& c : name)
        if (c == ' ' || c == '\t' || c == '#') c = '_';
      if (live_names.count(name)) name += "@" + std::to_string(slot);
      written[slot] = name;
    }
    return written[slot];
  };
  for (const Event& event : trace.events) {
    switch (event.kind) {
      case EventKind::Alloc:
        live_names[name_of(event.slot)] = event.slot;
        out << "alloc " << name_of(event.slot) << ' ' << event.bytes;
        if (event.stream != 0 || event.tag != 0) out << ' ' << event.stream;
        if (event.tag != 0) out << ' ' << trace.strings[event.tag];
        out << '\n';
        break;
      case EventKind::Free:
        out << "free " << name_of(event.slot) << '\n';
        live_names.erase(name_of(event.slot));
        written[event.slot].clear();
        break;
      case EventKind::Mark:
        out << "mark " << trace.strings[event.tag] << '\n';
        break;
      case EventKind::EmptyCache:
        out << "empty_cache\n";
        break;
      case EventKind::RecordStream:
        out << "record_stream " << name_of(event.slot) << ' ' << event.stream << '\n';
        break;
      case EventKind::FreeRequested:
        out << "free_requested " << name_of(event.slot) << '\n';
        break;
      case EventKind::FreeCompleted:
        out << "free_completed " << name_of(event.slot) << '\n';
        live_names.erase(name_of(event.slot));
        written[event.slot].clear();
        break;
      case EventKind::StreamSync:
        out << "sync " << event.stream << '\n';
        break;
      case EventKind::DeviceSync:
        out << "sync\n";
        break;
      case EventKind::CaptureBegin:
        out << "capture_begin " << trace.strings[event.tag] << ' ' << event.stream;
        if (event.slot != 0) out << ' ' << trace.strings[event.slot];
        out << '\n';
        break;
      case EventKind::CaptureEnd:
        out << "capture_end " << trace.strings[event.tag] << '\n';
        break;
      case EventKind::GraphRelease:
        out << "graph_release " << trace.strings[event.tag] << '\n';
        break;
      case EventKind::CaptureJoin:
        out << "capture_join " << trace.strings[event.tag] << ' ' << event.stream << '\n';
        break;
      case EventKind::MemPoolEnter:
        out << "mempool_enter " << trace.strings[event.tag];
        if (event.slot & kMemPoolUseOnOom) out << " use_on_oom";
        if (event.slot & kMemPoolNoSplit) out << " no_split";
        out << '\n';
        break;
      case EventKind::MemPoolExit:
        out << "mempool_exit " << trace.strings[event.tag] << '\n';
        break;
      case EventKind::MemPoolRelease:
        out << "mempool_release " << trace.strings[event.tag] << '\n';
        break;
    }
  }
}

}  // namespace oomcast::sim
