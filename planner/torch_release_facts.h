// What the planner's schedule depends on that changes between PyTorch releases (what autograd
// saves, which attention kernel a module runs, what torch.optim allocates), read from the table
// planner/torch_release_facts.yaml compiled into the binary and picked by the scenario's
// allocator.torch_version. The allocator's own per-release behaviour stays in sim/.
#pragma once

#include <string>

namespace oomcast::planner {

struct TorchReleaseFacts {
  bool softmax_saves_input = false;              // softmax/log_softmax backward keeps the input too
  bool mean_saves_input = false;                 // MeanBackward1 keeps `self`
  bool foreach_adam_denom_out_of_place = false;  // _multi_tensor_adam allocates a second list
  bool multihead_attention_calls_sdpa = false;   // F.multi_head_attention_forward -> SDPA
  bool cpu_sdpa_flash_without_dropout = false;   // SDPA on the CPU: flash unless dropout
  bool select_backward_clones_zeros = false;     // select_backward: zeros + select_scatter
  bool trunc_normal_rejection_masks = false;     // nn.init.trunc_normal_ samples by rejection
};

// The facts of one release (100 * major + minor, as allocator.torch_version packs it).
const TorchReleaseFacts& torch_release_facts(int torch_version);

// Parses a facts table (the YAML's text; `name` is the file errors print): the facts of
// `torch_version`. Throws InputError (file:line:col and key) for a malformed row.
TorchReleaseFacts parse_torch_release_facts(const std::string& text, const std::string& name, int torch_version);

}  // namespace oomcast::planner
