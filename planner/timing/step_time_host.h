// The CPU's side of an eager PyTorch step: what issuing each op costs the host (Python, the
// dispatcher, autograd, the CUDA launch), and the pipeline that overlaps it with the GPU. The
// host runs ahead of the GPU, queueing kernels (Paszke et al., "PyTorch: An Imperative Style,
// High-Performance Deep Learning Library", NeurIPS 2019, §5.3), so an op delays the step by
// its device time when the GPU is the bottleneck and by its host time when the CPU is: a step
// of many small kernels is bound by the host (He, "Making Deep Learning Go Brrrr From First
// Principles", 2022, "Overhead"). docs/step-time.md gives the constants' sources.
#pragma once

#include "planner/layer_graph.h"
#include "planner/timing/op_cost.h"

namespace oomcast::planner {

// Host time of one CUDA kernel launch (cudaLaunchKernel with the caching allocator's
// bookkeeping): back-to-back launches sustain about one per 3-4 µs (NVIDIA, "Getting Started
// with CUDA Graphs").
inline constexpr double kHostLaunchSeconds = 3e-6;
// A Python-level op before its launch: the Python binding, argument parsing, the dispatcher
// and autograd's graph recording. A plain CUDA op issued back to back from Python costs ~8 µs
// of host time with its launch (flagos-ai/Torch-FL#27, add on an A100 host), and recording for
// autograd adds ~2 µs (pytorch/pytorch#41383: 6.8 against 5 µs per op), so 7 + 3 µs.
inline constexpr double kHostPythonOpSeconds = 7e-6;
// An op the dispatcher issues from inside another, without Python (autocast's casts): about
// 1 µs of dispatch (pytorch/pytorch#41383: half of a 2 µs CPU op is Python's parsing).
inline constexpr double kHostDispatchedOpSeconds = 1e-6;
// The autograd engine running one backward node in C++ (no Python), before its launches (an
// assumption of the dispatcher's order, as above).
inline constexpr double kHostBackwardNodeSeconds = 2e-6;

// Host seconds to issue an op's forward (kernels from cost.kernels); 0 for ops that launch
// nothing (views), whose Python cost is not modelled.
double forward_host_seconds(const OpNode& op, const OpCost& cost);
// Host seconds of the autograd node that runs the op's backward.
double backward_host_seconds(const OpCost& cost);
// Host seconds of `ops` Python-level ops that launch `launches` kernels in all (optimizer loops).
double python_ops_host_seconds(double ops, double launches);

// The host and the GPU as two clocks: the host issues an op after its previous ones, the GPU
// starts the op's kernels once they are issued and its earlier kernels are done.
class HostDevicePipeline {
 public:
  // Issues one op; returns how much later the GPU finishes because of it (the op's share of
  // the step: its device time when the GPU is behind, up to its host time when the GPU waits).
  double issue(double host_seconds, double device_seconds);
  // A synchronisation (`.item()`, the end of the step): the host waits for the GPU.
  void synchronize() { host_ = device_ = std::max(host_, device_); }
  double host_seconds() const { return host_; }
  double device_seconds() const { return device_; }

 private:
  double host_ = 0.0;
  double device_ = 0.0;
};

}  // namespace oomcast::planner
