// Temporaries the backward formula of a generic (dispatcher) op makes beyond the gradients it
// returns, by aten name: what a graph file's generic op gets without writing
// `backward_temporaries` itself. Measured with validate/capture.py's allocation hook (torch 2.13
// CPU); the CUDA kernels run the same formulas (derivatives.yaml).
#pragma once

#include <string>
#include <vector>

#include "planner/ops/graph_builder.h"

namespace oomcast::planner::ops {

// `aten` is the base name ("div"), `grads` the rule per input. Each temporary dies before the
// gradients are made.
std::vector<Transient> generic_backward_temporaries(GraphBuilder& g, const std::string& leaf, const std::string& aten,
                                                    const std::vector<TensorId>& inputs,
                                                    const std::vector<TensorId>& outputs,
                                                    const std::vector<GradRule>& grads);

}  // namespace oomcast::planner::ops
