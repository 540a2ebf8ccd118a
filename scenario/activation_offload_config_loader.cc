// The `activation_offloading` section (scenario/activation_offload_config_loader.h).
#include "scenario/activation_offload_config_loader.h"

#include <string>

namespace oomcast::scenario {

void read_activation_offloading_section(const YamlNode& node, Scenario& scenario) {
  if (node.is_missing()) return;
  ActivationOffloadConfig& config = scenario.activation_offloading;
  if (node.is_scalar()) {
    config.enabled = node.as_bool();
  } else {
    node.require_map();
    node.reject_unknown_keys({"enabled", "method", "min_offload_bytes", "pin_memory", "use_streams"});
    config.enabled = node.bool_or("enabled", true);
    YamlNode method = node.child("method");
    if (!method.is_missing()) {
      config.method = method.as_choice({"torchtune", "save_on_cpu"}) == "torchtune" ? OffloadMethod::Torchtune
                                                                                     : OffloadMethod::SaveOnCpu;
    }
    config.min_offload_bytes = config.method == OffloadMethod::Torchtune ? 1024 : 0;
    YamlNode min_bytes = node.child("min_offload_bytes");
    if (!min_bytes.is_missing()) config.min_offload_bytes = min_bytes.as_integer(0, INT64_C(1) << 40);
    config.pin_memory = node.bool_or("pin_memory", true);
    YamlNode streams = node.child("use_streams");
    if (!streams.is_missing() && streams.as_bool()) {
      // torchtune's default on torch >= 2.5: copies on a side stream, up to max_fwd_stash_size
      // device tensors kept alive in forward and the previous node's copies in backward.
      streams.fail("'activation_offloading.use_streams' true (the side-stream form) is not modelled; "
                   "the single-stream form (use_streams: false) is");
    }
  }
  if (!config.enabled) return;
  if (scenario.job.job.kind != JobKind::Train) node.fail("'activation_offloading' applies to job train");
  if (scenario.checkpointing.mode != CheckpointMode::None) {
    node.fail("'activation_offloading' with checkpointing is not modelled yet (the checkpoint's saved inputs "
              "would be offloaded and recomputed blocks not): use checkpointing: none");
  }
  if (scenario.compile.enabled) node.fail("'activation_offloading' with compile is not modelled");
  if (!scenario.cuda_graphs.empty()) node.fail("'activation_offloading' with cuda_graphs is not modelled");
  const ParallelEngine engine = scenario.parallel.engine;
  if (engine != ParallelEngine::None && engine != ParallelEngine::Ddp) {
    node.fail("'activation_offloading' is modelled alone and under DDP, not under FSDP, FSDP2 or DeepSpeed "
              "(their parameters are saved as unsharded views)");
  }
}

}  // namespace oomcast::scenario
