// Tests of read_snapshot/parse_snapshot: the six real fixtures in tests/data checked against
// numbers Python's pickle module gives, small inline snapshots (bytes pasted from CPython 3.11
// pickle.dumps(..., protocol=4), Python source beside them) and every error path.
#include "sim/snapshot.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "base/input_error.h"
#include "sim/gzip_file.h"
#include "sim/pickle_writer.h"

namespace {

using oomcast::InputError;
using oomcast::sim::Snapshot;
using oomcast::sim::SnapshotBlock;
using oomcast::sim::SnapshotTraceEntry;
using Action = SnapshotTraceEntry::Action;

const std::string kDataDir = std::string(OOMCAST_SOURCE_DIR) + "/tests/data/";

template <size_t N>
std::string bytes_of(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

Snapshot parse(const std::string& bytes) {
  return oomcast::sim::parse_snapshot("s.pickle", reinterpret_cast<const uint8_t*>(bytes.data()),
                                      bytes.size());
}

InputError error_of(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const InputError& error) {
    return error;
  }
  return InputError({}, "", "no error");
}

InputError read_error_of(const std::string& path) {
  try {
    oomcast::sim::read_snapshot(path);
  } catch (const InputError& error) {
    return error;
  }
  return InputError({}, "", "no error");
}

std::string file_contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A file in the temp directory, removed when the test ends.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& contents)
      : path_((std::filesystem::temp_directory_path() /
               ("oomcast_snapshot_test_" + std::to_string(getpid()) + "_" + name))
                  .string()) {
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::map<Action, size_t> count_actions(const Snapshot& snapshot) {
  std::map<Action, size_t> counts;
  for (const auto& device : snapshot.device_traces) {
    for (const SnapshotTraceEntry& entry : device) ++counts[entry.action];
  }
  return counts;
}

// {'segments': [{'device': 0, 'address': 1048576, 'total_size': 2097152, 'allocated_size': 1536,
//   'active_size': 2048, 'requested_size': 1000, 'stream': 7, 'segment_type': 'small',
//   'segment_pool_id': (1, 2), 'is_expandable': True, 'frames': [],
//   'blocks': [{'address': 1048576, 'size': 1536, 'requested_size': 1000, 'state': 'active_allocated', 'frames': []},
//              {'address': 1050112, 'size': 512, 'requested_size': 0, 'state': 'active_pending_free', 'frames': []},
//              {'address': 1050624, 'size': 2095104, 'requested_size': 0, 'state': 'inactive', 'frames': []}]}],
//  'device_traces': [[
//   {'action': 'alloc', 'addr': 1048576, 'size': 1000, 'stream': 7, 'time_us': 5,
//    'frames': [{'filename': 'a.py', 'line': 1, 'name': 'f'}], 'compile_context': 'N/A', 'user_metadata': ''},
//   {'action': 'oom', 'device_free': 123, 'size': 512, 'stream': 7, 'time_us': 6},
//   {'action': 'user_defined', 'name': 'step'}]],
//  'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True,max_split_size_mb:64',
//                         'max_split_size': 67108864, 'expandable_segments': True}}
const std::string kModernSnapshot = bytes_of(
      "\x80\x04\x95\xed\x02\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94}\x94(\x8c\x06" "device\x94"
      "K\x00\x8c\x07" "address\x94J\x00\x00\x10\x00\x8c\x0atotal_size\x94J\x00\x00 \x00\x8c\x0e" "allocated_size\x94"
      "M\x00\x06\x8c\x0b" "active_size\x94M\x00\x08\x8c\x0erequested_size\x94M\xe8\x03\x8c\x06stream\x94"
      "K\x07\x8c\x0csegment_type\x94\x8c\x05small\x94\x8c\x0fsegment_pool_id\x94K\x01K\x02\x86\x94"
      "\x8c\x0dis_expandable\x94\x88\x8c\x06" "frames\x94]\x94\x8c\x06" "blocks\x94]\x94(}\x94(h\x05"
      "J\x00\x00\x10\x00\x8c\x04size\x94M\x00\x06h\x09M\xe8\x03\x8c\x05state\x94\x8c\x10" "active_allocated\x94"
      "h\x10]\x94u}\x94(h\x05J\x00\x06\x10\x00h\x15M\x00\x02h\x09K\x00h\x16\x8c\x13" "active_pending_free\x94"
      "h\x10]\x94u}\x94(h\x05J\x00\x08\x10\x00h\x15J\x00\xf8\x1f\x00h\x09K\x00h\x16\x8c\x08inactive\x94"
      "h\x10]\x94ueua\x8c\x0d" "device_traces\x94]\x94]\x94(}\x94(\x8c\x06" "action\x94\x8c\x05" "alloc\x94"
      "\x8c\x04" "addr\x94J\x00\x00\x10\x00h\x15M\xe8\x03h\x0aK\x07\x8c\x07time_us\x94K\x05h\x10]\x94"
      "}\x94(\x8c\x08" "filename\x94\x8c\x04" "a.py\x94\x8c\x04line\x94K\x01\x8c\x04name\x94\x8c\x01"
      "f\x94ua\x8c\x0f" "compile_context\x94\x8c\x03N/A\x94\x8c\x0duser_metadata\x94\x8c\x00\x94"
      "u}\x94(h#\x8c\x03oom\x94\x8c\x0b" "device_free\x94K{h\x15M\x00\x02h\x0aK\x07h&K\x06u}\x94(h#\x8c"
      "\x0cuser_defined\x94h,\x8c\x04step\x94uea\x8c\x12" "allocator_settings\x94}\x94(\x8c\x17PYTORCH_CUDA_ALLOC_CONF\x94"
      "\x8c-expandable_segments:True,max_split_size_mb:64\x94\x8c\x0emax_split_size\x94J\x00\x00\x00"
      "\x04\x8c\x13" "expandable_segments\x94\x88uu.");

// The torch 2.0 shape: blocks without address or requested_size, segments without
// requested_size, no allocator_settings, no time_us.
// {'segments': [
//   {'device': 0, 'address': 9000000, 'total_size': 2048, 'allocated_size': 512, 'active_size': 512,
//    'stream': 0, 'segment_type': 'large',
//    'blocks': [{'size': 512, 'state': 'active_allocated'}, {'size': 1536, 'state': 'inactive'}]},
//   {'device': 0, 'address': 4000000, 'total_size': 1024, 'allocated_size': 0, 'active_size': 0,
//    'stream': 0, 'segment_type': 'large', 'blocks': [{'size': 1024, 'state': 'inactive'}]}],
//  'device_traces': [[{'action': 'segment_alloc', 'addr': 4000000, 'size': 1024, 'stream': 0}]]}
const std::string kOldSnapshot = bytes_of(
      "\x80\x04\x95S\x01\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94(}\x94(\x8c\x06" "device\x94"
      "K\x00\x8c\x07" "address\x94J@T\x89\x00\x8c\x0atotal_size\x94M\x00\x08\x8c\x0e" "allocated_size\x94"
      "M\x00\x02\x8c\x0b" "active_size\x94M\x00\x02\x8c\x06stream\x94K\x00\x8c\x0csegment_type\x94"
      "\x8c\x05large\x94\x8c\x06" "blocks\x94]\x94(}\x94(\x8c\x04size\x94M\x00\x02\x8c\x05state\x94"
      "\x8c\x10" "active_allocated\x94u}\x94(h\x0fM\x00\x06h\x10\x8c\x08inactive\x94ueu}\x94(h\x04"
      "K\x00h\x05J\x00\x09=\x00h\x06M\x00\x04h\x07K\x00h\x08K\x00h\x09K\x00h\x0ah\x0bh\x0c]\x94}\x94"
      "(h\x0fM\x00\x04h\x10h\x13uaue\x8c\x0d" "device_traces\x94]\x94]\x94}\x94(\x8c\x06" "action\x94"
      "\x8c\x0dsegment_alloc\x94\x8c\x04" "addr\x94J\x00\x09=\x00h\x0fM\x00\x04h\x09K\x00uaau.");

}  // namespace

TEST_CASE("each real snapshot fixture has the segments and trace entries Python sees", "[sim][snapshot]") {
  // Expected numbers from, for each file f:
  //   python3 -c "import pickle,gzip,collections; d=pickle.load(gzip.open(f)); s=d['segments'];
  //     print(len(s), collections.Counter(e['action'] for t in d['device_traces'] for e in t),
  //           s[0]['address'], sum(len(g['blocks']) for g in s), sum(g['total_size'] for g in s),
  //           repr(d['allocator_settings']['PYTORCH_CUDA_ALLOC_CONF']))"
  struct Expected {
    const char* file;
    size_t segments, alloc, free_requested, free_completed, segment_alloc, segment_free;
    uint64_t first_address;
    size_t blocks;
    uint64_t total_size;
  };
  const Expected fixtures[] = {
      {"cs336_kk_2p7b_fp32_fwd_ctx128.pickle.gz", 516, 2058, 1155, 1155, 289, 0, 140629510193152, 1276,
       19667091456},
      {"cs336_kk_2p7b_fp32_step_ctx128.pickle.gz", 1010, 6770, 5894, 5894, 782, 430, 140580050960384,
       1525, 61111009280},
      {"cs336_silmont_naive_attn_b8_l4096_d16_fwdbwd.pickle.gz", 9, 36, 26, 26, 9, 0, 139777059848192,
       20, 3781165056},
      {"cs336_silmont_small_fp32_nograd_fwd_ctx128.pickle.gz", 29, 681, 681, 681, 0, 0, 139990768025600,
       164, 610271232},
      {"hfblog_linear_10k_50k_grad.pickle.gz", 7, 12, 7, 7, 7, 0, 139692569788416, 9, 4439670784},
      {"hfblog_linear_10k_50k_nograd.pickle.gz", 7, 12, 7, 7, 7, 0, 139793031757824, 9, 4439670784},
  };
  for (const Expected& e : fixtures) {
    INFO(e.file);
    const Snapshot snapshot = oomcast::sim::read_snapshot(kDataDir + e.file);
    CHECK(snapshot.segments.size() == e.segments);
    REQUIRE(snapshot.device_traces.size() == 1);
    std::map<Action, size_t> expected_counts{{Action::Alloc, e.alloc},
                                             {Action::FreeRequested, e.free_requested},
                                             {Action::FreeCompleted, e.free_completed},
                                             {Action::SegmentAlloc, e.segment_alloc},
                                             {Action::SegmentFree, e.segment_free}};
    std::erase_if(expected_counts, [](const auto& item) { return item.second == 0; });
    CHECK(count_actions(snapshot) == expected_counts);
    CHECK(snapshot.segments.front().address == e.first_address);
    size_t blocks = 0;
    uint64_t total_size = 0;
    for (const auto& segment : snapshot.segments) {
      blocks += segment.blocks.size();
      total_size += segment.total_size;
    }
    CHECK(blocks == e.blocks);
    CHECK(total_size == e.total_size);
    CHECK(snapshot.has_allocator_settings);
    CHECK(snapshot.alloc_conf == std::optional<std::string>(""));
    CHECK(snapshot.max_split_size == -1);
    CHECK_FALSE(snapshot.expandable_segments);
  }
}

TEST_CASE("the fixtures' first trace entry, time stamps and block tiling match Python", "[sim][snapshot]") {
  // python3 -c "import pickle,gzip; d=pickle.load(gzip.open(f)); t=d['device_traces'][0];
  //   print(t[0]['action'], t[0]['addr'], t[0]['size'], t[0]['time_us'], t[-1]['time_us'],
  //         d['segments'][-1]['blocks'][-1]['address'])"
  // with f = tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz
  const Snapshot snapshot = oomcast::sim::read_snapshot(kDataDir + "cs336_kk_2p7b_fp32_step_ctx128.pickle.gz");
  const auto& trace = snapshot.device_traces.at(0);
  CHECK(trace.front().action == Action::SegmentFree);
  CHECK(trace.front().addr == 140625961811968);
  CHECK(trace.front().size == 10485760);
  CHECK(trace.front().time_us == 1748732571481678);
  CHECK(trace.back().time_us == 1748732571875664);
  CHECK(snapshot.segments.back().blocks.back().address == 140670379491328);
  for (const auto& segment : snapshot.segments) {
    uint64_t next = segment.address;
    for (const SnapshotBlock& block : segment.blocks) {
      CHECK(block.address == next);
      next += block.size;
    }
    CHECK(next == segment.address + segment.total_size);
  }
}

TEST_CASE("the fixtures' block states and small segments match Python", "[sim][snapshot]") {
  // python3 -c "import pickle,gzip,collections; d=pickle.load(gzip.open(f)); s=d['segments'];
  //   print(sum(g['segment_type']=='small' for g in s),
  //         collections.Counter(b['state'] for g in s for b in g['blocks']),
  //         sum(g['allocated_size'] for g in s))"
  // with f = tests/data/cs336_kk_2p7b_fp32_fwd_ctx128.pickle.gz: 10, 1227 active_allocated,
  // 49 inactive, 19498420224
  const Snapshot snapshot = oomcast::sim::read_snapshot(kDataDir + "cs336_kk_2p7b_fp32_fwd_ctx128.pickle.gz");
  size_t small = 0, allocated_blocks = 0, inactive_blocks = 0;
  uint64_t allocated_size = 0;
  for (const auto& segment : snapshot.segments) {
    small += segment.is_small_pool;
    allocated_size += segment.allocated_size;
    CHECK(segment.pool_id_first == 0);
    CHECK(segment.pool_id_second == 0);
    for (const SnapshotBlock& block : segment.blocks) {
      allocated_blocks += block.state == SnapshotBlock::State::ActiveAllocated;
      inactive_blocks += block.state == SnapshotBlock::State::Inactive;
    }
  }
  CHECK(small == 10);
  CHECK(allocated_blocks == 1227);
  CHECK(inactive_blocks == 49);
  CHECK(allocated_size == 19498420224);
}

TEST_CASE("a modern snapshot decodes every field the simulator uses", "[sim][snapshot]") {
  const Snapshot snapshot = parse(kModernSnapshot);
  REQUIRE(snapshot.segments.size() == 1);
  const auto& segment = snapshot.segments[0];
  CHECK(segment.address == 1048576);
  CHECK(segment.total_size == 2097152);
  CHECK(segment.allocated_size == 1536);
  CHECK(segment.active_size == 2048);
  CHECK(segment.requested_size == 1000);
  CHECK(segment.stream == 7);
  CHECK(segment.is_small_pool);
  CHECK(segment.is_expandable);
  CHECK(segment.pool_id_first == 1);
  CHECK(segment.pool_id_second == 2);
  REQUIRE(segment.blocks.size() == 3);
  CHECK(segment.blocks[0].state == SnapshotBlock::State::ActiveAllocated);
  CHECK(segment.blocks[0].requested_size == 1000);
  CHECK(segment.blocks[1].state == SnapshotBlock::State::ActivePendingFree);
  CHECK(segment.blocks[1].address == 1050112);
  CHECK(segment.blocks[2].state == SnapshotBlock::State::Inactive);
  CHECK(segment.blocks[2].size == 2095104);
  CHECK(snapshot.alloc_conf == std::optional<std::string>("expandable_segments:True,max_split_size_mb:64"));
  CHECK(snapshot.has_allocator_settings);
  CHECK(snapshot.expandable_segments);
  CHECK(snapshot.max_split_size == 67108864);
}

TEST_CASE("an oom entry takes its addr from device_free and unknown actions become Other", "[sim][snapshot]") {
  const Snapshot snapshot = parse(kModernSnapshot);
  REQUIRE(snapshot.device_traces.size() == 1);
  const auto& trace = snapshot.device_traces[0];
  REQUIRE(trace.size() == 3);
  CHECK(trace[0].action == Action::Alloc);
  CHECK(trace[0].addr == 1048576);
  CHECK(trace[0].size == 1000);
  CHECK(trace[0].stream == 7);
  CHECK(trace[0].time_us == 5);
  CHECK(trace[1].action == Action::Oom);
  CHECK(trace[1].addr == 123);
  CHECK(trace[1].size == 512);
  CHECK(trace[2].action == Action::Other);
}

// {'segments': [], 'device_traces': [[{'action': ACTION, 'addr': 0, 'size': 512, 'stream': 0}]]}
std::string one_action_snapshot(const char* action) {
  oomcast::sim::pickle::PickleWriter out;
  out.begin_dict();
  out.key("segments");
  out.begin_list();
  out.end();
  out.key("device_traces");
  out.begin_list();
  out.begin_list();
  out.begin_dict();
  out.key("action");
  out.string(action);
  out.key("addr");
  out.integer(0);
  out.key("size");
  out.integer(512);
  out.key("stream");
  out.integer(0);
  out.end();
  out.end();
  out.end();
  out.end();
  return out.finish();
}

TEST_CASE("a trace action oomcast does not know is refused, naming it and its entry, not dropped",
          "[sim][snapshot][hostile]") {
  const InputError error = error_of(one_action_snapshot("segment_resize"));
  CHECK_THAT(error.what(), Catch::Contains("unknown trace action 'segment_resize'"));
  CHECK(error.where().event == 0);
  CHECK(parse(one_action_snapshot("user_defined")).device_traces[0][0].action == Action::Other);
}

TEST_CASE("an old snapshot gets block addresses by tiling and segments sorted by address", "[sim][snapshot]") {
  const Snapshot snapshot = parse(kOldSnapshot);
  REQUIRE(snapshot.segments.size() == 2);
  CHECK(snapshot.segments[0].address == 4000000);
  const auto& segment = snapshot.segments[1];
  CHECK(segment.address == 9000000);
  REQUIRE(segment.blocks.size() == 2);
  CHECK(segment.blocks[0].address == 9000000);
  CHECK(segment.blocks[1].address == 9000512);
  CHECK(segment.blocks[1].requested_size == 0);
  CHECK(segment.requested_size == 0);
  CHECK(segment.allocated_size == 512);
  CHECK_FALSE(snapshot.has_allocator_settings);
  CHECK_FALSE(snapshot.alloc_conf.has_value());
  CHECK(snapshot.max_split_size == -1);
  REQUIRE(snapshot.device_traces.at(0).size() == 1);
  CHECK(snapshot.device_traces[0][0].action == Action::SegmentAlloc);
  CHECK(snapshot.device_traces[0][0].time_us == 0);
}

TEST_CASE("a trace entry without size is an error naming the key, the entry and its byte", "[sim][snapshot]") {
  // {'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, 'stream': 0},
  //                                     {'action': 'alloc', 'addr': 1, 'stream': 0}]]}
  const InputError error = error_of(bytes_of(
      "\x80\x04\x95k\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94\x8c\x0d" "device_traces\x94"
      "]\x94]\x94(}\x94(\x8c\x06" "action\x94\x8c\x05" "alloc\x94\x8c\x04" "addr\x94K\x01\x8c\x04size\x94"
      "K\x02\x8c\x06stream\x94K\x00u}\x94(h\x07h\x08h\x09K\x01h\x0bK\x00ueau."));
  CHECK(error.message() == "device_traces[0][1]: missing key 'size' at byte 98");
  CHECK(error.key() == "size");
  CHECK(error.where().file == "s.pickle");
  CHECK(error.where().event == 1);
}

TEST_CASE("a segment without blocks is an error naming the segment", "[sim][snapshot]") {
  // {'segments': [{'device': 0, 'address': 0, 'total_size': 512, 'stream': 0, 'segment_type': 'small'}]}
  const InputError error = error_of(bytes_of(
      "\x80\x04\x95_\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94}\x94(\x8c\x06" "device\x94"
      "K\x00\x8c\x07" "address\x94K\x00\x8c\x0atotal_size\x94M\x00\x02\x8c\x06stream\x94K\x00\x8c\x0c"
      "segment_type\x94\x8c\x05small\x94uas."));
  CHECK(error.message() == "segments[0]: missing key 'blocks' at byte 26");
  CHECK(error.key() == "blocks");
}

TEST_CASE("a negative block size is an error", "[sim][snapshot]") {
  // {'segments': [{'device': 0, 'address': 0, 'total_size': 512, 'stream': 0, 'segment_type': 'small',
  //                'blocks': [{'size': -512, 'state': 'inactive'}]}], 'device_traces': []}
  const InputError error = error_of(bytes_of(
      "\x80\x04\x95\xa1\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94}\x94(\x8c\x06" "device\x94"
      "K\x00\x8c\x07" "address\x94K\x00\x8c\x0atotal_size\x94M\x00\x02\x8c\x06stream\x94K\x00\x8c\x0c"
      "segment_type\x94\x8c\x05small\x94\x8c\x06" "blocks\x94]\x94}\x94(\x8c\x04size\x94J\x00\xfe\xff"
      "\xff\x8c\x05state\x94\x8c\x08inactive\x94uaua\x8c\x0d" "device_traces\x94]\x94u."));
  CHECK(error.message() == "segments[0].blocks[0]: 'size' is negative (-512) at byte 124");
}

TEST_CASE("an address of 2^64 is an error, not a wrapped value", "[sim][snapshot]") {
  // {'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 2**64, 'size': 2, 'stream': 0}]]}
  const InputError error = error_of(bytes_of(
      "\x80\x04\x95" "c\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94\x8c\x0d" "device_traces\x94"
      "]\x94]\x94}\x94(\x8c\x06" "action\x94\x8c\x05" "alloc\x94\x8c\x04" "addr\x94\x8a\x09\x00\x00"
      "\x00\x00\x00\x00\x00\x00\x01\x8c\x04size\x94K\x02\x8c\x06stream\x94K\x00uaau."));
  CHECK(error.message() == "device_traces[0][0]: 'addr' does not fit in 64 bits at byte 74");
  CHECK(error.where().event == 0);
}

TEST_CASE("an unknown block state is an error", "[sim][snapshot]") {
  // {'segments': [{'device': 0, 'address': 0, 'total_size': 512, 'stream': 0, 'segment_type': 'small',
  //                'blocks': [{'size': 512, 'state': 'weird'}]}]}
  const InputError error = error_of(bytes_of(
      "\x80\x04\x95\x89\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94}\x94(\x8c\x06" "device\x94"
      "K\x00\x8c\x07" "address\x94K\x00\x8c\x0atotal_size\x94M\x00\x02\x8c\x06stream\x94K\x00\x8c\x0c"
      "segment_type\x94\x8c\x05small\x94\x8c\x06" "blocks\x94]\x94}\x94(\x8c\x04size\x94M\x00\x02\x8c"
      "\x05state\x94\x8c\x05weird\x94uauas."));
  CHECK(error.message() == "segments[0].blocks[0]: unknown block state 'weird' at byte 134");
}

TEST_CASE("a trace entry that is not a dict is an error naming the entry", "[sim][snapshot]") {
  // pickle.dumps({'segments': [], 'device_traces': [[1]]}, protocol=4)
  const InputError error = error_of(bytes_of(
      "\x80\x04\x95*\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94\x8c\x0d" "device_traces\x94"
      "]\x94]\x94K\x01" "aau."));
  CHECK(error.message() == "device_traces[0][0]: expected a dict, not int at byte 47");
  CHECK(error.where().event == 0);
}

TEST_CASE("a pickle whose top level is not a dict is an error", "[sim][snapshot]") {
  // pickle.dumps([1], protocol=4)
  const InputError error = error_of(bytes_of(
      "\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00]\x94K\x01" "a."));
  CHECK(error.message() ==
        "a snapshot pickle must hold a dict with 'segments' and 'device_traces', not list at byte 11");
}

TEST_CASE("a truncated snapshot pickle is an error with the byte offset", "[sim][snapshot]") {
  const InputError error = error_of(kModernSnapshot.substr(0, 400));
  CHECK(error.message() == "truncated pickle: the data ends before the STOP opcode at byte 400");
}

TEST_CASE("gzip is detected by its magic bytes, not by the file name", "[sim][snapshot]") {
  const std::string gz = file_contents(kDataDir + "hfblog_linear_10k_50k_grad.pickle.gz");
  const TempFile renamed("gzip_named.txt", gz);
  CHECK(oomcast::sim::read_snapshot(renamed.path()).segments.size() == 7);
  const TempFile plain("plain.pickle.gz", kOldSnapshot);
  CHECK(oomcast::sim::read_snapshot(plain.path()).segments.size() == 2);
}

TEST_CASE("a truncated gzip file is an error naming the file and where it ends", "[sim][snapshot]") {
  const std::string gz = file_contents(kDataDir + "hfblog_linear_10k_50k_grad.pickle.gz");
  const TempFile cut("cut.pickle.gz", gz.substr(0, 2000));
  const InputError error = read_error_of(cut.path());
  CHECK(error.where().file == cut.path());
  CHECK(error.message() ==
        "truncated gzip data: the file ends at byte 2000 before the end of the compressed stream");
}

TEST_CASE("gzip data that inflates beyond its cap is refused before it is held, naming the cap",
          "[sim][snapshot][hostile]") {
  const std::string gz = file_contents(kDataDir + "hfblog_linear_10k_50k_grad.pickle.gz");
  const auto* data = reinterpret_cast<const uint8_t*>(gz.data());
  const size_t whole = oomcast::sim::gunzip("g.pickle.gz", data, gz.size()).size();
  try {
    oomcast::sim::gunzip("g.pickle.gz", data, gz.size(), whole - 1);
    FAIL("no error");
  } catch (const InputError& error) {
    CHECK_THAT(error.message(), Catch::StartsWith("decompresses to more than " + std::to_string(whole - 1) + " bytes"));
  }
  CHECK(oomcast::sim::gunzip("g.pickle.gz", data, gz.size(), whole).size() == whole);
}

TEST_CASE("a corrupt gzip file is an error with the compressed byte offset", "[sim][snapshot]") {
  std::string gz = file_contents(kDataDir + "hfblog_linear_10k_50k_grad.pickle.gz");
  for (size_t i = 100; i < 200; ++i) gz[i] = static_cast<char>(0xff);
  const TempFile corrupt("corrupt.pickle.gz", gz);
  const std::string message = read_error_of(corrupt.path()).message();
  CHECK(message.starts_with("corrupt gzip data ("));
  CHECK(message.find(") at byte ") != std::string::npos);
}

TEST_CASE("a pickle error inside a gzip file says the offset is in the decompressed data", "[sim][snapshot]") {
  // gzip.compress(pickle.dumps([1], protocol=4)[:14], mtime=0): a valid gzip of a cut pickle.
  const TempFile cut("cut_inside.pickle.gz",
                     bytes_of("\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\x03k`\x99\xca\xc6\x00\x01\xb1S\xbc\x01"
                              "\x19\xa9\xff\x1e\x0e\x00\x00\x00"));
  CHECK(read_error_of(cut.path()).message() ==
        "truncated pickle: the data (14 bytes) ends inside the BININT1 opcode at byte 13 of the "
        "decompressed data");
}

TEST_CASE("a missing file is an error naming it", "[sim][snapshot]") {
  const InputError error = read_error_of(kDataDir + "no_such_file.pickle");
  CHECK(error.where().file == kDataDir + "no_such_file.pickle");
  CHECK(error.message() == "cannot open file: No such file or directory");
}

TEST_CASE("inputs saved from fuzzing give their InputError or decode, and never crash", "[sim][snapshot][fuzz]") {
  // Mutants libFuzzer found on the way to new code paths (fuzz/README.md); none crashed.
  struct Saved {
    const char* file;
    const char* message;  // nullptr: the input decodes
  };
  const Saved saved[] = {
      // A dict pushed on top of a leftover 'frames' string is skipped, even at the top level.
      {"snapshot_top_level_skipped.pickle",
       "a snapshot pickle must hold a dict with 'segments' and 'device_traces', not skipped value "
       "at byte 630"},
      // A memo fetch of a skipped stack trace where a block state belongs.
      {"snapshot_block_state_skipped.pickle",
       "segments[3].blocks[0]: 'state' must be a str, not skipped value at byte 7971"},
      {"snapshot_gzip_trailing_data.pickle.gz", "trailing data after the gzip stream at byte 252"},
      {"snapshot_gzip_distance_too_far.pickle.gz",
       "corrupt gzip data (invalid distance too far back) at byte 101"},
      {"snapshot_memo_index_out_of_range.pickle", "memo index 134236677 out of range at byte 32"},
      // {'segments': [], 2097152: <a 14-byte str that swallowed the rest>}
      {"snapshot_mutated_but_valid.pickle", nullptr},
  };
  for (const Saved& input : saved) {
    INFO(input.file);
    const std::string path = kDataDir + "fuzz/" + input.file;
    if (input.message) {
      CHECK(read_error_of(path).message() == input.message);
    } else {
      CHECK(oomcast::sim::read_snapshot(path).segments.empty());
    }
  }
}

TEST_CASE("snapshot paths are recognised by their extension", "[sim][snapshot]") {
  CHECK(oomcast::sim::looks_like_snapshot_path("run/snap.pickle"));
  CHECK(oomcast::sim::looks_like_snapshot_path("snap.pickle.gz"));
  CHECK(oomcast::sim::looks_like_snapshot_path("snap.pkl"));
  CHECK(oomcast::sim::looks_like_snapshot_path("snap.pkl.gz"));
  CHECK_FALSE(oomcast::sim::looks_like_snapshot_path("trace.txt"));
  CHECK_FALSE(oomcast::sim::looks_like_snapshot_path("trace.gz"));
  CHECK_FALSE(oomcast::sim::looks_like_snapshot_path("pickle"));
}
