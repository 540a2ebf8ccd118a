// The OOM patterns a recording shows, each judged from the replayed bytes and the frames:
// the first batch (model states leave no room), growth across iterations (a leak), validation
// that keeps autograd's saved tensors, optimizer state created at the first step,
// fragmentation, memory outside the allocator, and a step peak that varies with the input.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "advisor/byte_text.h"
#include "advisor/leak_judgement.h"
#include "advisor/snapshot_doctor.h"

namespace oomcast::advisor {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// Per alloc event, the event that frees it (SIZE_MAX: alive at the end of the recording).
std::vector<size_t> free_event_of_alloc(const sim::Trace& trace) {
  std::vector<size_t> alloc_of_slot(trace.slot_names.size(), SIZE_MAX);
  std::vector<size_t> freed(trace.events.size(), SIZE_MAX);
  for (size_t event = 0; event < trace.events.size(); ++event) {
    const sim::Event& e = trace.events[event];
    if (e.slot >= alloc_of_slot.size()) continue;
    if (e.kind == sim::EventKind::Alloc) {
      alloc_of_slot[e.slot] = event;
    } else if ((e.kind == sim::EventKind::Free || e.kind == sim::EventKind::FreeRequested) &&
               alloc_of_slot[e.slot] != SIZE_MAX && freed[alloc_of_slot[e.slot]] == SIZE_MAX) {
      freed[alloc_of_slot[e.slot]] = event;
    }
  }
  return freed;
}

class SiteTotals {
 public:
  void add(const CallSite& where, uint64_t bytes) {
    SiteBytes& row = rows_[call_site_text(where)];
    row.where = where;
    row.bytes += bytes;
    row.blocks += 1;
  }
  std::vector<SiteBytes> largest(size_t top) const {
    std::vector<SiteBytes> out;
    for (const auto& [key, row] : rows_) out.push_back(row);
    std::stable_sort(out.begin(), out.end(), [](const SiteBytes& a, const SiteBytes& b) { return a.bytes > b.bytes; });
    if (out.size() > top) out.resize(top);
    return out;
  }

 private:
  std::map<std::string, SiteBytes> rows_;
};

struct Context {
  const DoctorReport& report;
  const sim::SnapshotReplayReport& replay;
  const SnapshotFrameTable& frames;
  const std::vector<uint64_t>& allocated_after;
  std::vector<size_t> freed;
  CallSite site_of(size_t event) const {
    return call_site_of(frames, event < replay.entry_of_event.size() ? replay.entry_of_event[event] : -1);
  }
  // The event of the failure, else the peak: what "causes" is judged against.
  size_t focus_event() const {
    if (report.failure) return report.failure->after_event == SIZE_MAX ? 0 : report.failure->after_event;
    return report.peak_event;
  }
  StepPhase focus_phase() const { return report.failure ? report.failure->phase : report.peak_phase; }
  int focus_iteration() const { return report.failure ? report.failure->iteration : report.peak_iteration; }
};

void first_batch(const Context& c, std::vector<DoctorPattern>& out) {
  if (!c.report.failure || c.report.failure->iteration != 0 || !c.report.timeline.has_phases) return;
  uint64_t model_states = 0;
  for (const PhaseRun& run : c.report.timeline.runs) {
    if (run.phase == StepPhase::Forward || run.phase == StepPhase::DataLoading) {
      model_states = run.allocated_at_start;
      break;
    }
  }
  DoctorPattern pattern;
  pattern.name = "first batch";
  pattern.bytes = model_states;
  pattern.causes_failure = true;
  pattern.evidence = fmt::format(
      "the run failed in the recording's first iteration ({}): the model states alone (allocated before the first forward) are {}{}",
      phase_name(c.report.failure->phase), byte_text(model_states),
      c.report.usable_bytes > 0 ? fmt::format(", {:.0f}% of the {} usable", 100.0 * static_cast<double>(model_states) /
                                                                                static_cast<double>(c.report.usable_bytes),
                                               byte_text(c.report.usable_bytes))
                                : std::string());
  pattern.change = "no step fits beside the model states: lower precision (bf16 weights, 8-bit Adam), shard them "
                   "(FSDP / ZeRO), train adapters (LoRA), or a smaller batch if the activations are most of it";
  out.push_back(pattern);
}

void leak(const Context& c, std::vector<DoctorPattern>& out) {
  const auto& iterations = c.report.timeline.iterations;
  if (iterations.size() < 4) return;
  // Same-parity rises, as the prediction's leak rule (a loop holding last iteration's output
  // alternates), over the starts of iterations 1.. (iteration 0 builds state once).
  bool grows = true;
  for (size_t i = 1; i + 2 < iterations.size() && grows; ++i)
    grows = iterations[i + 2].allocated_at_start >= iterations[i].allocated_at_start + kLeakGrowthFloor;
  const uint64_t first = iterations[1].allocated_at_start, last = iterations.back().allocated_at_start;
  if (!grows || last <= first) return;
  SiteTotals sites;
  std::map<int, bool> seen;
  for (size_t event = 0; event < c.replay.trace.events.size(); ++event) {
    int iteration = c.report.timeline.event_iteration[event];
    if (c.replay.trace.events[event].kind != sim::EventKind::Alloc || iteration < 1 ||
        iteration >= iterations.back().index || c.freed[event] != SIZE_MAX)
      continue;
    sites.add(c.site_of(event), c.replay.trace.events[event].bytes);
  }
  DoctorPattern pattern;
  pattern.name = "leak";
  pattern.bytes = (last - first) / (iterations.size() - 2);
  pattern.causes_failure = c.report.failure.has_value() || c.report.peak_iteration == iterations.back().index;
  pattern.evidence = fmt::format("allocated memory at the start of each iteration grows by {} per iteration ({} at "
                                 "iteration 1, {} at iteration {})",
                                 byte_text(pattern.bytes), byte_text(first), byte_text(last), iterations.back().index);
  pattern.sites = sites.largest(5);
  pattern.change = "tensors from these call sites outlive their iteration: a loss or output kept in a list or a "
                   "running sum keeps it (and, before backward, its graph): store loss.item() or .detach(), del "
                   "what the next iteration does not need";
  out.push_back(pattern);
}

void validation_with_autograd(const Context& c, std::vector<DoctorPattern>& out) {
  uint64_t forward_rise = 0;
  for (const PhaseRun& run : c.report.timeline.runs)
    if (run.phase == StepPhase::Forward) forward_rise = std::max(forward_rise, run.peak_allocated - run.allocated_at_start);
  const auto& events = c.replay.trace.events;
  for (const PhaseRun& run : c.report.timeline.runs) {
    if (run.phase != StepPhase::Validation) continue;
    uint64_t rise = run.peak_allocated - run.allocated_at_start;
    uint64_t largest = 0;
    SiteTotals held;
    for (size_t event = run.first_event; event <= run.peak_event; ++event) {
      if (events[event].kind != sim::EventKind::Alloc) continue;
      largest = std::max<uint64_t>(largest, events[event].bytes);
      if (c.freed[event] > run.peak_event) held.add(c.site_of(event), events[event].bytes);
    }
    // Under no_grad a forward holds a layer's input and output at a time; with autograd it
    // keeps every layer's saved tensors until the output is freed.
    if (rise < kMiB || rise < 4 * largest || (forward_rise > 0 && 2 * rise < forward_rise)) continue;
    DoctorPattern pattern;
    pattern.name = "validation with autograd";
    pattern.bytes = rise - largest;
    pattern.causes_failure = c.focus_phase() == StepPhase::Validation && c.focus_iteration() == run.iteration;
    pattern.evidence = fmt::format("{} rises by {} ({}x its largest tensor{}): the forward keeps what autograd saves",
                                   run.label(), byte_text(rise), rise / std::max<uint64_t>(largest, 1),
                                   forward_rise > 0 ? fmt::format("; a training forward rises by {}", byte_text(forward_rise))
                                                    : std::string());
    pattern.sites = held.largest(5);
    pattern.change = fmt::format("run validation under `with torch.no_grad():` (or torch.inference_mode()): about {} "
                                 "less at its peak",
                                 byte_text(pattern.bytes));
    out.push_back(pattern);
    return;
  }
}

void optimizer_state(const Context& c, std::vector<DoctorPattern>& out) {
  const auto& runs = c.report.timeline.runs;
  auto first = std::find_if(runs.begin(), runs.end(), [](const PhaseRun& run) { return run.phase == StepPhase::Optimizer; });
  if (first == runs.end()) return;
  SiteTotals kept;
  uint64_t bytes = 0;
  for (size_t event = first->first_event; event <= first->last_event; ++event) {
    const sim::Event& e = c.replay.trace.events[event];
    if (e.kind != sim::EventKind::Alloc || c.freed[event] <= first->last_event) continue;
    bytes += e.bytes;
    kept.add(c.site_of(event), e.bytes);
  }
  if (bytes < kMiB) return;
  DoctorPattern pattern;
  pattern.name = "optimizer state";
  pattern.bytes = bytes;
  pattern.causes_failure = c.focus_iteration() == first->iteration && c.focus_phase() == StepPhase::Optimizer;
  pattern.evidence = fmt::format("{} creates {} that outlives the step: the optimizer's state, made at its first step()",
                                 first->label(), byte_text(bytes));
  pattern.sites = kept.largest(5);
  pattern.change = "Adam keeps two fp32 moments per parameter: 8-bit Adam (bitsandbytes), a sharded optimizer (ZeRO-1, "
                   "FSDP), or foreach=False to drop the step's temporaries; zero_grad(set_to_none=True) before it";
  out.push_back(pattern);
}

void fragmentation(const Context& c, std::vector<DoctorPattern>& out) {
  uint64_t reserved = 0, allocated = 0, split = 0, request = 0;
  if (c.report.failure) {
    reserved = c.report.failure->reserved_bytes;
    allocated = c.report.failure->allocated_bytes;
    split = c.report.failure->inactive_split_bytes;
    request = c.report.failure->request_bytes;
  } else {
    reserved = c.replay.replay.reserved_at_peak_allocated;
    allocated = c.replay.replay.peak_allocated_bytes;
    split = c.replay.replay.inactive_split_at_peak_allocated;
  }
  uint64_t cached = reserved > allocated ? reserved - allocated : 0;
  bool large = request > 0 ? cached >= request : cached * 5 >= reserved && cached >= 64 * kMiB;
  if (!large) return;
  DoctorPattern pattern;
  pattern.name = "fragmentation";
  pattern.bytes = cached;
  pattern.causes_failure = request > 0;
  pattern.evidence =
      request > 0 ? fmt::format("at the failure {} was reserved but unallocated ({} of it split off from blocks in "
                                "use), more than the {} request: no free block was large enough",
                                byte_text(cached), byte_text(split), byte_text(request))
                  : fmt::format("at the peak {} of {} reserved is unallocated ({} split off from blocks in use)",
                                byte_text(cached), byte_text(reserved), byte_text(split));
  pattern.change = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (re-simulated below)";
  out.push_back(pattern);
}

void outside_allocator(const Context& c, std::vector<DoctorPattern>& out) {
  if (!c.report.outside_allocator_bytes || *c.report.outside_allocator_bytes < (1ull << 30)) return;
  DoctorPattern pattern;
  pattern.name = "memory outside the allocator";
  pattern.bytes = *c.report.outside_allocator_bytes;
  pattern.causes_failure = true;
  pattern.evidence = fmt::format("of the {} device, {} was neither reserved by this allocator nor free when it failed "
                                 "(a CUDA context takes a few hundred MiB)",
                                 byte_text(c.report.device_total_bytes.value_or(0)), byte_text(pattern.bytes));
  pattern.change = "check nvidia-smi for other processes on the GPU, and NCCL or other libraries' cudaMalloc in this one";
  out.push_back(pattern);
}

void varying_step_peak(const Context& c, std::vector<DoctorPattern>& out) {
  uint64_t lowest = UINT64_MAX, highest = 0;
  int highest_iteration = 0, complete = 0;
  for (const IterationSpan& span : c.report.timeline.iterations) {
    if (!span.complete || span.index == 0) continue;
    uint64_t rise = span.peak_allocated - span.allocated_at_start;
    complete += 1;
    lowest = std::min(lowest, rise);
    if (rise > highest) {
      highest = rise;
      highest_iteration = span.index;
    }
  }
  if (complete < 2 || highest < 4 * lowest / 3 || highest - lowest < kMiB) return;
  if (std::any_of(out.begin(), out.end(), [](const DoctorPattern& p) { return p.name == "leak"; })) return;
  DoctorPattern pattern;
  pattern.name = "activations vary with the input";
  pattern.bytes = highest - lowest;
  pattern.causes_failure = c.focus_iteration() == highest_iteration;
  pattern.evidence = fmt::format("the step's rise above its start ranges from {} to {} (iteration {}): activations "
                                 "grow with the batch's sequence length or size",
                                 byte_text(lowest), byte_text(highest), highest_iteration);
  pattern.change = "cap or bucket the sequence lengths; `oomcast search --seq-len-distribution` gives the risk of the tail";
  out.push_back(pattern);
}

}  // namespace

std::vector<DoctorPattern> find_patterns(const DoctorReport& report, const sim::SnapshotReplayReport& replay,
                                         const SnapshotFrameTable& frames, const std::vector<uint64_t>& allocated_after) {
  Context c{report, replay, frames, allocated_after, free_event_of_alloc(replay.trace)};
  std::vector<DoctorPattern> out;
  outside_allocator(c, out);
  first_batch(c, out);
  leak(c, out);
  validation_with_autograd(c, out);
  optimizer_state(c, out);
  fragmentation(c, out);
  varying_step_peak(c, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const DoctorPattern& a, const DoctorPattern& b) { return a.causes_failure && !b.causes_failure; });
  return out;
}

}  // namespace oomcast::advisor
