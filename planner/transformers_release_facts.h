// What the planner's families and generate job depend on that changes between Hugging Face
// transformers releases (how the KV cache holds the prefill, where Gemma scales its
// embeddings), picked by the scenario's transformers_version. One row per fact in
// transformers_release_facts.cc, each with the release range it holds for and its source.
#pragma once

namespace oomcast::planner {

struct TransformersReleaseFacts {
  // DynamicCache's first update copies the prefill's K and V (torch.cat onto an empty tensor)
  // instead of keeping the tensors the layer computed.
  bool dynamic_cache_copies_prefill = false;
  // Gemma's embed_tokens is a ScaledWordEmbedding: the scaled output is the embedding the model
  // keeps, the unscaled lookup dies inside it (before: the model scaled inputs_embeds itself).
  bool scaled_word_embedding = false;
  // The mixture-of-experts blocks keep their experts as 3-D parameters (experts.gate_up_proj
  // [E, 2F, H], experts.down_proj [E, H, F]) under module `mlp`, and run them with grouped_mm
  // on the tokens sorted by expert (before: one MLP module per expert, looped).
  bool stacked_experts = false;
};

// The facts of one release (100 * major + minor, as transformers_version packs it).
const TransformersReleaseFacts& transformers_release_facts(int transformers_version);

}  // namespace oomcast::planner
