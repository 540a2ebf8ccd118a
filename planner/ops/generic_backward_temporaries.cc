// Generic ops' backward temporaries by aten name (generic_backward_temporaries.h).
#include "planner/ops/generic_backward_temporaries.h"

namespace oomcast::planner::ops {

std::vector<Transient> generic_backward_temporaries(GraphBuilder& g, const std::string& leaf, const std::string& aten,
                                                    const std::vector<TensorId>& inputs,
                                                    const std::vector<TensorId>& outputs,
                                                    const std::vector<GradRule>& grads) {
  std::vector<Transient> temporaries;
  if (outputs.empty()) return temporaries;
  const uint64_t out_bytes = g.tensor(outputs[0]).bytes();
  // div.Tensor's divisor gradient, -grad * ((self / other) / other) (derivatives.yaml
  // div_tensor_other_backward): -grad, self / other and its quotient by other, then their product,
  // each the output's size, all alive at once before the product is reduced to other's shape (or
  // is the gradient); then self's gradient. A hand-written softmax's e / e.sum() pays four S x S
  // tensors here. Probe: a / b with a [8, 64] and b [8, 1] or [8, 64], both requiring grad:
  // +2048 x 4, three freed, then the gradients.
  if (aten == "div" && inputs.size() >= 2 && grads.size() >= 2 && grads[1] != GradRule::None) {
    for (const char* what : {"neg_grad", "quotient", "quotient_by_other", "product"}) {
      temporaries.push_back(Transient{g.intern(g.qualified(leaf + ".div_backward_" + what)), out_bytes, false, true});
    }
  }
  return temporaries;
}

}  // namespace oomcast::planner::ops
