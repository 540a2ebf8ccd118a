// `oomcast diff A.pickle B.pickle [--top N] [--json]`: replays two real snapshots and prints
// what they allocate differently, by call site, and where their peaks differ.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "advisor/snapshot_diff.h"
#include "base/input_error.h"
#include "cli/commands.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"

namespace oomcast::cli {
namespace {

struct DiffFlags {
  std::string a, b;
  size_t top = 20;
  int device_index = 0;
  bool json = false;
};

advisor::SnapshotAnalysis analyze(const std::string& path, int device_index) {
  if (!sim::looks_like_snapshot_path(path))
    throw InputError({path, 0, 0, -1}, "diff", "diff compares snapshot pickles (.pickle or .pickle.gz)");
  sim::Snapshot snapshot = sim::read_snapshot(path, {device_index});  // frames in the same pass
  sim::AllocatorConfig config = sim::snapshot_allocator_config(snapshot);
  sim::SnapshotReplayReport report = sim::replay_snapshot(snapshot, config, path, device_index);
  advisor::SnapshotFrameTable frames = advisor::frame_table_of(std::move(snapshot.frames));
  return advisor::analyze_snapshot(path, snapshot, config, device_index, report, frames);
}

int run_diff(const DiffFlags& flags) {
  advisor::SnapshotDiff diff =
      advisor::diff_snapshots(analyze(flags.a, flags.device_index), analyze(flags.b, flags.device_index));
  std::string text = flags.json ? advisor::render_diff_json(diff) : advisor::render_diff_text(diff, flags.top);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void add_diff_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<DiffFlags>();
  CLI::App* command = app.add_subcommand(
      "diff", "compare two torch.cuda.memory._snapshot() pickles: allocations by call site, and the peaks");
  command->add_option("a", flags->a, "first snapshot (.pickle / .pickle.gz)")->required();
  command->add_option("b", flags->b, "second snapshot")->required();
  command->add_option("--top", flags->top, "call sites to print")->capture_default_str();
  command->add_option("--device-index", flags->device_index, "which device of the snapshots")->capture_default_str();
  command->add_flag("--json", flags->json, "print JSON");
  command->callback([flags, &exit_code] { exit_code = run_diff(*flags); });
}

}  // namespace oomcast::cli
