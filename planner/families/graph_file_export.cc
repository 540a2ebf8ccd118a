// export_graph_file(): a LayerGraph as a concrete graph file of generic ops. Parameters, buffers
// and inputs keep their names; every other tensor is t<id>, so that each has its own name; op
// names keep the graph's module paths.
#include "planner/families/graph_file_export.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace oomcast::planner::families {

using scenario::op_kind_name;

namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Parameters, buffers and inputs keep their module paths (so trainable patterns, LoRA targets
// and reports name them as the original does); every other tensor is t<id>.
class Variables {
 public:
  explicit Variables(const LayerGraph& graph) {
    std::vector<TensorId> named = graph.parameters;
    named.insert(named.end(), graph.buffers.begin(), graph.buffers.end());
    named.insert(named.end(), graph.inputs.begin(), graph.inputs.end());
    std::set<std::string> taken;
    for (TensorId id : named) {
      const std::string& name = graph.names[graph.tensors[id].name];
      if (name.empty() || looks_generated(name) || !taken.insert(name).second) continue;
      names_[id] = name;
    }
  }
  std::string operator()(TensorId id) const {
    auto found = names_.find(id);
    return found != names_.end() ? quoted(found->second) : "t" + std::to_string(id);
  }

 private:
  static bool looks_generated(const std::string& name) {
    return name.size() > 1 && name[0] == 't' &&
           std::all_of(name.begin() + 1, name.end(), [](char c) { return c >= '0' && c <= '9'; });
  }
  std::map<TensorId, std::string> names_;
};

std::string tensor_list(const std::vector<TensorId>& tensors, const Variables& variable) {
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

std::string export_graph_file(const LayerGraph& graph, const std::string& name, const ExportedSize& size) {
  const Variables variable(graph);
  std::ostringstream out;
  out << "# Exported by oomcast from the built layer graph (concrete sizes and dtypes).\n";
  if (!size.built_for.empty()) out << "# Built for " << size.built_for << ": it plans like the model only there.\n";
  out << "oomcast_graph: 1\nname: " << quoted(name) << "\n";
  if (!size.key.empty()) {
    out << "sizes:\n  " << size.key << ": {default: " << size.value << ", max: " << size.value << "}\n";
  }
  out << "parameters:\n";
  // The constructor's temporaries at their place in the parameter order; `param` keeps the
  // dtype the scenario builds parameters in (fp32 under fp32_then_cast), as the family plans it.
  auto write_temporaries_at = [&](size_t position) {
    for (const ConstructionTemporary& temporary : graph.construction_temporaries) {
      if (temporary.after_parameters != position) continue;
      out << "  - {construction_temporary: " << quoted(graph.names[temporary.name]) << ", shape: [" << temporary.numel
          << "], dtype: " << (temporary.dtype ? dtype_name(*temporary.dtype) : "param") << "}\n";
    }
  };
  for (size_t p = 0; p < graph.parameters.size(); ++p) {
    write_temporaries_at(p);
    const TensorDesc& desc = graph.tensors[graph.parameters[p]];
    out << "  - {name: " << variable(graph.parameters[p]) << ", shape: [";
    const auto& shape = graph.parameter_shapes[p];
    for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
    out << "], dtype: " << dtype_name(desc.dtype) << (desc.requires_grad ? "" : ", requires_grad: false") << "}\n";
  }
  write_temporaries_at(graph.parameters.size());
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
        << indent << "   inputs: " << tensor_list(op.inputs, variable) << ", grads: [";
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
    out << "],\n" << indent << "   saves: " << tensor_list(op.saved, variable);
    write_transients(out, "forward_temporaries", op.forward_transients, graph);
    write_transients(out, "backward_temporaries", op.backward_transients, graph);
    out << "}\n";
  }
  out << "outputs:\n";
  for (const auto& [key, tensor] : graph.named_outputs) out << "  " << key << ": " << variable(tensor) << "\n";
  return out.str();
}

}  // namespace oomcast::planner::families
