// The doctor on snapshots built to show one pattern each (written by the simulator's snapshot
// export, with frames like a training script's), and on the real snapshots in tests/data.
// Each re-simulated fix is checked by replaying the recording under that setting again.
#include "advisor/snapshot_doctor.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/input_error.h"
#include "sim/snapshot_export.h"
#include "sim/snapshot_replay.h"

using namespace oomcast;
using namespace oomcast::advisor;

namespace {

constexpr uint64_t kMiB = 1ull << 20;

// The innermost frames of a training script's allocation in each phase.
std::vector<sim::SnapshotFrame> frames_for(const std::string& phase, int line) {
  const sim::SnapshotFrame script{"main", "/home/user/train.py", 200};
  if (phase == "setup")
    return {{"__init__", "/home/user/model.py", 10}, script};
  if (phase == "forward")
    return {{"forward", "/home/user/model.py", line}, {"train_step", "/home/user/train.py", 40}, script};
  if (phase == "kept")
    return {{"train_step", "/home/user/train.py", line}, script};
  if (phase == "backward")
    return {{"backward", "/usr/lib/python3/site-packages/torch/_tensor.py", 521}, {"train_step", "/home/user/train.py", 45}, script};
  if (phase == "optimizer")
    return {{"_single_tensor_adam", "/usr/lib/python3/site-packages/torch/optim/adam.py", line}, {"train_step", "/home/user/train.py", 47}, script};
  if (phase == "validation")
    return {{"forward", "/home/user/model.py", line}, {"validate", "/home/user/train.py", 80}, script};
  return {};
}

// A trace plus the phase of each of its alloc events, written as a snapshot.
class RecordingBuilder {
 public:
  void alloc(const std::string& id, uint64_t bytes, const std::string& phase, int line = 20) {
    trace_.alloc(id, bytes);
    phases_.resize(trace_.size());
    phases_.back() = {phase, line};
  }
  void free(const std::string& id) {
    trace_.free(id);
    phases_.resize(trace_.size());
  }
  // Written on a device of `total` bytes (0: unlimited): it stops at the first OOM and records it.
  std::string write(const std::string& name, uint64_t total = 0) {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("oomcast_doctor_" + name + ".pickle");
    sim::DeviceModel device = total ? sim::DeviceModel{} : sim::DeviceModel::unlimited();
    if (total) device.total_bytes = total;
    sim::Trace trace = trace_.take();
    auto phases = phases_;
    sim::export_snapshot(path.string(), trace, sim::AllocatorConfig{}, device,
                         [phases](size_t event, std::vector<sim::SnapshotFrame>& frames) {
                           if (event < phases.size()) frames = frames_for(phases[event].first, phases[event].second);
                         });
    return path.string();
  }

 private:
  sim::TraceBuilder trace_;
  std::vector<std::pair<std::string, int>> phases_;
};

DoctorReport diagnose(const std::string& path, std::optional<sim::DeviceModel> device = std::nullopt) {
  sim::Snapshot snapshot = sim::read_snapshot(path);
  SnapshotFrameTable frames = read_snapshot_frames(path, 0);
  DoctorOptions options;
  options.device = device;
  return diagnose_snapshot(path, snapshot, frames, options);
}

const DoctorPattern* find(const DoctorReport& report, const std::string& name) {
  for (const DoctorPattern& pattern : report.patterns)
    if (pattern.name == name) return &pattern;
  return nullptr;
}

const FixTrial* fix_named(const DoctorReport& report, const std::string& name) {
  for (const FixTrial& fix : report.fixes)
    if (fix.name == name) return &fix;
  return nullptr;
}

// One training iteration: three activations saved in forward, freed in backward, a gradient
// temporary, and the optimizer's state at the first step.
void training_iteration(RecordingBuilder& run, int iteration, bool keep_loss) {
  std::string i = std::to_string(iteration);
  for (int layer = 0; layer < 3; ++layer) run.alloc("act" + i + "." + std::to_string(layer), 8 * kMiB, "forward", 20 + layer);
  if (keep_loss) run.alloc("loss" + i, 4 * kMiB, "kept", 42);  // losses.append(loss)
  for (int layer = 2; layer >= 0; --layer) {
    run.alloc("grad_tmp" + i + "." + std::to_string(layer), 2 * kMiB, "backward");
    run.free("act" + i + "." + std::to_string(layer));
    run.free("grad_tmp" + i + "." + std::to_string(layer));
  }
  if (iteration == 0) {
    run.alloc("exp_avg", 16 * kMiB, "optimizer", 90);
    run.alloc("exp_avg_sq", 16 * kMiB, "optimizer", 91);
  }
  run.alloc("step_tmp" + i, 2 * kMiB, "optimizer", 120);
  run.free("step_tmp" + i);
}

std::string leaking_run(uint64_t total = 0) {
  RecordingBuilder run;
  run.alloc("weights", 16 * kMiB, "setup");
  for (int iteration = 0; iteration < 5; ++iteration) training_iteration(run, iteration, true);
  return run.write(total ? "leak_bounded" : "leak", total);
}

}  // namespace

TEST_CASE("the doctor splits a recording into iterations and phases from its frames", "[advisor][doctor]") {
  DoctorReport report = diagnose(leaking_run());
  CHECK(report.reproduced);
  CHECK(report.timeline.has_phases);
  REQUIRE(report.timeline.iterations.size() == 5);
  std::vector<StepPhase> phases;
  for (const PhaseRun& run : report.timeline.runs)
    if (run.iteration == 1) phases.push_back(run.phase);
  CHECK(phases == std::vector<StepPhase>{StepPhase::Forward, StepPhase::Backward, StepPhase::Optimizer});
}

TEST_CASE("a loss kept across 5 iterations is classified as a leak at its call site", "[advisor][doctor]") {
  DoctorReport report = diagnose(leaking_run());
  const DoctorPattern* leak = find(report, "leak");
  REQUIRE(leak);
  CHECK(leak->bytes == 4 * kMiB);
  REQUIRE_FALSE(leak->sites.empty());
  CHECK(leak->sites.front().where.site == "user/train.py:42 train_step");
  CHECK(leak->sites.front().bytes == 12 * kMiB);  // the losses of iterations 1-3 (the last one's may be in use)
  CHECK(report.failure == std::nullopt);
}

TEST_CASE("a loop without the kept loss is not called a leak", "[advisor][doctor]") {
  RecordingBuilder run;
  run.alloc("weights", 16 * kMiB, "setup");
  for (int iteration = 0; iteration < 5; ++iteration) training_iteration(run, iteration, false);
  DoctorReport report = diagnose(run.write("no_leak"));
  CHECK_FALSE(find(report, "leak"));
}

TEST_CASE("the optimizer state made at the first step is named with its call sites", "[advisor][doctor]") {
  DoctorReport report = diagnose(leaking_run());
  const DoctorPattern* state = find(report, "optimizer state");
  REQUIRE(state);
  CHECK(state->bytes == 32 * kMiB);
  REQUIRE(state->sites.size() == 2);
}

TEST_CASE("a leaking run on a smaller device fails after its first iteration, and a larger device is checked to fit",
          "[advisor][doctor]") {
  const std::string path = leaking_run();
  DoctorReport unlimited = diagnose(path);
  // A device just short of what the recording reserved at its peak (the last iteration).
  sim::DeviceModel device;
  device.total_bytes = unlimited.peak_reserved_bytes - kMiB;
  DoctorReport report = diagnose(path, device);
  REQUIRE(report.failure);
  CHECK_FALSE(report.failure->recorded);
  CHECK(report.failure->iteration >= 1);  // the first iteration fits
  const DoctorPattern* leak = find(report, "leak");
  REQUIRE(leak);
  CHECK(leak->causes_failure);
  REQUIRE_FALSE(report.fixes.empty());
  CHECK_FALSE(report.fixes.front().fits);  // the recorded settings fail where the device runs out
  const FixTrial& larger = report.fixes.back();
  CHECK(larger.name.starts_with("a device with"));
  CHECK(larger.fits);
}

TEST_CASE("validation without no_grad is classified, and with no_grad it is not", "[advisor][doctor]") {
  for (bool no_grad : {false, true}) {
    RecordingBuilder run;
    run.alloc("weights", 16 * kMiB, "setup");
    training_iteration(run, 0, false);
    run.alloc("input", 1 * kMiB, "validation", 10);
    for (int layer = 0; layer < 8; ++layer) {
      run.alloc("vact" + std::to_string(layer), 8 * kMiB, "validation", 20 + layer);
      // Under no_grad a layer's input is freed once its output exists.
      if (no_grad && layer > 0) run.free("vact" + std::to_string(layer - 1));
    }
    for (int layer = no_grad ? 7 : 0; layer < 8; ++layer) run.free("vact" + std::to_string(layer));
    DoctorReport report = diagnose(run.write(no_grad ? "validation_no_grad" : "validation_grad"));
    const DoctorPattern* validation = find(report, "validation with autograd");
    INFO("no_grad " << no_grad);
    CHECK((validation != nullptr) == !no_grad);
    if (validation) {
      CHECK(validation->bytes == 57 * kMiB);  // the rise (64 MiB of activations, 1 MiB of input) less the largest tensor
      REQUIRE(validation->sites.size() == 5);
      CHECK(validation->sites.front().bytes == 8 * kMiB);
      CHECK(validation->sites.front().where.site.find("user/model.py:2") != std::string::npos);
    }
  }
}

namespace {

// Big temporaries freed and their segments reused by smaller long-lived tensors: each 100 MiB
// segment keeps a 60 MiB tensor and a 40 MiB hole, and the last 200 MiB request finds no
// block that large although 360 MiB is cached (a recorded OOM on a 1000 MiB device).
std::string fragmented_run() {
  RecordingBuilder run;
  for (int i = 0; i < 9; ++i) {
    std::string n = std::to_string(i);
    run.alloc("big" + n, 100 * kMiB, "forward", 30);
    run.free("big" + n);
    run.alloc("keep" + n, 60 * kMiB, "forward", 31);
  }
  run.alloc("request", 200 * kMiB, "forward", 32);
  return run.write("fragmented", 1000 * kMiB);
}

}  // namespace

TEST_CASE("a recorded OOM with a fragmented cache is classified and expandable segments avoid it", "[advisor][doctor]") {
  const std::string path = fragmented_run();
  DoctorReport report = diagnose(path);
  REQUIRE(report.failure);
  CHECK(report.failure->recorded);
  CHECK(report.failure->request_bytes == 200 * kMiB);
  CHECK(report.failure->reserved_bytes == 900 * kMiB);
  CHECK(report.usable_bytes == 1000 * kMiB);
  const DoctorPattern* fragmentation = find(report, "fragmentation");
  REQUIRE(fragmentation);
  CHECK(fragmentation->causes_failure);
  CHECK(fragmentation->bytes == 360 * kMiB);
  REQUIRE(fix_named(report, "the recorded settings"));
  CHECK_FALSE(fix_named(report, "the recorded settings")->fits);  // the replay fails where the run did
  const FixTrial* expandable = fix_named(report, "expandable_segments:True");
  REQUIRE(expandable);
  CHECK(expandable->fits);
  CHECK(expandable->headroom_bytes > 0);

  // The same check made again by hand: the recording replayed with expandable segments on a
  // 1000 MiB device, the failed request retried at its place.
  sim::Snapshot snapshot = sim::read_snapshot(path);
  FixReplay setup;
  setup.config = with_setting(sim::snapshot_allocator_config(snapshot), "expandable_segments:True");
  CHECK(setup.config.expandable_segments);
  sim::DeviceModel device;
  device.total_bytes = 1000 * kMiB;
  setup.device = device;
  setup.request_after = report.failure->after_event;
  setup.request = 200 * kMiB;
  CHECK(replay_fix(path, snapshot, 0, setup).fits);
  setup.config = sim::snapshot_allocator_config(snapshot);
  CHECK_FALSE(replay_fix(path, snapshot, 0, setup).fits);
}

TEST_CASE("an OOM in the first iteration is the first-batch pattern with the model states measured", "[advisor][doctor]") {
  RecordingBuilder run;
  run.alloc("weights", 700 * kMiB, "setup");
  run.alloc("act0", 200 * kMiB, "forward", 20);
  run.alloc("act1", 200 * kMiB, "forward", 21);
  DoctorReport report = diagnose(run.write("first_batch", 1000 * kMiB));
  REQUIRE(report.failure);
  CHECK(report.failure->phase == StepPhase::Forward);
  const DoctorPattern* first = find(report, "first batch");
  REQUIRE(first);
  CHECK(first->bytes == 700 * kMiB);
}

TEST_CASE("the doctor reproduces the real 2.7B training-step snapshot and names its peak", "[advisor][doctor]") {
  DoctorOptions options;
  options.simulate_fixes = false;
  const std::string path = std::string(OOMCAST_SOURCE_DIR) + "/tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz";
  sim::Snapshot snapshot = sim::read_snapshot(path);
  DoctorReport report = diagnose_snapshot(path, snapshot, read_snapshot_frames(path, 0), options);
  CHECK(report.reproduced);
  CHECK(report.has_frames);
  CHECK(report.timeline.has_phases);
  CHECK(report.peak_phase != StepPhase::Unknown);
  CHECK_FALSE(report.peak_site.site.empty());  // the call site of the peak allocation, from its frames
  CHECK_FALSE(report.failure);
}

TEST_CASE("a truncated snapshot is an input error", "[advisor][doctor]") {
  const std::string path = std::string(OOMCAST_SOURCE_DIR) + "/tests/data/cli/truncated.pickle.gz";
  CHECK_THROWS_AS(sim::read_snapshot(path), InputError);
}

TEST_CASE("a recorded OOM on a device larger than the allocator could reach names the memory outside it",
          "[advisor][doctor]") {
  // The run saw 1000 MiB (900 reserved + 100 free); the device has 3000 MiB: 2000 MiB were
  // held by others (another process, a context, NCCL).
  sim::DeviceModel device;
  device.total_bytes = 3000 * kMiB;
  DoctorReport report = diagnose(fragmented_run(), device);
  REQUIRE(report.outside_allocator_bytes);
  CHECK(*report.outside_allocator_bytes == 2000 * kMiB);
  const DoctorPattern* outside = find(report, "memory outside the allocator");
  REQUIRE(outside);
  CHECK(outside->bytes == 2000 * kMiB);
  CHECK(report.usable_bytes == 1000 * kMiB);  // the re-simulations keep the limit the run met
}

TEST_CASE("the doctor's page and JSON carry its phases, patterns and re-simulations", "[advisor][doctor]") {
  const std::string path = leaking_run();
  sim::Snapshot snapshot = sim::read_snapshot(path);
  SnapshotFrameTable frames = read_snapshot_frames(path, 0);
  DoctorReport report = diagnose_snapshot(path, snapshot, frames, DoctorOptions{});
  std::string page = render_html(doctor_html_report(report, snapshot, frames));
  CHECK(page.find("Patterns in the recording") != std::string::npos);
  CHECK(page.find("Re-simulated on the same recording") != std::string::npos);
  CHECK(page.find("iter3/backward") != std::string::npos);
  nlohmann::json json = doctor_json(report);
  CHECK(json["iterations"].size() == 5);
  CHECK(json["failure"].is_null());
  bool leak_named = false;
  for (const auto& pattern : json["patterns"]) leak_named = leak_named || pattern["name"] == "leak";
  CHECK(leak_named);
  CHECK(json["fixes"].size() == report.fixes.size());
}

namespace {

// What a fix trial should find, replayed here from the public pieces: the recording's own
// trace, the recorded settings with the trial's one setting on top, the device the run met
// (or the trial's larger one), the failed request retried at its place, and an empty_cache()
// after the event before the phase the trial names.
FixTrial replay_trial(const std::string& path, const sim::Snapshot& snapshot, const sim::Trace& trace,
                      const DoctorReport& report, const FixTrial& fix, std::optional<sim::DeviceModel> given) {
  const sim::AllocatorConfig recorded = sim::snapshot_allocator_config(snapshot);
  FixReplay setup;
  setup.trace_from_empty = &trace;
  setup.config = fix.alloc_conf.empty() ? recorded : with_setting(recorded, fix.alloc_conf);
  sim::DeviceModel device = given.value_or(sim::DeviceModel{});
  device.total_bytes = fix.usable_bytes + device.context_bytes + device.other_process_bytes;
  device.memory_fraction = fix.alloc_conf.starts_with("garbage_collection_threshold") ? 1.0 : 0.0;
  setup.device = device;
  if (report.failure && report.failure->recorded) {
    setup.request_after = report.failure->after_event;
    setup.request = report.failure->request_bytes;
  }
  const std::string flush = "torch.cuda.empty_cache() before ";
  if (fix.name.starts_with(flush)) {
    for (const PhaseRun& run : report.timeline.runs)
      if (run.label() == fix.name.substr(flush.size())) setup.empty_cache_after = run.first_event - 1;
    REQUIRE(setup.empty_cache_after != SIZE_MAX);
  }
  return replay_fix(path, snapshot, 0, setup);
}

void check_every_fix_is_its_replay(const std::string& path, std::optional<sim::DeviceModel> device,
                                   const std::vector<std::string>& expected) {
  DoctorReport report = diagnose(path, device);
  REQUIRE(report.failure);
  for (const std::string& name : expected) {
    INFO("expected trial " << name);
    CHECK(std::any_of(report.fixes.begin(), report.fixes.end(),
                      [&](const FixTrial& fix) { return fix.name.starts_with(name); }));
  }
  const sim::Snapshot snapshot = sim::read_snapshot(path);
  const sim::SnapshotReplayReport replayed =
      sim::replay_snapshot(snapshot, sim::snapshot_allocator_config(snapshot), path);
  REQUIRE(replayed.starts_empty);
  for (const FixTrial& fix : report.fixes) {
    INFO(fix.name);
    FixTrial again = replay_trial(path, snapshot, replayed.trace, report, fix, device);
    CHECK(again.fits == fix.fits);
    CHECK(again.ooms == fix.ooms);
    CHECK(again.peak_reserved_bytes == fix.peak_reserved_bytes);
  }
}

// A training loop whose iterations' activations are `activation_mib` each (3 layers), as a
// batch's sequence length changes them.
std::string run_with_activations(const std::string& name, const std::vector<uint64_t>& activation_mib) {
  RecordingBuilder run;
  run.alloc("weights", 16 * kMiB, "setup");
  for (size_t iteration = 0; iteration < activation_mib.size(); ++iteration) {
    std::string i = std::to_string(iteration);
    for (int layer = 0; layer < 3; ++layer)
      run.alloc("act" + i + "." + std::to_string(layer), activation_mib[iteration] * kMiB, "forward", 20 + layer);
    for (int layer = 2; layer >= 0; --layer) {
      run.alloc("grad_tmp" + i + "." + std::to_string(layer), 2 * kMiB, "backward");
      run.free("act" + i + "." + std::to_string(layer));
      run.free("grad_tmp" + i + "." + std::to_string(layer));
    }
    if (iteration == 0) run.alloc("exp_avg", 16 * kMiB, "optimizer", 90);
    run.alloc("step_tmp" + i, 2 * kMiB, "optimizer", 120);
    run.free("step_tmp" + i);
  }
  return run.write(name);
}

}  // namespace

TEST_CASE("each re-simulated fix of a run that fails on a smaller device is the replay of the recording under it",
          "[advisor][doctor]") {
  const std::string path = leaking_run();
  sim::DeviceModel device;
  device.total_bytes = diagnose(path).peak_reserved_bytes - kMiB;
  check_every_fix_is_its_replay(path, device,
                                {"the recorded settings", "expandable_segments:True", "max_split_size_mb:128",
                                 "max_split_size_mb:512", "garbage_collection_threshold:0.8", "roundup_power2_divisions:4",
                                 "torch.cuda.empty_cache() before ", "a device with"});
}

TEST_CASE("each re-simulated fix of a recorded OOM is the replay of the recording under it, the request retried",
          "[advisor][doctor]") {
  check_every_fix_is_its_replay(fragmented_run(), std::nullopt,
                                {"the recorded settings", "expandable_segments:True", "max_split_size_mb:128",
                                 "max_split_size_mb:512", "garbage_collection_threshold:0.8", "roundup_power2_divisions:4"});
}

TEST_CASE("activations that grow with one iteration's input are classified, and equal iterations are not",
          "[advisor][doctor]") {
  DoctorReport varying = diagnose(run_with_activations("varying_activations", {8, 8, 8, 16, 8}));
  const DoctorPattern* pattern = find(varying, "activations vary with the input");
  REQUIRE(pattern);
  CHECK(pattern->bytes == 24 * kMiB);  // three activations 8 MiB larger in iteration 3
  CHECK(pattern->evidence.find("iteration 3") != std::string::npos);
  CHECK_FALSE(find(varying, "leak"));

  DoctorReport steady = diagnose(run_with_activations("steady_activations", {8, 8, 8, 8, 8}));
  CHECK_FALSE(find(steady, "activations vary with the input"));
}

TEST_CASE("a run that fits its device is re-simulated on the smallest device it needs, and fits there",
          "[advisor][doctor]") {
  const std::string path = leaking_run();
  const uint64_t needed = diagnose(path).peak_reserved_bytes;
  sim::DeviceModel device;
  device.total_bytes = needed + 300 * kMiB + device.context_bytes + device.other_process_bytes;
  DoctorReport report = diagnose(path, device);
  REQUIRE_FALSE(report.failure);
  REQUIRE_FALSE(report.fixes.empty());
  const FixTrial& smaller = report.fixes.back();
  CHECK(smaller.name.starts_with("a device with"));
  CHECK(smaller.name.find("less") != std::string::npos);
  CHECK(smaller.usable_bytes == needed);
  CHECK(smaller.fits);
  CHECK(smaller.headroom_bytes == 0);
  // The same trial replayed by hand agrees.
  const sim::Snapshot snapshot = sim::read_snapshot(path);
  const sim::SnapshotReplayReport replayed = sim::replay_snapshot(snapshot, sim::snapshot_allocator_config(snapshot), path);
  FixTrial again = replay_trial(path, snapshot, replayed.trace, report, smaller, device);
  CHECK(again.fits);
  CHECK(again.peak_reserved_bytes == smaller.peak_reserved_bytes);
}
