// The scenario's `activation_offloading` section: saved activations copied to host memory in the
// forward and brought back when backward unpacks them (docs/scenario-format.md#activation-offloading).
#pragma once

#include <cstdint>

namespace oomcast::scenario {

enum class OffloadMethod {
  // torchtune's OffloadActivations (torchtune/training/_activation_offloading.py): tensors of at
  // least min_offload_bytes that are not nn.Parameter/nn.Buffer objects; the output head under
  // NoOpManager and the loss outside the context.
  Torchtune,
  // torch.autograd.graph.save_on_cpu (torch 2.13 torch/autograd/graph.py): every saved tensor,
  // parameters included.
  SaveOnCpu,
};

struct ActivationOffloadConfig {
  bool enabled = false;
  OffloadMethod method = OffloadMethod::Torchtune;
  int64_t min_offload_bytes = 1024;  // torchtune's min_offload_size; save_on_cpu has none (0)
  bool pin_memory = true;            // host copies in pinned memory (the host's caching allocator)
};

}  // namespace oomcast::scenario
