// The names of tensor categories, as reports and JSON print them.
#include "planner/planned_trace.h"

namespace oomcast::planner {

const char* category_name(TensorCategory category) {
  switch (category) {
    case TensorCategory::Parameter: return "parameter";
    case TensorCategory::Gradient: return "gradient";
    case TensorCategory::OptimizerState: return "optimizer_state";
    case TensorCategory::Activation: return "activation";
    case TensorCategory::Temporary: return "temporary";
    case TensorCategory::Workspace: return "workspace";
    case TensorCategory::Input: return "input";
    case TensorCategory::Buffer: return "buffer";
    case TensorCategory::Communication: return "communication";
  }
  return "?";
}

}  // namespace oomcast::planner
