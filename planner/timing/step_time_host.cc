// Host costs of eager ops and the host/GPU pipeline (step_time_host.h).
#include "planner/timing/step_time_host.h"

#include <algorithm>

namespace oomcast::planner {

using scenario::OpKind;

double forward_host_seconds(const OpNode& op, const OpCost& cost) {
  if (cost.kernels <= 0.0) return 0.0;
  // Autocast's casts run inside the dispatcher of the op that needs them; every other op of
  // the graph stands for a Python-level call.
  const double dispatch = op.kind == OpKind::Cast ? kHostDispatchedOpSeconds : kHostPythonOpSeconds;
  return dispatch + cost.kernels * kHostLaunchSeconds;
}

double backward_host_seconds(const OpCost& cost) {
  if (cost.kernels <= 0.0) return 0.0;
  return kHostBackwardNodeSeconds + cost.kernels * kHostLaunchSeconds;
}

double python_ops_host_seconds(double ops, double launches) {
  return ops * kHostPythonOpSeconds + launches * kHostLaunchSeconds;
}

double HostDevicePipeline::issue(double host_seconds, double device_seconds) {
  const double before = device_;
  host_ += host_seconds;
  device_ = std::max(device_, host_) + device_seconds;
  return device_ - before;
}

}  // namespace oomcast::planner
