// The `loss` section (scenario/loss_config_loader.h).
#include "scenario/loss_config_loader.h"

#include <algorithm>
#include <string>

namespace oomcast::scenario {

void read_loss_section(const YamlNode& node, Scenario& scenario) {
  if (node.is_missing()) return;
  if (node.is_scalar()) node.fail("'loss' is a map: loss: {chunks: 8}");
  node.reject_unknown_keys({"chunks", "fused_linear"});
  YamlNode fused = node.child("fused_linear");
  if (!fused.is_missing() && fused.as_bool()) {
    fused.fail("'loss.fused_linear' (Liger's fused linear cross-entropy) is not modelled yet; loss.chunks is");
  }
  YamlNode chunks = node.child("chunks");
  if (chunks.is_missing()) return;
  scenario.loss.chunks = chunks.as_integer(1, 1024);
  if (scenario.loss.chunks == 1) return;
  // Built by the rotary decoders of planner/families/llama.cc (torchtune's TransformerDecoder
  // layout); the others have no chunked output.
  if (scenario.model.family != "llama") {
    chunks.fail("'loss.chunks' applies to the Llama-style decoders (family llama), not " + scenario.model.family);
  }
  if (scenario.job.job.kind != JobKind::Train) chunks.fail("'loss.chunks' applies to job train");
  if (scenario.seq_len % scenario.loss.chunks != 0) {
    chunks.fail("'loss.chunks' " + std::to_string(scenario.loss.chunks) + " does not divide seq_len " +
                std::to_string(scenario.seq_len) + " (h.chunk would make unequal chunks, which is not modelled)");
  }
  const auto& held = scenario.loop.caller_held_outputs;
  if (std::find(held.begin(), held.end(), "logits") != held.end()) {
    chunks.fail("'loss.chunks' returns a list of chunk logits, which the recipe deletes after the loss: "
                "remove logits from training_loop.caller_held_outputs");
  }
  auto softcap = scenario.model.options.find("final_logit_softcap");
  if (softcap != scenario.model.options.end() && softcap->second == "true") {
    chunks.fail("'loss.chunks' with final logit soft-capping is not modelled");
  }
  auto experts = scenario.model.dims.find("experts");
  if (experts != scenario.model.dims.end() && experts->second > 0) {
    chunks.fail("'loss.chunks' with a mixture-of-experts auxiliary loss is not modelled");
  }
}

}  // namespace oomcast::scenario
