// explain_oom_message(): what a PyTorch OOM message says once its numbers are set side by side:
// the request, what live tensors hold, what the cache holds unused (fragmentation), what
// is held outside this process's allocator (other processes, the CUDA context), which OOM
// patterns fit the numbers, what to try first, and how to record a snapshot for `doctor`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advisor/oom_message_reader.h"

namespace oomcast::advisor {

// A pattern the numbers fit, with the numbers that say so.
struct OomMessagePattern {
  std::string name;      // "fragmentation", "other processes", "one oversized request", ...
  std::string evidence;  // the figures that fit it
  std::string action;    // what to try for it
};

struct OomExplanation {
  OomMessageFigures figures;
  uint64_t limit_bytes = 0;            // what this process could hold: allowed, else total
  uint64_t outside_allocator_bytes = 0;// total - free - reserved: context, libraries, other processes
  uint64_t other_processes_bytes = 0;  // the "Process N has X" lines that are not this process
  uint64_t this_process_outside_bytes = 0;  // this process's line minus reserved (context, libraries)
  std::vector<OomMessagePattern> patterns;  // most likely first
  std::string first_try;               // one line
  std::vector<std::string> record_snapshot_lines;  // Python to record a snapshot next time
};

// The explanation of a message read by read_oom_message().
OomExplanation explain_oom_message(const OomMessageFigures& figures);

// The lines of Python that record a snapshot `oomcast doctor` reads (torch 2.1+ API).
std::vector<std::string> snapshot_recording_lines();

std::string render_explanation_text(const OomExplanation& explanation);
// {"format", "backend", "request_bytes", "device_index", "device_total_bytes", "device_free_bytes",
//  "allowed_bytes", "allocated_bytes", "in_private_pools_bytes", "reserved_bytes",
//  "reserved_unallocated_bytes", "outside_allocator_bytes", "other_processes_bytes",
//  "processes": [{pid, this_process, bytes}], "patterns": [{name, evidence, action}],
//  "first_try", "record_snapshot"}
nlohmann::json explanation_json(const OomExplanation& explanation);

}  // namespace oomcast::advisor
