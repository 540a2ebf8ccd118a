// The patterns an OOM message's numbers can show, tested in the order a reader should check
// them: memory outside the allocator first (no allocator setting helps there), then a single
// impossible request, a memory fraction, fragmentation, private pools, plain capacity.
#include "advisor/oom_explanation.h"

#include <algorithm>

#include <fmt/format.h>

#include "advisor/byte_text.h"

namespace oomcast::advisor {
namespace {

// A CUDA context with cuBLAS/cuDNN loaded takes a few hundred MiB; more than this outside the
// allocator means other allocations (other processes, NCCL, libraries that call cudaMalloc).
constexpr uint64_t kTypicalContextBytes = 1ull << 30;

std::string percent_of(uint64_t part, uint64_t whole) {
  return whole == 0 ? std::string("?") : fmt::format("{:.0f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

bool expandable_segments_exist(OomMessageFormat format) {
  return format == OomMessageFormat::Torch21 || format == OomMessageFormat::Current;
}

}  // namespace

std::vector<std::string> snapshot_recording_lines() {
  return {
      "torch.cuda.memory._record_memory_history(max_entries=100000)  # at the start, before the model is built",
      "try:",
      "    train()  # your loop, unchanged",
      "except torch.cuda.OutOfMemoryError:",
      "    torch.cuda.memory._dump_snapshot(\"oom_snapshot.pickle\")",
      "    raise",
      "# then: oomcast doctor oom_snapshot.pickle",
  };
}

OomExplanation explain_oom_message(const OomMessageFigures& f) {
  OomExplanation out;
  out.figures = f;
  out.record_snapshot_lines = snapshot_recording_lines();
  if (f.format == OomMessageFormat::OverOneExbibyte) {
    out.patterns.push_back({"one oversized request",
                            "the request was 1 EiB or more: no device has that much, the allocator refused it before "
                            "looking",
                            "a size computed wrong (an overflowed shape, a negative dimension cast to unsigned): print "
                            "the shapes of the op in the traceback"});
    out.first_try = out.patterns.front().action;
    return out;
  }
  out.limit_bytes = f.allowed_bytes ? std::min(*f.allowed_bytes, f.device_total) : f.device_total;
  uint64_t held = f.device_free + f.reserved;
  out.outside_allocator_bytes = f.device_total > held ? f.device_total - held : 0;
  for (const ProcessUsage& process : f.processes) {
    if (process.this_process) {
      out.this_process_outside_bytes = process.bytes > f.reserved ? process.bytes - f.reserved : 0;
    } else {
      out.other_processes_bytes += process.bytes;
    }
  }
  // With only "Process N" lines (a container hides this process's pid) the largest one is
  // most likely this process: it holds at least the reserved bytes.
  const bool this_process_named =
      std::any_of(f.processes.begin(), f.processes.end(), [](const ProcessUsage& p) { return p.this_process; });
  if (!this_process_named && !f.processes.empty()) {
    auto largest = std::max_element(f.processes.begin(), f.processes.end(),
                                     [](const ProcessUsage& a, const ProcessUsage& b) { return a.bytes < b.bytes; });
    if (largest->bytes >= f.reserved) {
      out.other_processes_bytes -= largest->bytes;
      out.this_process_outside_bytes = largest->bytes - f.reserved;
    }
  }

  const uint64_t unallocated = f.reserved_unallocated;
  const uint64_t request = f.alloc_size;
  if (out.other_processes_bytes > f.device_total / 20) {
    out.patterns.push_back({"other processes",
                            fmt::format("other processes hold {} ({} of the device)", byte_text(out.other_processes_bytes),
                                        percent_of(out.other_processes_bytes, f.device_total)),
                            "check nvidia-smi for other jobs, notebooks or zombie workers on this GPU (or set "
                            "CUDA_VISIBLE_DEVICES to a free one)"});
  } else if (out.outside_allocator_bytes > kTypicalContextBytes) {
    out.patterns.push_back(
        {"memory outside the allocator",
         fmt::format("{} of the device is neither free nor reserved by this allocator{} (a CUDA context takes a "
                     "few hundred MiB)",
                     byte_text(out.outside_allocator_bytes),
                     out.this_process_outside_bytes > 0
                         ? fmt::format("; this process holds {} of it outside the allocator (NVML)",
                                       byte_text(out.this_process_outside_bytes))
                         : std::string()),
         "check nvidia-smi for other processes on this GPU; in this process, NCCL buffers, cudaMalloc from other "
         "libraries (cupy, TensorRT, a second framework) hold memory the caching allocator cannot reuse"});
  }
  if (request > out.limit_bytes / 2) {
    out.patterns.push_back(
        {"one oversized request",
         fmt::format("one request of {} is {} of the device", byte_text(request), percent_of(request, f.device_total)),
         "a single tensor this large points at a shape: an attention matrix (use a fused/flash attention), a batch "
         "that should be chunked, or a shape computed wrong: look at the op in the traceback"});
  }
  if (f.allowed_bytes && *f.allowed_bytes < f.device_total) {
    out.patterns.push_back({"memory fraction",
                            fmt::format("set_per_process_memory_fraction allows {} of the {} device",
                                        byte_text(*f.allowed_bytes), byte_text(f.device_total)),
                            "raise the fraction, or know that this limit, not the device, is what ran out"});
  }
  if (unallocated >= request && unallocated > 0) {
    out.patterns.push_back(
        {"fragmentation",
         fmt::format("{} is reserved but unallocated, more than the {} request: the cache has the bytes, but no "
                     "free block that large",
                     byte_text(unallocated), byte_text(request)),
         expandable_segments_exist(f.format)
             ? "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (one growing segment per stream: free pages are "
               "reused whatever their place)"
             : "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 (keeps large blocks whole); torch 2.1+ has "
               "expandable_segments:True"});
  } else if (unallocated > 0 && unallocated * 4 >= request) {
    out.patterns.push_back(
        {"some fragmentation",
         fmt::format("{} is reserved but unallocated: {} of the request; the rest had to come from the device",
                     byte_text(unallocated), percent_of(unallocated, request)),
         "expandable_segments:True may recover the cached part; the request still needs the rest"});
  }
  if (f.in_private_pools > 0) {
    out.patterns.push_back({"private pools",
                            fmt::format("{} sits free in private pools (CUDA graphs, torch.cuda.MemPool), which other "
                                        "allocations cannot use",
                                        byte_text(f.in_private_pools)),
                            "release graphs you no longer replay (del graph, torch.compile mode without "
                            "cudagraphs), or share one pool between graphs"});
  }
  const uint64_t shortfall = request > unallocated + f.device_free ? request - unallocated - f.device_free : 0;
  // 2.4+ prints the free blocks of private pools inside "allocated": they are not live tensors.
  const uint64_t live = f.allocated_by_pytorch > f.in_private_pools ? f.allocated_by_pytorch - f.in_private_pools : 0;
  if (f.allocated_by_pytorch >= out.limit_bytes * 8 / 10 || out.patterns.empty()) {
    out.patterns.push_back(
        {"capacity",
         fmt::format("live tensors hold {} of the {} limit{}", percent_of(live, out.limit_bytes),
                     byte_text(out.limit_bytes),
                     shortfall > 0 ? fmt::format(", and the request is {} more than free plus cached", byte_text(shortfall))
                                   : std::string()),
         "the job needs less memory: a smaller batch (with gradient accumulation), activation checkpointing, "
         "bf16 autocast, a lighter optimizer (8-bit Adam) or sharding (FSDP/ZeRO); `oomcast plan` or `whatif` "
         "ranks them"});
  }
  if (f.device_free >= request) {
    out.patterns.push_back({"free memory at the failure",
                            fmt::format("the device showed {} free, enough for the request, when the message was made",
                                        byte_text(f.device_free)),
                            "the memory was freed after the failure (another process ended, or this allocator's "
                            "retry released its cache) or a memory fraction applies: check both"});
  }
  // A cache too small to matter next to live tensors that fill the device: capacity first.
  auto named = [&out](const char* name) {
    return std::find_if(out.patterns.begin(), out.patterns.end(), [name](const OomMessagePattern& p) { return p.name == name; });
  };
  auto fragmented = named("fragmentation"), full = named("capacity");
  if (fragmented != out.patterns.end() && full != out.patterns.end() && unallocated < out.limit_bytes / 20) {
    OomMessagePattern moved = *fragmented;
    out.patterns.erase(fragmented);
    out.patterns.insert(named("capacity") + 1, moved);
  }
  out.first_try = out.patterns.front().action;
  return out;
}

std::string render_explanation_text(const OomExplanation& e) {
  const OomMessageFigures& f = e.figures;
  std::string text = fmt::format("{} out of memory on GPU {} ({} message)\n", f.backend, f.device_index, format_name(f.format));
  if (f.format != OomMessageFormat::OverOneExbibyte) {
    auto row = [&text](const std::string& label, uint64_t bytes, const std::string& note) {
      text += fmt::format("  {:<32} {:>12}  {}\n", label, byte_text(bytes), note);
    };
    row("request (segment it tried)", f.alloc_size, "the tensor asked for this or less (small requests get 2 MiB, 1-10 MiB ones 20 MiB)");
    row("device total", f.device_total, "");
    if (f.allowed_bytes) row("allowed (memory fraction)", *f.allowed_bytes, "the limit this process ran into");
    row("device free", f.device_free, "after the allocator released its cache");
    row("allocated (live tensors)", f.allocated_by_pytorch,
        f.in_private_pools > 0 ? fmt::format("incl. {} free in private pools", byte_text(f.in_private_pools)) : "");
    row("reserved by PyTorch", f.reserved, "segments the caching allocator holds");
    row("reserved but unallocated", f.reserved_unallocated,
        fmt::format("cached, not in use: {} of reserved", percent_of(f.reserved_unallocated, f.reserved)));
    row("outside this allocator", e.outside_allocator_bytes, "CUDA context, other libraries, other processes: check it first");
    for (const ProcessUsage& process : f.processes)
      text += fmt::format("    {:<30} {:>12}\n", process.this_process ? "this process (NVML)" : fmt::format("process {}", process.pid),
                          byte_text(process.bytes));
  }
  text += "patterns that fit the numbers (most likely first):\n";
  for (const OomMessagePattern& pattern : e.patterns)
    text += fmt::format("  - {}: {}\n      try: {}\n", pattern.name, pattern.evidence, pattern.action);
  text += fmt::format("try first: {}\n", e.first_try);
  text += "to see which call site and phase ran out, record a snapshot next time and run `oomcast doctor` on it:\n";
  for (const std::string& line : e.record_snapshot_lines) text += "    " + line + "\n";
  return text;
}

nlohmann::json explanation_json(const OomExplanation& e) {
  const OomMessageFigures& f = e.figures;
  nlohmann::json out;
  out["format"] = format_name(f.format);
  out["backend"] = f.backend;
  out["request_bytes"] = f.alloc_size;
  out["device_index"] = f.device_index;
  out["device_total_bytes"] = f.device_total;
  out["device_free_bytes"] = f.device_free;
  out["allowed_bytes"] = f.allowed_bytes ? nlohmann::json(*f.allowed_bytes) : nlohmann::json(nullptr);
  out["allocated_bytes"] = f.allocated_by_pytorch;
  out["in_private_pools_bytes"] = f.in_private_pools;
  out["reserved_bytes"] = f.reserved;
  out["reserved_unallocated_bytes"] = f.reserved_unallocated;
  out["outside_allocator_bytes"] = e.outside_allocator_bytes;
  out["other_processes_bytes"] = e.other_processes_bytes;
  nlohmann::json processes = nlohmann::json::array();
  for (const ProcessUsage& p : f.processes) processes.push_back({{"pid", p.pid}, {"this_process", p.this_process}, {"bytes", p.bytes}});
  out["processes"] = processes;
  nlohmann::json patterns = nlohmann::json::array();
  for (const OomMessagePattern& p : e.patterns) patterns.push_back({{"name", p.name}, {"evidence", p.evidence}, {"action", p.action}});
  out["patterns"] = patterns;
  out["first_try"] = e.first_try;
  out["record_snapshot"] = e.record_snapshot_lines;
  return out;
}

}  // namespace oomcast::advisor
