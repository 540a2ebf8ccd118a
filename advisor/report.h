// Renders a Prediction: a text report for people (verdict, phase table, peak, breakdown,
// fragmentation, PyTorch's OOM text) and JSON for scripts (the contract in docs/usage.md).
#pragma once

#include <string>

#include "advisor/predict.h"

namespace oomcast::advisor {

// "fits with 61.02 GiB to spare" or "OOM: ..."; the first line of the text report's verdict.
std::string verdict_line(const Prediction& prediction);

// The full text report, ending with a newline.
std::string render_text(const Prediction& prediction);

// The JSON object of `oomcast plan --json`, pretty-printed, ending with a newline. Keys:
// peak_allocated_bytes, peak_reserved_bytes, device_total_bytes, usable_bytes, fits,
// spare_bytes, oom_message (null when it fits), oom_at, peak_at {iteration, phase, op,
// tensor, category}, phases [{name, iteration, allocated_bytes, reserved_bytes,
// peak_allocated_bytes, peak_reserved_bytes}], breakdown {category: bytes, allocator_rounding},
// fragmentation, parameters, events, accounting, scenario, model, device; on a GPU also
// predicted_device_used_bytes (nvidia-smi for the process: peak reserved + context + NCCL),
// phases[].device_used_bytes / peak_device_used_bytes and outside_allocator {cuda_context_bytes,
// context_source, cuda_version, module_loading, nccl_buffer_bytes, cublas_workspace_bytes,
// other_process_bytes}.
std::string render_json(const Prediction& prediction);

}  // namespace oomcast::advisor
