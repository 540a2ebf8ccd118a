// The doctor for a run that already failed: a real snapshot in (an OOM observer's dump, or a
// recording of healthy steps and the device it should fit), the failing allocation, the
// timeline before it in iterations and phases, the OOM patterns the recording shows, and the
// settings that need no code change re-simulated on the same recording: which would have
// avoided the OOM and by how much. Code changes it cannot re-simulate are named at their call
// sites with the bytes the recording says they hold.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/html_report.h"
#include "advisor/snapshot_analysis.h"
#include "advisor/snapshot_phases.h"
#include "sim/device_model.h"
#include "sim/snapshot.h"
#include "sim/snapshot_replay.h"

namespace oomcast::advisor {

struct DoctorOptions {
  int device_index = 0;
  // The device the job ran on (or should run on). Without one, a recorded `oom` entry sets
  // the limit (reserved at the failure + the free bytes it recorded); with neither, no limit.
  std::optional<sim::DeviceModel> device;
  bool simulate_fixes = true;
};

// Where the run failed, or would fail on the given device.
struct DoctorFailure {
  bool recorded = false;            // the snapshot holds an `oom` entry
  size_t after_event = 0;           // the failing request comes after this trace event
  int64_t entry = -1;               // the `oom` entry (recorded) or the failing alloc's entry
  uint64_t request_bytes = 0;       // rounded request (the oom entry's size) or the alloc's size
  uint64_t device_free_bytes = 0;   // recorded: what cudaMemGetInfo said
  uint64_t allocated_bytes = 0;     // right before the request
  uint64_t reserved_bytes = 0;
  uint64_t inactive_split_bytes = 0;
  StepPhase phase = StepPhase::Unknown;
  int iteration = 0;
  CallSite site;
};

// A pattern the recording shows, with the call sites that show it and what to change there.
struct DoctorPattern {
  std::string name;       // "first batch", "leak", "validation with autograd", "optimizer state", "fragmentation", ...
  std::string evidence;
  std::vector<SiteBytes> sites;
  std::string change;     // what to change (a setting, or code at the sites)
  uint64_t bytes = 0;     // the memory involved, measured from the recording
  bool causes_failure = false;  // it holds memory at the failure (or the peak)
};

// A change re-simulated on the recording.
struct FixTrial {
  std::string name;            // "expandable_segments:True", "empty_cache() before iter0/optimizer step", ...
  std::string alloc_conf;      // the PYTORCH_CUDA_ALLOC_CONF it replays with ("" for the recorded one)
  uint64_t usable_bytes = 0;   // the device the trial replays on (0: unlimited)
  bool fits = false;           // no allocation failed, the failing request included
  size_t ooms = 0;
  uint64_t peak_reserved_bytes = 0;   // in the bounded replay
  uint64_t needed_bytes = 0;          // peak reserved without a limit: what it needs
  int64_t headroom_bytes = 0;         // usable - peak reserved (fits), or usable - needed (negative)
};

struct DoctorReport {
  std::string name;
  int device_index = 0;
  std::string recorded_alloc_conf;
  bool reproduced = false;             // the replay made the recorded segment decisions
  bool has_frames = false;
  uint64_t usable_bytes = 0;           // the limit the verdict is about (0: none known)
  uint64_t initial_reserved_bytes = 0; // a window that starts mid-run: reserved at its start
  std::optional<uint64_t> device_total_bytes;
  std::optional<uint64_t> outside_allocator_bytes;  // total - usable, when both are known
  std::optional<DoctorFailure> failure;
  uint64_t peak_allocated_bytes = 0;   // of the recording (unlimited replay)
  uint64_t peak_reserved_bytes = 0;
  size_t peak_event = 0;
  StepPhase peak_phase = StepPhase::Unknown;
  int peak_iteration = 0;
  CallSite peak_site;
  RecordingTimeline timeline;
  std::vector<DoctorPattern> patterns;
  std::vector<FixTrial> fixes;         // the recorded settings first (does the replay fail where the run did?)
  std::vector<std::string> not_simulated;  // changes that could not be replayed, and why
  SnapshotAnalysis analysis;           // live bytes at the peak by call site
};

// Reads nothing: `snapshot` and `frames` come from read_snapshot / read_snapshot_frames.
DoctorReport diagnose_snapshot(const std::string& name, const sim::Snapshot& snapshot,
                               const SnapshotFrameTable& frames, const DoctorOptions& options);

// One re-simulation: the recording replayed under `config` on `device` (none: unlimited),
// with the failing request (`request` bytes on `stream`) retried after event `request_after`
// and torch.cuda.empty_cache() after event `empty_cache_after` (SIZE_MAX: neither).
struct FixReplay {
  // The recording's trace when its window starts on an empty allocator: replayed as a plain
  // trace, so a setting that rounds blocks differently (roundup_power2_divisions) can be
  // tried. A window that starts mid-run is replayed from its rebuilt state (null here).
  const sim::Trace* trace_from_empty = nullptr;
  sim::AllocatorConfig config;
  std::optional<sim::DeviceModel> device;
  size_t request_after = SIZE_MAX;
  uint64_t request = 0;
  uint64_t stream = 0;
  size_t empty_cache_after = SIZE_MAX;
};

// Replays it; fills fits, ooms, peak_reserved_bytes (and usable_bytes from the device).
// Throws InputError when a window that starts mid-run cannot be rebuilt under the setting.
FixTrial replay_fix(const std::string& name, const sim::Snapshot& snapshot, int device_index, const FixReplay& setup);

// `recorded` with one PYTORCH_CUDA_ALLOC_CONF setting ("expandable_segments:True") applied on
// top (parse_alloc_conf alone would reset the recorded max_split_size and roundup table).
sim::AllocatorConfig with_setting(const sim::AllocatorConfig& recorded, const std::string& setting);

// The patterns of a diagnosed recording (snapshot_doctor_patterns.cc).
std::vector<DoctorPattern> find_patterns(const DoctorReport& report, const sim::SnapshotReplayReport& replay,
                                         const SnapshotFrameTable& frames, const std::vector<uint64_t>& allocated_after);

std::string render_doctor_text(const DoctorReport& report);
nlohmann::json doctor_json(const DoctorReport& report);
// The replay page's pictures (timeline with iterations and phases shaded, segments at the
// peak, call sites) plus the doctor's tables.
HtmlReport doctor_html_report(const DoctorReport& report, const sim::Snapshot& snapshot, const SnapshotFrameTable& frames);

}  // namespace oomcast::advisor
