// `oomcast replay FILE`: replays a trace or a real PyTorch snapshot through the simulator and
// prints peaks, fragmentation, segments, the OOM message, and for snapshots whether the
// recorded segment decisions were reproduced.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "advisor/html_report_replay.h"
#include "advisor/replay_json.h"
#include "advisor/snapshot_analysis.h"
#include "base/input_error.h"
#include "cli/output_files.h"
#include "cli/commands.h"
#include "cli/device_flags.h"
#include "cli/environment.h"
#include "sim/allocator_config.h"
#include "sim/newest_torch_release.h"
#include "sim/allocator_warnings.h"
#include "sim/replay.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"
#include "sim/trace_io.h"

namespace oomcast::cli {
namespace {

struct ReplayFlags {
  std::string file;
  std::string alloc_conf;
  bool alloc_conf_given = false;
  bool json = false;
  bool legacy_message = false;
  bool check_invariants = false;
  DeviceFlags device;
  int device_index = 0;
  std::string torch_version = "2.6";
  std::string html;
};

// "2.6" -> 206, "2.11" -> 211 (sim::TorchVersion).
int parse_torch_version(const std::string& text) {
  unsigned major = 0, minor = 0;
  char trailing = 0;
  if (std::sscanf(text.c_str(), "%u.%u%c", &major, &minor, &trailing) != 2 || major != 2 || minor > 99)
    throw InputError({}, "--torch-version", "--torch-version: '" + text + "' is not a PyTorch 2.x release such as 2.6");
  if (static_cast<int>(100 * major + minor) > sim::kNewestTorchVersion) {
    throw InputError({}, "--torch-version", "--torch-version: '" + text + "' is newer than the newest release oomcast "
                                            "models (2." + std::to_string(sim::kNewestTorchVersion % 100) + ")");
  }
  return static_cast<int>(100 * major + minor);
}

std::string mib(uint64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / 1048576.0); }

// A trace may hold millions of marks: as a JSON tree they would cost gigabytes, so the document
// is printed around them and each mark is written on its own.
constexpr const char* kMarksPlaceholder = "@oomcast-marks@";

void print_replay_json(const nlohmann::json& out, const std::vector<sim::MarkReport>& marks) {
  const std::string text = out.dump(2);
  const std::string placeholder = nlohmann::json(kMarksPlaceholder).dump();
  const size_t at = text.find(placeholder);
  std::fwrite(text.data(), 1, at, stdout);
  std::fputs(marks.empty() ? "[]" : "[", stdout);
  for (size_t i = 0; i < marks.size(); ++i) {
    const nlohmann::json row = advisor::mark_json(marks[i]);
    fmt::print("{}\n    {}", i == 0 ? "" : ",", row.dump());
  }
  if (!marks.empty()) std::fputs("\n  ]", stdout);
  std::fwrite(text.data() + at + placeholder.size(), 1, text.size() - at - placeholder.size(), stdout);
  std::fputs("\n", stdout);
}

nlohmann::json replay_json(const sim::ReplayResult& result) {
  nlohmann::json out = advisor::replay_result_json(result);
  out["marks"] = kMarksPlaceholder;  // streamed by print_replay_json, one mark at a time
  return out;
}

void print_replay_text(const std::string& file, const sim::ReplayResult& result) {
  fmt::print("replay of {}: {} events\n", file, result.events_replayed);
  fmt::print("  peak allocated   {:>16} B  ({}) at event {}\n", result.peak_allocated_bytes,
             mib(result.peak_allocated_bytes), result.peak_allocated_event);
  fmt::print("  peak reserved    {:>16} B  ({}) at event {}\n", result.peak_reserved_bytes,
             mib(result.peak_reserved_bytes), result.peak_reserved_event);
  fmt::print("  at the allocated peak: reserved - allocated = {}, inactive split = {}\n",
             mib(result.reserved_at_peak_allocated - result.peak_allocated_bytes),
             mib(result.inactive_split_at_peak_allocated));
  const auto& stats = result.final_stats;
  fmt::print("  segments: {} cudaMalloc, {} cudaFree, {} held at the end ({} small, {} large)\n",
             result.segment_allocs, result.segment_frees, stats.segment.all().current,
             stats.segment.pool(true).current, stats.segment.pool(false).current);
  if (!result.marks.empty()) {
    fmt::print("  {:<28} {:>14} {:>14} {:>14}\n", "mark", "allocated MiB", "reserved MiB", "peak MiB");
    for (const auto& mark : result.marks)
      fmt::print("  {:<28} {:>14.2f} {:>14.2f} {:>14.2f}\n", mark.label, mark.allocated_bytes / 1048576.0,
                 mark.reserved_bytes / 1048576.0, mark.peak_allocated_bytes / 1048576.0);
  }
  if (result.oom) {
    fmt::print("  OOM at event {}:\n    {}\n", result.oom->event_index, result.oom->message);
  } else {
    fmt::print("  no OOM\n");
  }
}

void check_device_index(const sim::Snapshot& snapshot, const ReplayFlags& flags) {
  std::vector<int> devices = sim::snapshot_devices(snapshot);
  if (std::find(devices.begin(), devices.end(), flags.device_index) != devices.end()) return;
  std::string list;
  for (int index : devices) list += (list.empty() ? "" : ", ") + std::to_string(index);
  throw InputError({flags.file}, "--device-index",
                   "--device-index " + std::to_string(flags.device_index) + ": the snapshot has no device " +
                       std::to_string(flags.device_index) +
                       (devices.empty() ? std::string("; it records no device at all") : "; its devices: " + list));
}

int run_replay(const ReplayFlags& flags) {
  refuse_clobbering_outputs({{"--html", flags.html}}, {flags.file});
  sim::AllocatorConfig base;
  base.torch_version = parse_torch_version(flags.torch_version);
  const std::optional<sim::DeviceModel> given_device = advisor::replay_device(flags.device, base.torch_version);
  const sim::DeviceModel device = given_device.value_or(sim::DeviceModel::unlimited());
  if (sim::looks_like_snapshot_path(flags.file)) {
    // One pass over the file: the frames for the call-site analysis come with the trace.
    sim::Snapshot snapshot = sim::read_snapshot(flags.file, {flags.device_index});
    check_device_index(snapshot, flags);
    sim::AllocatorConfig config = flags.alloc_conf_given ? sim::parse_alloc_conf(flags.alloc_conf, base)
                                                         : sim::snapshot_allocator_config(snapshot);
    if (!flags.alloc_conf_given && environment_alloc_conf()) {
      std::fprintf(stderr, "note: PYTORCH_CUDA_ALLOC_CONF in the environment is not used for a snapshot: it replays "
                           "under its recorded settings (give --alloc-conf to change them)\n");
    }
    config.torch_version = base.torch_version;
    for (const std::string& warning : sim::allocator_config_warnings(config, false))
      fmt::print(stderr, "warning: {}\n", warning);
    sim::SnapshotReplayReport report =
        sim::replay_snapshot(snapshot, config, flags.file, flags.device_index, flags.check_invariants, {}, device);
    const bool bounded = given_device.has_value();
    // A window that starts mid-run already holds its rebuilt segments: on a smaller device the
    // job would have died before the window began.
    const bool starts_over = bounded && report.initial_reserved_bytes > device.usable_bytes();
    bool reproduced = !report.first_mismatch;
    advisor::SnapshotFrameTable frames = advisor::frame_table_of(std::move(snapshot.frames));
    // The call-site tables describe the recorded run: on a smaller device the simulated run
    // skips what failed, so its peak is not the one the recorded live bytes add up to.
    std::optional<sim::SnapshotReplayReport> recorded_run;
    if (bounded) recorded_run = sim::replay_snapshot(snapshot, config, flags.file, flags.device_index);
    advisor::SnapshotAnalysis analysis = advisor::analyze_snapshot(flags.file, snapshot, config, flags.device_index,
                                                                   recorded_run ? *recorded_run : report, frames);
    if (!flags.html.empty()) {
      advisor::HtmlReport page = advisor::snapshot_html_report(
          flags.file, snapshot, config, flags.device_index, report,
          [&frames](int64_t entry) { return advisor::call_site_text(advisor::call_site_of(frames, entry)); });
      advisor::add_snapshot_analysis(page, analysis, 20);
      write_html_report(page, flags.html);
    }
    if (flags.json) {
      nlohmann::json out = advisor::snapshot_replay_json(report, analysis, device, bounded, starts_over);
      out["marks"] = kMarksPlaceholder;
      print_replay_json(out, report.replay.marks);
    } else {
      print_replay_text(flags.file, report.replay);
      fmt::print("  device {} replayed; the file holds device(s) {}\n", flags.device_index,
                 fmt::join(report.devices_in_file, ", "));
      if (report.starts_empty) {
        fmt::print("  snapshot window starts on an empty allocator\n");
      } else {
        fmt::print("  snapshot window starts mid-run: rebuilt {} segments ({}), {} allocated blocks\n",
                   report.initial_segments, mib(report.initial_reserved_bytes), report.initial_allocated_blocks);
      }
      fmt::print("  recorded segment decisions: {} of {} reproduced in order, size and address -> {}\n",
                 report.segment_decisions_matched, report.recorded_segment_decisions,
                 reproduced ? "REPRODUCED" : "DIVERGED");
      if (report.first_mismatch)
        fmt::print("    first divergence: decision {} (snapshot event {}): recorded {}, simulated {}\n",
                   report.first_mismatch->decision_index, report.first_mismatch->snapshot_event,
                   report.first_mismatch->recorded, report.first_mismatch->simulated);
      fmt::print("  block addresses: {} of {} allocations placed at the recorded address\n",
                 report.block_addresses_matched, report.block_addresses_checked);
      fmt::print("  recorded peak reserved {} B, simulated {} B ({})\n", report.recorded_peak_reserved_bytes,
                 report.replay.peak_reserved_bytes,
                 report.recorded_peak_reserved_bytes == report.replay.peak_reserved_bytes ? "equal" : "DIFFERENT");
      fmt::print("  recorded peak allocated {} B, simulated {} B ({})\n", report.recorded_peak_allocated_bytes,
                 report.replay.peak_allocated_bytes,
                 report.recorded_peak_allocated_bytes == report.replay.peak_allocated_bytes ? "equal" : "DIFFERENT");
      if (bounded)
        fmt::print("  call sites below: the recorded run (no device limit), peak allocated {}; shares of that peak\n",
                   mib(analysis.peak_allocated_bytes));
      std::string text = advisor::render_analysis_text(analysis, 10);
      std::fwrite(text.data(), 1, text.size(), stdout);
      if (bounded) {
        fmt::print("  on a device with {} usable ({} total, {} outside the allocator): {}\n", mib(device.usable_bytes()),
                   mib(device.total_bytes), mib(device.context_bytes + device.other_process_bytes),
                   starts_over ? "the window starts with " + mib(report.initial_reserved_bytes) +
                                     " reserved, more than fits: the job would have hit OOM before it"
                   : report.replay.oom ? fmt::format("OOM at event {} ({} allocations failed)",
                                                     report.replay.oom->event_index, report.replay.num_ooms)
                                       : std::string("fits"));
      }
    }
    return report.replay.oom || starts_over ? 1 : 0;
  }

  sim::Trace trace = sim::read_trace_file(flags.file);
  std::string conf = flags.alloc_conf;
  if (!flags.alloc_conf_given) {
    if (std::optional<std::string> environment = environment_alloc_conf()) {
      conf = *environment;
      std::fprintf(stderr, "note: using PYTORCH_CUDA_ALLOC_CONF=%s from the environment (no --alloc-conf)\n",
                   conf.c_str());
    }
  }
  sim::AllocatorConfig config = sim::parse_alloc_conf(conf, base);
  for (const std::string& warning : sim::allocator_config_warnings(config, device.memory_fraction > 0.0))
    fmt::print(stderr, "warning: {}\n", warning);
  sim::ReplayOptions options;
  options.check_invariants = flags.check_invariants;
  options.oom_style = flags.legacy_message ? sim::OomMessageStyle::Legacy : sim::OomMessageStyle::Current;
  sim::ReplayResult result = sim::replay(trace, config, device, options);
  if (!flags.html.empty())
    write_html_report(advisor::trace_html_report(flags.file, trace, config, device, options, result), flags.html);
  if (flags.json) {
    print_replay_json(replay_json(result), result.marks);
  } else {
    print_replay_text(flags.file, result);
  }
  return result.oom ? 1 : 0;
}

}  // namespace

void add_replay_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ReplayFlags>();
  CLI::App* command = app.add_subcommand(
      "replay", "Replay a trace (docs/trace-format.md) or a torch.cuda.memory._snapshot() pickle through the simulator");
  command->add_option("file", flags->file, "trace file, or snapshot .pickle / .pickle.gz")->required();
  command->add_option("--alloc-conf", flags->alloc_conf,
                      "PYTORCH_CUDA_ALLOC_CONF to simulate (snapshots default to their recorded settings)")
      ->each([flags](const std::string&) { flags->alloc_conf_given = true; });
  command->add_flag("--json", flags->json, "print JSON (keys in docs/usage.md) instead of text");
  add_device_flags(command, &flags->device, /*with_fraction=*/true);
  command->add_option("--device-index", flags->device_index, "which device of a snapshot to replay")->capture_default_str();
  command->add_option("--torch-version", flags->torch_version, "PyTorch release to mimic where releases differ")
      ->capture_default_str();
  command->add_flag("--legacy-oom-message", flags->legacy_message, "print the OOM text of PyTorch 1.10-2.0");
  command->add_flag("--check-invariants", flags->check_invariants, "verify the allocator's invariants after each event");
  command->add_option("--html", flags->html,
                      "also write a self-contained HTML report: timeline, segment map at the peak");
  command->callback([flags, &exit_code] { exit_code = run_replay(*flags); });
}

}  // namespace oomcast::cli
