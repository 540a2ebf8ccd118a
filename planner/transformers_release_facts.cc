// The transformers release facts as a table: each row is a fact, the first and last release it
// holds for (100 * major + minor; 0 = open), and where it was read.
#include "planner/transformers_release_facts.h"

#include <map>

namespace oomcast::planner {

namespace {

struct FactRow {
  bool TransformersReleaseFacts::*fact;
  int first;  // the first release the fact holds for
  int last;   // the last one (0: every later release)
  const char* source;
};

const FactRow kRows[] = {
    {&TransformersReleaseFacts::dynamic_cache_copies_prefill, 456, 0,
     "cache_utils.py DynamicLayer.update: 4.55.4 sets self.keys = key_states on the first update; 4.56.0 and "
     "5.24.0 lazy_initialization makes torch.tensor([]) and torch.cat([self.keys, key_states], dim=-2)"},
    {&TransformersReleaseFacts::scaled_word_embedding, 500, 0,
     "models/gemma*/modeling_gemma*.py: 4.56.0 Gemma2Model.forward multiplies inputs_embeds by normalizer; "
     "5.24.0 Gemma2TextScaledWordEmbedding.forward returns embedding * embed_scale (5.0-5.23 not read)"},
    {&TransformersReleaseFacts::stacked_experts, 500, 0,
     "models/{mixtral,qwen3_moe}/modeling_*.py: 4.56.0 experts = nn.ModuleList of per-expert MLPs; 5.24.0 "
     "*Experts with 3-D gate_up_proj/down_proj under @use_experts_implementation, whose default is grouped_mm "
     "(modeling_utils.py get_correct_experts_implementation; integrations/moe.py grouped_mm_experts_forward; "
     "5.0-5.23 not read)"},
};

TransformersReleaseFacts facts_of(int version) {
  TransformersReleaseFacts facts;
  for (const FactRow& row : kRows) {
    if (version >= row.first && (row.last == 0 || version <= row.last)) facts.*row.fact = true;
  }
  return facts;
}

}  // namespace

const TransformersReleaseFacts& transformers_release_facts(int transformers_version) {
  // Built once per release; the planner asks for a handful of releases at most.
  static thread_local std::map<int, TransformersReleaseFacts> cache;
  auto found = cache.find(transformers_version);
  if (found == cache.end()) found = cache.emplace(transformers_version, facts_of(transformers_version)).first;
  return found->second;
}

}  // namespace oomcast::planner
