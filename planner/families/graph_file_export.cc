// export_graph_file(): a LayerGraph as a concrete graph file of generic ops. Tensor variables are
// named t<id> so that every tensor has its own name; op names keep the graph's module paths.
#include "planner/families/graph_file_export.h"

#include <sstream>

namespace oomcast::planner::families {

namespace {

std::string variable(TensorId id) { return "t" + std::to_string(id); }

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string tensor_list(const std::vector<TensorId>& tensors) {
  std::string out = "[";
  for (size_t i = 0; i < tensors.size(); ++i) out += (i ? ", " : "") + variable(tensors[i]);
  return out + "]";
}

const char* grad_name(GradRule rule) {
  switch (rule) {
    case GradRule::None: return "none";
    case GradRule::New: return "new";
    case GradRule::PassThrough: return "pass";
  }
  return "new";
}

void write_transients(std::ostream& out, const char* key, const std::vector<Transient>& transients,
                      const LayerGraph& graph) {
  if (transients.empty()) return;
  out << ",\n     " << key << ": [";
  for (size_t i = 0; i < transients.size(); ++i) {
    const Transient& t = transients[i];
    out << (i ? ", " : "") << "{name: " << quoted("tmp" + std::to_string(i) + "." + graph.names[t.name])
        << ", bytes: " << t.bytes << (t.after_outputs ? ", after_outputs: true" : "") << "}";
  }
  out << "]";
}

}  // namespace

std::string export_graph_file(const LayerGraph& graph, const std::string& name) {
  std::ostringstream out;
  out << "# Exported by oomcast from the built layer graph (concrete sizes and dtypes).\n";
  out << "oomcast_graph: 1\nname: " << quoted(name) << "\nparameters:\n";
  for (size_t p = 0; p < graph.parameters.size(); ++p) {
    const TensorDesc& desc = graph.tensors[graph.parameters[p]];
    out << "  - {name: " << variable(graph.parameters[p]) << ", shape: [";
    const auto& shape = graph.parameter_shapes[p];
    for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
    out << "], dtype: " << dtype_name(desc.dtype) << (desc.requires_grad ? "" : ", requires_grad: false") << "}\n";
  }
  out << (graph.buffers.empty() ? "buffers: []\n" : "buffers:\n");
  for (TensorId id : graph.buffers) {
    out << "  - {name: " << variable(id) << ", shape: [" << graph.tensors[id].numel
        << "], dtype: " << dtype_name(graph.tensors[id].dtype) << "}\n";
  }
  out << "inputs:\n";
  for (TensorId id : graph.inputs) {
    out << "  - {name: " << variable(id) << ", shape: [" << graph.tensors[id].numel
        << "], dtype: " << dtype_name(graph.tensors[id].dtype) << "}\n";
  }
  out << "forward:\n";
  int32_t open_unit = -1;
  for (const OpNode& op : graph.ops) {
    if (op.unit != open_unit) {
      if (op.unit >= 0) out << "  - module: unit" << op.unit << "\n    checkpoint_unit: true\n    body:\n";
      open_unit = op.unit;
    }
    const std::string indent = open_unit >= 0 ? "      " : "  ";
    out << indent << "- {op: generic, name: " << quoted(graph.names[op.name]) << ", kind: " << op_kind_name(op.kind)
        << ", cublas: " << (op.uses_cublas ? "true" : "false") << ",\n"
        << indent << "   inputs: " << tensor_list(op.inputs) << ", grads: [";
    for (size_t i = 0; i < op.input_grads.size(); ++i) out << (i ? ", " : "") << grad_name(op.input_grads[i]);
    out << "],\n" << indent << "   outputs: [";
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      const TensorDesc& desc = graph.tensors[op.outputs[i]];
      out << (i ? ", " : "") << "{name: " << variable(op.outputs[i]) << ", shape: [" << desc.numel << "]";
      if (desc.storage != op.outputs[i]) {
        out << ", view_of: " << variable(desc.storage);
      } else {
        out << ", dtype: " << dtype_name(desc.dtype);
      }
      out << "}";
    }
    out << "],\n" << indent << "   saves: " << tensor_list(op.saved);
    write_transients(out, "forward_temporaries", op.forward_transients, graph);
    write_transients(out, "backward_temporaries", op.backward_transients, graph);
    out << "}\n";
  }
  out << "outputs:\n";
  for (const auto& [key, tensor] : graph.named_outputs) out << "  " << key << ": " << variable(tensor) << "\n";
  return out.str();
}

}  // namespace oomcast::planner::families
