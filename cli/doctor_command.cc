// `oomcast doctor SNAPSHOT.pickle[.gz]`: the failing allocation of a real snapshot, its
// iterations and phases, the OOM patterns it shows, and the settings re-simulated on it.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "advisor/html_report.h"
#include "advisor/snapshot_doctor.h"
#include "base/input_error.h"
#include "cli/commands.h"
#include "cli/device_flags.h"
#include "cli/output_files.h"
#include "sim/snapshot.h"

namespace oomcast::cli {
namespace {

struct DoctorFlags {
  std::string file;
  DeviceFlags device;
  int device_index = 0;
  bool json = false;
  bool no_fixes = false;
  std::string html;
};

int run_doctor(const DoctorFlags& flags) {
  if (!sim::looks_like_snapshot_path(flags.file))
    throw InputError({flags.file, 0, 0, -1}, "doctor",
                     "doctor reads a torch.cuda.memory._dump_snapshot() pickle (.pickle or .pickle.gz); for an OOM "
                     "message use `oomcast explain`");
  advisor::DoctorOptions options;
  options.device_index = flags.device_index;
  options.simulate_fixes = !flags.no_fixes;
  options.device = advisor::replay_device(flags.device, sim::kDefaultTorchVersion);
  refuse_clobbering_outputs({{"--html", flags.html}}, {flags.file});
  // One pass over the file: the frames for the call sites come with the trace.
  sim::Snapshot snapshot = sim::read_snapshot(flags.file, {flags.device_index});
  advisor::SnapshotFrameTable frames = advisor::frame_table_of(std::move(snapshot.frames));
  advisor::DoctorReport report = advisor::diagnose_snapshot(flags.file, snapshot, frames, options);
  if (!flags.html.empty()) advisor::write_html_report(advisor::doctor_html_report(report, snapshot, frames), flags.html);
  std::string out = flags.json ? advisor::doctor_json(report).dump(2) + "\n" : advisor::render_doctor_text(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return report.failure ? 1 : 0;
}

}  // namespace

void add_doctor_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<DoctorFlags>();
  CLI::App* command = app.add_subcommand(
      "doctor", "Diagnose a real snapshot: where it ran out, which OOM pattern, which setting would have avoided it");
  command->add_option("snapshot", flags->file, "torch.cuda.memory._dump_snapshot() pickle (.pickle / .pickle.gz)")
      ->required();
  add_device_flags(command, &flags->device, /*with_fraction=*/false);
  command->add_option("--device-index", flags->device_index, "which device of the snapshot")->capture_default_str();
  command->add_flag("--no-fixes", flags->no_fixes, "skip the re-simulations (one replay instead of about twenty)");
  command->add_flag("--json", flags->json, "print JSON (keys in docs/usage.md)");
  command->add_option("--html", flags->html, "also write a self-contained HTML report");
  command->callback([flags, &exit_code] { exit_code = run_doctor(*flags); });
}

}  // namespace oomcast::cli
