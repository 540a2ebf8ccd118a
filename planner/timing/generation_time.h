// The step-time model of model.generate() (`job: generate`): the prefill forward over the
// prompt, then one decode forward per new token. A decode step at a small batch is bound by
// memory bandwidth: every weight is read once per step (the linears' operands), and attention
// reads the whole KV cache so far; a torch.cat-grown cache also copies itself one token longer
// every step, grouped-query attention repeats it to every head, beam search reorders it.
// docs/step-time.md states the model and compares it with a published decode throughput.
#pragma once

#include <cstdint>

#include "planner/layer_graph.h"
#include "planner/timing/step_time.h"
#include "scenario/scenario.h"

namespace oomcast::planner {

// What the cache traffic of a decode step depends on (generate_job.cc knows it).
struct GenerationShape {
  int64_t sequences = 1;             // batch x num_return_sequences (or x num_beams)
  int64_t prompt = 0;
  int64_t new_tokens = 0;
  int64_t layers = 0;
  uint64_t cache_bytes_per_token = 0;     // one layer's K (or V) per position, all sequences
  uint64_t repeated_bytes_per_token = 0;  // repeat_kv's copy per position (0 without grouped-query attention)
  bool dynamic_cache = true;              // torch.cat-grown; false: static, attention reads max_cache_len
  int64_t max_cache_len = 0;
  bool beam_reorder = false;              // beam search: index_select copies the cache every step
  bool decode_replayed = false;           // decode steps replay a captured CUDA graph (no CPU dispatch)
};

// prefill + (new_tokens - 1) decode steps; the first new token comes from the prefill.
StepTime estimate_generation_time(const scenario::Scenario& scenario, const LayerGraph& prefill, const LayerGraph& decode,
                                  const GenerationShape& shape);

}  // namespace oomcast::planner
