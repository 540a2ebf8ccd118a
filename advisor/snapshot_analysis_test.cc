// Tests of the call-site and category rules and of the site pairing of diff, on frame tables
// written by hand (the fixtures' call sites are checked by the CLI tests in tests/snapshot_export/),
// and of the live blocks at a peak that the analysis takes from its one replay.
#include "advisor/snapshot_analysis.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "advisor/snapshot_diff.h"
#include "advisor/timeline_recorder.h"
#include "sim/snapshot_replay.h"

namespace oomcast::advisor {
namespace {

SnapshotFrameTable table_of(const std::vector<std::vector<CallFrame>>& entries) {
  SnapshotFrameTable table;
  for (const auto& frames : entries) {
    std::vector<uint32_t> ids;
    for (const CallFrame& frame : frames) {
      ids.push_back(static_cast<uint32_t>(table.frames.size()));
      table.frames.push_back(frame);
    }
    table.entry_frames.push_back(ids);
  }
  return table;
}

const CallFrame kUnwind{"torch::unwind::unwind()", "??", 0};
const CallFrame kLinear{"forward", "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", 117};
const CallFrame kModule{"_call_impl", "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", 1562};
const CallFrame kUser{"<module>", "/home/me/work/profile.py", 11};
const CallFrame kEngine{"torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", "??", 0};
const CallFrame kDivNode{"torch::autograd::generated::DivBackward0::apply(std::vector<at::Tensor>&&)", "??", 0};
const CallFrame kDivOp{"at::_ops::div_Tensor::call(at::Tensor const&, at::Tensor const&)", "??", 0};
const CallFrame kStep{"step", "/home/me/work/optimizers.py", 100};

TEST_CASE("the call site is the user's innermost Python frame, via torch's innermost one", "[advisor][analysis]") {
  SnapshotFrameTable table = table_of({{kUnwind, kLinear, kModule, kUser}});
  CallSite where = call_site_of(table, 0);
  CHECK(where.site == "work/profile.py:11 <module>");
  CHECK(where.via == "nn/modules/linear.py:117 forward");
}

TEST_CASE("an allocation of the autograd engine is named by its node, else by its aten op", "[advisor][analysis]") {
  SnapshotFrameTable table = table_of({{kUnwind, kDivOp, kDivNode, kEngine}, {kUnwind, kDivOp}, {}});
  CHECK(call_site_of(table, 0).site == "DivBackward0 (autograd backward, no Python frame)");
  CHECK(call_site_of(table, 1).site == "aten::div_Tensor (no Python frame)");
  CHECK(call_site_of(table, 2).site == "(no frames)");
  CHECK(call_site_of(table, 7).site == "(no frames)");  // an entry past the table
}

TEST_CASE("categories come from the first rule the frames match", "[advisor][analysis]") {
  CallFrame init{"__init__", "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", 99};
  SnapshotFrameTable table = table_of({{kUnwind, kStep, kUser}, {kDivNode, kEngine}, {init, kUser},
                                       {kLinear, kModule, kUser}, {kUser}, {}});
  CHECK(std::string(frame_category(table, 0)) == "optimizer step");
  CHECK(std::string(frame_category(table, 1)) == "backward");
  CHECK(std::string(frame_category(table, 2)) == "model setup");
  CHECK(std::string(frame_category(table, 3)) == "forward");
  CHECK(std::string(frame_category(table, 4)) == "other");
  CHECK(std::string(frame_category(table, 5)) == "unknown (no frames)");
}

SnapshotAnalysis run_with(std::vector<SiteBytes> live) {
  SnapshotAnalysis analysis;
  analysis.live_at_peak = live;
  analysis.allocated_in_window = live;
  for (const SiteBytes& row : live) analysis.peak_allocated_bytes += row.bytes;
  return analysis;
}

TEST_CASE("diff pairs a site that moved to another line and keeps sites of both runs apart", "[advisor][analysis]") {
  SnapshotAnalysis a = run_with({{{"a.py:10 <module>", ""}, 400, 1}, {{"a.py:11 <module>", "linear.py:117 forward"}, 900, 1},
                                 {{"DivBackward0 (autograd backward, no Python frame)", ""}, 50, 1}});
  SnapshotAnalysis b = run_with({{{"b.py:12 <module>", ""}, 200, 1}, {{"b.py:13 <module>", "linear.py:117 forward"}, 900, 1}});
  SnapshotDiff diff = diff_snapshots(a, b);
  REQUIRE(diff.sites.size() == 3);
  CHECK(diff.sites[0].where.site == "a.py:10 <module>");
  CHECK(diff.sites[0].site_b == "b.py:12 <module>");
  CHECK(diff.sites[0].live_delta() == -200);
  CHECK(diff.sites[1].where.site == "DivBackward0 (autograd backward, no Python frame)");
  CHECK(diff.sites[1].live_b == 0);
  CHECK(diff.sites[2].site_b == "b.py:13 <module>");
  CHECK(diff.sites[2].live_delta() == 0);
}

TEST_CASE("diff does not pair when a function has several candidate sites", "[advisor][analysis]") {
  SnapshotAnalysis a = run_with({{{"a.py:10 <module>", ""}, 400, 1}, {{"a.py:20 <module>", ""}, 100, 1}});
  SnapshotAnalysis b = run_with({{{"b.py:12 <module>", ""}, 200, 1}});
  SnapshotDiff diff = diff_snapshots(a, b);
  CHECK(diff.sites.size() == 3);
  for (const SiteDiff& site : diff.sites) CHECK(site.site_b.empty());
}

// The blocks allocated at an event, as the segment map of a second replay shows them:
// (alloc event or SIZE_MAX, size), sorted.
std::vector<std::pair<size_t, uint64_t>> blocks_in_segment_map(const std::string& path, const sim::Snapshot& snapshot,
                                                               const sim::SnapshotReplayReport& report, size_t event) {
  TimelineRecorder recorder(report.trace.events.size(), 1, event);
  sim::replay_snapshot(snapshot, sim::snapshot_allocator_config(snapshot), path, 0, false,
                       [&](size_t index, sim::Replayer& replayer) { recorder.after_event(index, report.trace, replayer); });
  std::vector<std::pair<size_t, uint64_t>> blocks;
  for (const SegmentView& segment : recorder.finish(0).segments)
    for (const SegmentPiece& piece : segment.pieces)
      if (piece.state == SegmentPieceState::Allocated) blocks.emplace_back(piece.alloc_event, piece.size);
  std::sort(blocks.begin(), blocks.end());
  return blocks;
}

TEST_CASE("the blocks live at a real snapshot's peak, taken from the one replay, are those of its segment map there",
          "[advisor][analysis]") {
  for (const char* name : {"cs336_kk_2p7b_fp32_step_ctx128", "cs336_kk_2p7b_fp32_fwd_ctx128",
                           "cs336_silmont_naive_attn_b8_l4096_d16_fwdbwd", "cs336_silmont_small_fp32_nograd_fwd_ctx128",
                           "hfblog_linear_10k_50k_grad"}) {
    INFO(name);
    const std::string path = std::string(OOMCAST_SOURCE_DIR) + "/tests/data/" + name + ".pickle.gz";
    const sim::Snapshot snapshot = sim::read_snapshot(path);
    const sim::SnapshotReplayReport report = sim::replay_snapshot(snapshot, sim::snapshot_allocator_config(snapshot), path);
    for (size_t event : {report.replay.peak_allocated_event, report.trace.events.size() / 2}) {
      std::vector<std::pair<size_t, uint64_t>> live;
      for (const sim::LiveBlock& block : sim::live_blocks_after(report, event)) live.emplace_back(block.alloc_event, block.bytes);
      std::sort(live.begin(), live.end());
      CHECK_FALSE(live.empty());
      CHECK(live == blocks_in_segment_map(path, snapshot, report, event));
    }
  }
}

}  // namespace
}  // namespace oomcast::advisor
