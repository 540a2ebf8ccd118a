// End-to-end replay of a large snapshot, as long-running jobs record them: writes a
// torch.cuda.memory._dump_snapshot()-shaped pickle of about a million trace entries (with
// stack frames), then, in a fresh process, reads it (plain and gzipped) and replays it
// with oomcast's snapshot replay, reporting the time of each part and the peak RSS of that
// process. Side by side in the same run: the time to just read the file's bytes.
// The recording is made by the simulator itself (a synthetic training-like trace), so the
// replay must reproduce it exactly; a divergence is a bug and exits 1.
//   usage: replay_bench_snapshot [entries=1000000] [frames_per_entry=4] [dir=/tmp]
//          replay_bench_snapshot --replay FILE     (the measured child process)
//          replay_bench_snapshot --write FILE [entries] [frames_per_entry]   (only writes the
//          pickle, for bench/replay_vs_python_bench.py)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/replay_bench_trace.h"
#include "sim/caching_allocator.h"
#include "sim/gzip_file.h"
#include "sim/replay.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"

using namespace oomcast::sim;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Just enough of pickle protocol 4 for plain data, memoising repeated strings.
class PickleWriter {
 public:
  std::string out;
  PickleWriter() { out += "\x80\x04"; }
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      out += 'J';
      auto u = static_cast<uint32_t>(static_cast<int32_t>(v));
      for (int i = 0; i < 4; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
      return;
    }
    out += '\x8a';
    out += '\x08';
    auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
  }
  void unsigned_integer(uint64_t v) {
    if (v <= static_cast<uint64_t>(INT64_MAX)) return integer(static_cast<int64_t>(v));
    out += '\x8a';
    out += '\x09';
    for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
    out += '\0';
  }
  void string(const std::string& s) {
    out += '\x8c';
    out += static_cast<char>(s.size());
    out += s;
  }
  // A string stored once in the memo and referenced afterwards, as pickle does for an
  // object seen before.
  void memo_string(const std::string& s, std::vector<int64_t>& slot_of, size_t key) {
    if (slot_of[key] >= 0) {
      out += 'j';
      auto u = static_cast<uint32_t>(slot_of[key]);
      for (int i = 0; i < 4; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
      return;
    }
    string(s);
    out += '\x94';
    slot_of[key] = memo_count++;
  }
  void boolean(bool v) { out += v ? '\x88' : '\x89'; }
  void begin_dict() { out += "}("; }
  void end_dict() { out += 'u'; }
  void begin_list() { out += "]("; }
  void end_list() { out += 'e'; }
  void stop() { out += '.'; }
  int64_t memo_count = 0;
};

size_t action_key(const std::string& action) {
  static const char* const kActions[] = {"alloc", "segment_alloc", "segment_free", "free_requested", "free_completed"};
  for (size_t i = 0; i < 5; ++i)
    if (action == kActions[i]) return i;
  std::abort();
}

struct Recorded {
  std::string action;
  uint64_t addr, size;
};

// Replays `trace` and writes what a real recording of it would hold.
std::string record_snapshot(const Trace& trace, int frames_per_entry, size_t& entries_written) {
  ReplayOptions options;
  options.record_segment_decisions = true;
  Replayer replayer(AllocatorConfig{}, DeviceModel::unlimited(), options);
  std::vector<uint64_t> address_of_slot(trace.slot_names.size(), 0);
  std::vector<uint64_t> bytes_of_slot(trace.slot_names.size(), 0);
  std::vector<Recorded> per_event(trace.events.size());
  replayer.on_event([&](size_t i) {
    const Event& event = trace.events[i];
    if (event.kind == EventKind::Alloc) {
      address_of_slot[event.slot] = replayer.address_of(event.slot);
      bytes_of_slot[event.slot] = event.bytes;
      per_event[i] = Recorded{"alloc", address_of_slot[event.slot], event.bytes};
    } else if (event.kind == EventKind::Free) {
      per_event[i] = Recorded{"free", address_of_slot[event.slot], bytes_of_slot[event.slot]};
    }
  });
  ReplayResult result = replayer.run(trace);

  static const char* const kFiles[] = {"torch/nn/modules/module.py", "torch/nn/modules/linear.py",
                                       "torch/nn/functional.py",     "torch/autograd/graph.py",
                                       "train.py",                   "model/transformer.py",
                                       "torch/_tensor.py",           "torch/optim/adamw.py"};
  static const char* const kNames[] = {"_call_impl", "forward", "linear", "backward", "step", "attention", "__torch_function__", "_single_tensor_adamw"};
  std::vector<int64_t> memo(64, -1);
  PickleWriter w;
  int64_t time_us = 1748732496203737;
  auto entry = [&](const char* action, uint64_t addr, uint64_t size, size_t seed) {
    w.begin_dict();
    w.memo_string("action", memo, 16);
    w.memo_string(action, memo, 17 + action_key(action));
    w.memo_string("addr", memo, 22);
    w.unsigned_integer(addr);
    w.memo_string("size", memo, 23);
    w.unsigned_integer(size);
    w.memo_string("stream", memo, 24);
    w.integer(0);
    w.memo_string("time_us", memo, 25);
    w.integer(time_us++);
    w.memo_string("frames", memo, 26);
    w.begin_list();
    for (int f = 0; f < frames_per_entry; ++f) {
      size_t k = (seed + static_cast<size_t>(f) * 3) % 8;
      w.begin_dict();
      w.memo_string("filename", memo, 27);
      w.memo_string(kFiles[k], memo, k);
      w.memo_string("line", memo, 28);
      w.integer(static_cast<int64_t>((seed * 31 + static_cast<size_t>(f)) % 4000));
      w.memo_string("name", memo, 29);
      w.memo_string(kNames[k], memo, 8 + k);
      w.end_dict();
    }
    w.end_list();
    w.end_dict();
    ++entries_written;
  };
  w.begin_dict();
  // Segments at dump time.
  w.memo_string("segments", memo, 30);
  w.begin_list();
  for (const Block* head : replayer.allocator().segment_heads()) {
    uint64_t total = 0, allocated = 0;
    for (const Block* b = head; b; b = b->next) {
      total += b->size;
      if (b->allocated) allocated += b->size;
    }
    w.begin_dict();
    w.string("device"); w.integer(0);
    w.string("address"); w.unsigned_integer(head->address);
    w.string("total_size"); w.unsigned_integer(total);
    w.string("allocated_size"); w.unsigned_integer(allocated);
    w.string("stream"); w.integer(0);
    w.string("segment_type"); w.string(head->pool->is_small() ? "small" : "large");
    w.string("is_expandable"); w.boolean(false);
    w.string("blocks");
    w.begin_list();
    for (const Block* b = head; b; b = b->next) {
      w.begin_dict();
      w.string("address"); w.unsigned_integer(b->address);
      w.string("size"); w.unsigned_integer(b->size);
      w.string("requested_size"); w.unsigned_integer(b->requested_size);
      w.string("state"); w.string(b->allocated ? "active_allocated" : "inactive");
      w.end_dict();
    }
    w.end_list();
    w.end_dict();
  }
  w.end_list();
  // The trace: per event, its segment decisions first, then the alloc or the free pair.
  w.memo_string("device_traces", memo, 31);
  w.begin_list();
  w.begin_list();
  size_t next_decision = 0;
  const auto& decisions = result.segment_decisions;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    for (; next_decision < decisions.size() && decisions[next_decision].event_index == i; ++next_decision) {
      const SegmentDecision& d = decisions[next_decision];
      entry(d.kind == SegmentDecision::Kind::Alloc ? "segment_alloc" : "segment_free", d.address, d.size, i);
    }
    const Recorded& r = per_event[i];
    if (r.action == "alloc") {
      entry("alloc", r.addr, r.size, i);
    } else if (r.action == "free") {
      entry("free_requested", r.addr, r.size, i);
      entry("free_completed", r.addr, r.size, i);
    }
  }
  w.end_list();
  w.end_list();
  w.string("allocator_settings");
  w.begin_dict();
  w.string("PYTORCH_CUDA_ALLOC_CONF"); w.string("");
  w.string("max_split_size"); w.integer(-1);
  w.string("expandable_segments"); w.boolean(false);
  w.end_dict();
  w.end_dict();
  w.stop();
  return std::move(w.out);
}

int replay_child(const char* path) {
  auto start = std::chrono::steady_clock::now();
  Snapshot snapshot = read_snapshot(path);
  double read_seconds = seconds_since(start);
  auto replay_start = std::chrono::steady_clock::now();
  SnapshotReplayReport report = replay_snapshot(snapshot, snapshot_allocator_config(snapshot), path);
  double replay_seconds = seconds_since(replay_start);
  std::printf("%.4f %.4f %zu %zu %d\n", read_seconds, replay_seconds, snapshot.device_traces[0].size(),
              report.recorded_segment_decisions, report.first_mismatch ? 0 : 1);
  return 0;
}

struct ChildResult {
  double read_seconds = 0, replay_seconds = 0, peak_rss_mib = 0, cpu_seconds = 0;
  size_t entries = 0, decisions = 0;
  bool reproduced = false;
};

ChildResult run_child(const char* self, const std::string& path) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) std::abort();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 1);
    close(pipe_fds[0]);
    execl(self, self, "--replay", path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  char buffer[256] = {0};
  ssize_t got = read(pipe_fds[0], buffer, sizeof buffer - 1);
  close(pipe_fds[0]);
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  ChildResult result;
  int reproduced = 0;
  if (got <= 0 || std::sscanf(buffer, "%lf %lf %zu %zu %d", &result.read_seconds, &result.replay_seconds,
                              &result.entries, &result.decisions, &reproduced) != 5)
    std::abort();
  result.reproduced = reproduced == 1;
  result.peak_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
  // CPU time of the whole child (start-up included), for loaded machines where wall time lies.
  result.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  return result;
}

double time_plain_read(const std::string& path) {
  auto start = std::chrono::steady_clock::now();
  FileBytes bytes = read_file_bytes(path);
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 4096) sum += bytes.data()[i];
  double elapsed = seconds_since(start);
  if (sum == 1) std::printf(" ");
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--replay") == 0) return replay_child(argv[2]);
  const bool write_only = argc >= 3 && std::strcmp(argv[1], "--write") == 0;
  const int first = write_only ? 3 : 1;  // where entries and frames_per_entry are
  size_t target_entries = argc > first ? std::strtoull(argv[first], nullptr, 10) : 1000000;
  int frames = argc > first + 1 ? std::atoi(argv[first + 1]) : 4;
  std::string dir = !write_only && argc > 3 ? argv[3] : "/tmp";
  // An alloc makes one entry and a free two, so 2/3 of an entry per trace event on average.
  Trace trace = make_replay_bench_trace(target_entries * 2 / 3, 7);
  size_t entries = 0;
  std::string pickle = record_snapshot(trace, frames, entries);
  if (write_only) {
    std::ofstream(argv[2], std::ios::binary).write(pickle.data(), static_cast<std::streamsize>(pickle.size()));
    std::printf("{\"entries\": %zu, \"frames_per_entry\": %d, \"path\": \"%s\"}\n", entries, frames, argv[2]);
    return 0;
  }
  std::string path = dir + "/oomcast_bench_" + std::to_string(getpid()) + ".pickle";
  std::ofstream(path, std::ios::binary).write(pickle.data(), static_cast<std::streamsize>(pickle.size()));
  gzFile gz = gzopen((path + ".gz").c_str(), "wb6");
  gzwrite(gz, pickle.data(), static_cast<unsigned>(pickle.size()));
  gzclose(gz);
  size_t pickle_bytes = pickle.size();
  pickle.clear();
  pickle.shrink_to_fit();

  double bytes_read_seconds = time_plain_read(path);
  ChildResult plain = run_child(argv[0], path);
  ChildResult gzipped = run_child(argv[0], path + ".gz");
  std::ifstream gz_in(path + ".gz", std::ios::binary | std::ios::ate);
  auto gz_bytes = static_cast<long long>(gz_in.tellg());
  std::remove(path.c_str());
  std::remove((path + ".gz").c_str());
  std::printf(
      "{\"entries\": %zu, \"frames_per_entry\": %d, \"pickle_mib\": %.1f, \"gzip_mib\": %.1f, "
      "\"file_bytes_read_s\": %.3f, \"pickle_read_s\": %.3f, \"gzip_read_s\": %.3f, \"replay_s\": %.3f, "
      "\"end_to_end_s\": %.3f, \"end_to_end_gzip_s\": %.3f, \"cpu_s\": %.3f, \"cpu_gzip_s\": %.3f, \"peak_rss_mib\": %.1f, \"peak_rss_gzip_mib\": %.1f, "
      "\"entries_per_second_end_to_end\": %.0f, \"segment_decisions\": %zu, \"reproduced\": %s}\n",
      plain.entries, frames, static_cast<double>(pickle_bytes) / (1 << 20), static_cast<double>(gz_bytes) / (1 << 20),
      bytes_read_seconds, plain.read_seconds, gzipped.read_seconds, plain.replay_seconds,
      plain.read_seconds + plain.replay_seconds, gzipped.read_seconds + gzipped.replay_seconds, plain.cpu_seconds,
      gzipped.cpu_seconds, plain.peak_rss_mib,
      gzipped.peak_rss_mib, static_cast<double>(plain.entries) / (plain.read_seconds + plain.replay_seconds),
      plain.decisions, plain.reproduced && gzipped.reproduced ? "true" : "false");
  return plain.reproduced && gzipped.reproduced && entries == plain.entries ? 0 : 1;
}
