// Reads one op statement of a graph file: a catalogue op (checked against graph_op_table) or a
// generic op with its outputs, saved tensors, gradient rules and temporaries.
#include <algorithm>

#include "base/edit_distance.h"
#include "scenario/graph_file_reader.h"
#include "scenario/graph_op_table.h"
#include "scenario/op_kind.h"

namespace oomcast::scenario::graph {

const Ref* OpStatement::tensor(const std::string& argument) const {
  for (const auto& [name, ref] : tensors) {
    if (name == argument) return &ref;
  }
  return nullptr;
}

const Option* OpStatement::option(const std::string& key) const {
  for (const Option& entry : options) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

std::shared_ptr<const OpStatement> GraphReader::read_op(const YamlNode& item) {
  auto op = std::make_shared<OpStatement>();
  YamlNode kind = item.child("op");
  op->op = kind.as_string();
  const CatalogueOpSpec* spec = find_catalogue_op(op->op);
  if (spec == nullptr) {
    std::vector<std::string> names;
    for (const auto& entry : catalogue_op_specs()) names.emplace_back(entry.name);
    kind.fail("unknown op '" + op->op + "' (a catalogue op or generic; docs/graph-format.md lists them)" +
              did_you_mean(op->op, names));
  }
  op->id = spec->op;
  op->name = item.child("name").is_missing() ? Template::parse(op->op, scope_, item.location())
                                             : read_template(item.child("name"));
  try {
    if (spec->op == CatalogueOp::Generic) {
      read_generic_op(item, *op);
    } else {
      read_catalogue_op(item, *op);
    }
  } catch (const InputError& error) {
    // Name the op in every error about its arguments.
    std::string prefix = "op '" + op->name.text() + "' (" + op->op + "): ";
    if (error.message().rfind("op '", 0) == 0) throw;
    throw InputError(error.where(), error.key(), prefix + error.message());
  }
  return op;
}

void GraphReader::read_catalogue_op(const YamlNode& item, OpStatement& op) {
  const CatalogueOpSpec& spec = *find_catalogue_op(op.op);
  std::vector<std::string> allowed{"op", "name", "out", "shape"};
  for (const auto& argument : spec.tensors) allowed.emplace_back(argument.name);
  for (const auto& option : spec.options) allowed.emplace_back(option.name);
  item.reject_unknown_keys(allowed);
  for (const auto& argument : spec.tensors) {
    YamlNode value = item.child(argument.name);
    if (value.is_missing()) {
      if (!argument.optional) item.fail("op '" + op.name.text() + "' (" + op.op + ") needs '" + argument.name + "'");
      continue;
    }
    op.tensors.emplace_back(argument.name, read_ref(value));
  }
  for (const auto& spec_option : spec.options) {
    YamlNode value = item.child(spec_option.name);
    if (value.is_missing()) {
      if (spec_option.required) item.fail("op '" + op.name.text() + "' (" + op.op + ") needs '" + spec_option.name + "'");
      continue;
    }
    Option option;
    option.key = spec_option.name;
    option.where = value.location();
    switch (spec_option.type) {
      case OptionType::Flag: option.flag = value.as_bool(); break;
      case OptionType::Integer: option.number = read_expr(value); break;
      case OptionType::Real: option.real = value.as_number(0.0, 1.0); break;
      case OptionType::Shape: option.shape = read_shape(value); break;
      case OptionType::DType: option.dtype = read_dtype(value); break;
    }
    op.options.push_back(std::move(option));
  }
  YamlNode out = item.child("out");
  if (out.is_missing()) item.fail("op '" + op.name.text() + "' (" + op.op + ") needs 'out' (the name its result binds)");
  Shape shape = read_shape(item.child("shape"));
  std::vector<Ref> names = read_refs(out);
  if (!spec.many_outputs && names.size() != 1) out.fail("'out' of " + op.op + " is one name");
  for (Ref& name : names) {
    Output output;
    output.name = std::move(name.name);
    output.where = name.where;
    output.shape = shape;
    op.outputs.push_back(std::move(output));
  }
}

Output GraphReader::read_output(const YamlNode& node) {
  if (!node.is_map()) node.fail("an output is a map such as {name: y, shape: [batch_size, 64]}");
  node.reject_unknown_keys({"name", "shape", "dtype", "view_of"});
  Output output;
  output.where = node.location();
  if (node.child("name").is_missing()) node.fail("an output needs a 'name'");
  output.name = read_template(node.child("name"));
  if (node.child("shape").is_missing()) node.fail("output '" + output.name.text() + "' needs a 'shape'");
  output.shape = read_shape(node.child("shape"));
  if (!node.child("dtype").is_missing()) output.dtype = read_dtype(node.child("dtype"));
  if (!node.child("view_of").is_missing()) output.view_of = read_ref(node.child("view_of"));
  return output;
}

std::vector<Temporary> GraphReader::read_temporaries(const YamlNode& list) {
  std::vector<Temporary> out;
  if (list.is_missing()) return out;
  if (!list.is_sequence()) list.fail("'" + list.key() + "' must be a list");
  for (const YamlNode& item : list.items()) {
    if (!item.is_map()) item.fail("a temporary is a map such as {name: workspace, bytes: 1024}");
    item.reject_unknown_keys({"name", "bytes", "shape", "dtype", "after_outputs"});
    Temporary temporary;
    if (item.child("name").is_missing()) item.fail("a temporary needs a 'name'");
    temporary.name = read_template(item.child("name"));
    bool has_bytes = !item.child("bytes").is_missing();
    bool has_shape = !item.child("shape").is_missing();
    if (has_bytes == has_shape) item.fail("a temporary has either 'bytes' or 'shape' (with 'dtype')");
    if (has_bytes) temporary.bytes = read_expr(item.child("bytes"));
    temporary.shape = read_shape(item.child("shape"));
    if (!item.child("dtype").is_missing()) temporary.dtype = read_dtype(item.child("dtype"));
    temporary.after_outputs = item.bool_or("after_outputs", false);
    out.push_back(std::move(temporary));
  }
  return out;
}

std::vector<BackwardStep> GraphReader::read_backward_program(const YamlNode& list) {
  std::vector<BackwardStep> out;
  if (list.is_missing()) return out;
  if (!list.is_sequence()) list.fail("'backward_program' must be a list of {alloc|free|release|grad: NAME}");
  for (const YamlNode& item : list.items()) {
    if (!item.is_map()) item.fail("a backward step is a map such as {alloc: buf0, shape: [batch_size, 64]}");
    item.reject_unknown_keys({"alloc", "free", "release", "grad", "bytes", "shape", "dtype"});
    BackwardStep step;
    int kinds = 0;
    for (auto [key, kind] : {std::pair{"alloc", BackwardStep::Kind::Alloc}, std::pair{"free", BackwardStep::Kind::Free},
                             std::pair{"release", BackwardStep::Kind::Release}, std::pair{"grad", BackwardStep::Kind::Grad}}) {
      if (item.child(key).is_missing()) continue;
      ++kinds;
      step.kind = kind;
      step.name = read_ref(item.child(key));
    }
    if (kinds != 1) item.fail("a backward step has exactly one of alloc, free, release, grad");
    bool has_bytes = !item.child("bytes").is_missing();
    bool has_shape = !item.child("shape").is_missing();
    if (step.kind == BackwardStep::Kind::Alloc && has_bytes == has_shape)
      item.fail("an alloc step has either 'bytes' or 'shape' (with 'dtype')");
    if (step.kind != BackwardStep::Kind::Alloc && (has_bytes || has_shape || !item.child("dtype").is_missing()))
      item.fail("only an alloc step has a size (a gradient has its input's size)");
    if (has_bytes) step.bytes = read_expr(item.child("bytes"));
    step.shape = read_shape(item.child("shape"));
    if (!item.child("dtype").is_missing()) step.dtype = read_dtype(item.child("dtype"));
    out.push_back(std::move(step));
  }
  return out;
}

void GraphReader::read_generic_op(const YamlNode& item, OpStatement& op) {
  item.reject_unknown_keys({"op", "name", "aten", "kind", "inputs", "outputs", "saves", "grads", "forward_temporaries",
                            "backward_temporaries", "backward_program", "cublas"});
  op.aten = item.string_or("aten", "");
  if (!item.child("kind").is_missing()) op.kind = item.child("kind").as_choice(op_kind_names());
  op.inputs = read_refs(item.child("inputs"));
  YamlNode outputs = item.child("outputs");
  if (outputs.is_missing()) item.fail("generic op '" + op.name.text() + "' needs 'outputs' ([] when it makes none)");
  if (!outputs.is_sequence()) outputs.fail("'outputs' must be a list");
  for (const YamlNode& output : outputs.items()) op.outputs.push_back(read_output(output));
  if (op.inputs.size() > 4096 || op.outputs.size() > 4096) item.fail("an op has at most 4096 inputs and outputs");
  op.saves = read_refs(item.child("saves"));
  YamlNode grads = item.child("grads");
  if (!grads.is_missing()) {
    std::vector<YamlNode> items = grads.is_sequence() ? grads.items() : std::vector<YamlNode>{grads};
    if (items.size() != op.inputs.size()) {
      grads.fail("'grads' has " + std::to_string(items.size()) + " entries for " + std::to_string(op.inputs.size()) +
                 " inputs (one of new, pass, none per input)");
    }
    for (const YamlNode& rule : items) {
      std::string text = rule.as_choice({"new", "pass", "none"});
      op.grads.push_back(text == "new" ? GradSpec::New : text == "pass" ? GradSpec::Pass : GradSpec::None);
    }
  }
  op.forward_temporaries = read_temporaries(item.child("forward_temporaries"));
  op.backward_temporaries = read_temporaries(item.child("backward_temporaries"));
  op.backward_program = read_backward_program(item.child("backward_program"));
  if (!op.backward_program.empty() && (!grads.is_missing() || !op.backward_temporaries.empty()))
    item.child("backward_program").fail("'backward_program' replaces 'grads' and 'backward_temporaries': give one or the other");
  if (!item.child("cublas").is_missing()) op.cublas = item.child("cublas").as_bool() ? 1 : 0;
}

}  // namespace oomcast::scenario::graph
