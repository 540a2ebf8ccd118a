// Reads a graph file (docs/graph-format.md) into a checked GraphFile: top-level keys, sizes,
// dims, parameter/buffer/input declarations and forward statements (ops in graph_file_ops.cc).
#include "scenario/graph_file.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include "base/edit_distance.h"
#include "scenario/compile_config_loader.h"
#include "scenario/graph_file_reader.h"
#include "scenario/outside_allocator_table.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario {

namespace graph {

namespace {

bool is_identifier(const std::string& text) {
  if (text.empty() || !(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_')) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

Template GraphReader::read_template(const YamlNode& node) {
  if (!node.is_scalar()) node.fail("'" + node.key() + "' must be a name");
  std::string text = node.as_string();
  if (text.empty()) node.fail("'" + node.key() + "' must not be empty");
  if (text.size() > 1000) node.fail("'" + node.key() + "' is longer than 1000 characters");
  return Template::parse(text, scope_, node.location());
}

Ref GraphReader::read_ref(const YamlNode& node) {
  Ref ref;
  ref.name = read_template(node);
  ref.where = node.location();
  return ref;
}

std::vector<Ref> GraphReader::read_refs(const YamlNode& node) {
  std::vector<Ref> refs;
  if (node.is_missing()) return refs;
  if (node.is_scalar()) {
    refs.push_back(read_ref(node));
    return refs;
  }
  if (!node.is_sequence()) node.fail("'" + node.key() + "' must be a list of tensor names");
  for (const YamlNode& item : node.items()) refs.push_back(read_ref(item));
  return refs;
}

Expr GraphReader::read_expr(const YamlNode& node) {
  if (!node.is_scalar()) node.fail("'" + node.key() + "' must be an integer expression");
  return Expr::parse(node.as_string(), scope_, node.location());
}

Shape GraphReader::read_shape(const YamlNode& node) {
  Shape shape;
  if (node.is_missing()) return shape;
  if (!node.is_sequence()) node.fail("'" + node.key() + "' must be a list of dimensions, e.g. [batch_size, seq_len]");
  shape.present = true;
  std::vector<YamlNode> items = node.items();
  if (items.size() > 16) node.fail("a shape has at most 16 dimensions");
  for (const YamlNode& item : items) {
    shape.dims.push_back(read_expr(item));
    const Expr& dim = shape.dims.back();
    if (dim.is_constant()) {
      int64_t value = dim.eval(Environment{});
      if (value < 0 || value > kMaxDimension) item.fail("dimension " + std::to_string(value) + " is outside 0 .. 2^40");
    }
  }
  return shape;
}

DTypeSpec GraphReader::read_dtype(const YamlNode& node) {
  static const std::vector<std::string> names{"param", "float32", "float16", "bfloat16", "int64", "int32", "bool", "uint8"};
  static const DTypeSpec specs[] = {DTypeSpec::Param, DTypeSpec::Float32, DTypeSpec::Float16, DTypeSpec::BFloat16,
                                    DTypeSpec::Int64, DTypeSpec::Int32,   DTypeSpec::Bool,    DTypeSpec::UInt8};
  std::string text = node.as_string();
  // PyTorch's spellings, as a capture may write them.
  if (text.rfind("torch.", 0) == 0) text = text.substr(6);
  if (text == "float") text = "float32";
  if (text == "half") text = "float16";
  if (text == "long") text = "int64";
  if (text == "int") text = "int32";
  for (size_t i = 0; i < names.size(); ++i) {
    if (text == names[i]) return specs[i];
  }
  node.fail("unknown dtype '" + text + "' (param, float32, float16, bfloat16, int64, int32, bool, uint8)" +
            did_you_mean(text, names));
}

void GraphReader::count_statement(const YamlNode& node) {
  if (++statements_ > kMaxStatements) node.fail("a graph file has at most 1000000 statements (use repeat)");
}

uint32_t GraphReader::push_index(const YamlNode& repeat) {
  YamlNode index = repeat.child("index");
  if (scope_.indices.size() >= kMaxRepeatDepth) repeat.fail("repeats nest at most 8 deep");
  auto slot = static_cast<uint32_t>(kFirstIndex + scope_.indices.size());
  std::string name = index.is_missing() ? "" : index.as_string();
  if (!index.is_missing()) {
    if (!is_identifier(name)) index.fail("'index' must be a name such as i");
    for (const auto& [other, ignored] : scope_.indices) {
      if (other == name) index.fail("repeat index '" + name + "' is already the index of an enclosing repeat");
    }
  }
  scope_.indices.emplace_back(name, slot);
  return slot;
}

Expr GraphReader::read_count(const YamlNode& node) {
  Expr count = read_expr(node);
  if (count.uses_slot(kBatchSize) || count.uses_slot(kSeqLen) || count.uses_slot(kImageSize)) {
    node.fail("a repeat count depends only on dims and integers, not on the scenario's sizes");
  }
  if (count.is_constant()) {
    int64_t value = count.eval(Environment{});
    if (value < 1 || value > kMaxRepeat) node.fail("repeat count " + std::to_string(value) + " is outside 1 .. 100000");
  }
  return count;
}

std::vector<Statement> GraphReader::read_declarations(const YamlNode& list, DeclarationKind kind, int depth) {
  std::vector<Statement> out;
  if (list.is_missing() || list.kind() == YamlNode::Kind::Null) return out;
  if (!list.is_sequence()) list.fail("'" + list.key() + "' must be a list");
  if (depth > 16) list.fail("declarations nest at most 16 deep");
  for (const YamlNode& item : list.items()) {
    count_statement(item);
    if (!item.is_map()) item.fail("each entry is a map such as {name: w, shape: [4, 4]}");
    Statement statement;
    statement.where = item.location();
    if (!item.child("repeat").is_missing()) {
      item.reject_unknown_keys({"repeat", "index", "body"});
      statement.kind = Statement::Kind::Repeat;
      statement.count = read_count(item.child("repeat"));
      statement.index_slot = push_index(item);
      if (item.child("body").is_missing()) item.fail("a repeat needs a 'body'");
      statement.body = read_declarations(item.child("body"), kind, depth + 1);
      scope_.indices.pop_back();
      out.push_back(std::move(statement));
      continue;
    }
    auto decl = std::make_shared<TensorDecl>();
    if (kind == DeclarationKind::Parameter && !item.child("construction_temporary").is_missing()) {
      item.reject_unknown_keys({"construction_temporary", "shape", "dtype"});
      decl->construction_temporary = true;
      decl->name = read_template(item.child("construction_temporary"));
      if (item.child("shape").is_missing()) {
        item.fail("construction temporary '" + decl->name.text() + "' needs a 'shape' ([] for a scalar)");
      }
      decl->shape = read_shape(item.child("shape"));
      if (!item.child("dtype").is_missing()) decl->dtype = read_dtype(item.child("dtype"));
      statement.kind = Statement::Kind::Tensor;
      statement.tensor = std::move(decl);
      out.push_back(std::move(statement));
      continue;
    }
    switch (kind) {
      case DeclarationKind::Parameter:
        item.reject_unknown_keys({"name", "shape", "dtype", "requires_grad", "tied_to", "construction_temporary"});
        break;
      case DeclarationKind::Buffer:
        item.reject_unknown_keys({"name", "shape", "dtype", "when"});
        break;
      case DeclarationKind::Input:
        item.reject_unknown_keys({"name", "shape", "dtype"});
        break;
    }
    if (item.child("name").is_missing()) item.fail("each entry needs a 'name'");
    decl->name = read_template(item.child("name"));
    if (kind == DeclarationKind::Parameter && !item.child("tied_to").is_missing()) {
      if (!item.child("shape").is_missing()) item.child("shape").fail("a tied parameter takes its shape from 'tied_to'");
      decl->tied_to = read_ref(item.child("tied_to"));
    } else {
      if (item.child("shape").is_missing()) item.fail("'" + decl->name.text() + "' needs a 'shape' ([] for a scalar)");
      decl->shape = read_shape(item.child("shape"));
    }
    YamlNode dtype = item.child("dtype");
    if (kind != DeclarationKind::Parameter && dtype.is_missing()) {
      item.fail("'" + decl->name.text() + "' needs a 'dtype' (param for the parameters' dtype)");
    }
    if (!dtype.is_missing()) decl->dtype = read_dtype(dtype);
    decl->requires_grad = item.bool_or("requires_grad", true);
    YamlNode when = item.child("when");
    if (!when.is_missing()) {
      when.reject_unknown_keys({"attention"});
      if (!when.is_map() || when.child("attention").is_missing()) when.fail("'when' is a map such as {attention: eager}");
      decl->when_attention = when.child("attention").as_choice({"eager", "sdpa_math", "flash", "mem_efficient"});
    }
    statement.kind = Statement::Kind::Tensor;
    statement.tensor = std::move(decl);
    out.push_back(std::move(statement));
  }
  return out;
}

std::vector<Statement> GraphReader::read_body(const YamlNode& list, int depth) {
  std::vector<Statement> out;
  if (list.is_missing() || list.kind() == YamlNode::Kind::Null) return out;
  if (!list.is_sequence()) list.fail("'" + list.key() + "' must be a list of statements");
  if (depth > 64) list.fail("statements nest at most 64 deep");
  for (const YamlNode& item : list.items()) out.push_back(read_statement(item, depth));
  return out;
}

Statement GraphReader::read_statement(const YamlNode& item, int depth) {
  count_statement(item);
  if (!item.is_map()) item.fail("a statement is a map with one of op, module, frame, hold, repeat");
  Statement statement;
  statement.where = item.location();
  if (!item.child("op").is_missing()) {
    statement.kind = Statement::Kind::Op;
    statement.op = read_op(item);
    return statement;
  }
  if (!item.child("module").is_missing()) {
    item.reject_unknown_keys({"module", "checkpoint_unit", "checkpoint", "frame", "body"});
    statement.kind = Statement::Kind::Module;
    statement.module = read_template(item.child("module"));
    statement.checkpoint_unit = item.bool_or("checkpoint_unit", false);
    YamlNode checkpoint = item.child("checkpoint");
    if (!checkpoint.is_missing()) {
      const std::string how = checkpoint.is_scalar() ? checkpoint.as_string() : "";
      if (how == "reentrant") {
        statement.model_checkpoint = Statement::ModelCheckpoint::Reentrant;
      } else if (how == "non_reentrant") {
        statement.model_checkpoint = Statement::ModelCheckpoint::NonReentrant;
      } else {
        checkpoint.fail("'checkpoint' must be reentrant or non_reentrant (torch.utils.checkpoint's use_reentrant)");
      }
      statement.checkpoint_unit = true;
    }
    if (statement.checkpoint_unit && in_unit_) {
      item.child(checkpoint.is_missing() ? "checkpoint_unit" : "checkpoint").fail("checkpoint units do not nest");
    }
    statement.frame = !item.child("frame").is_missing();
    statement.held = read_refs(item.child("frame"));
    bool outer_unit = in_unit_;
    in_unit_ = in_unit_ || statement.checkpoint_unit;
    statement.body = read_body(item.child("body"), depth + 1);
    in_unit_ = outer_unit;
    return statement;
  }
  if (!item.child("frame").is_missing()) {
    item.reject_unknown_keys({"frame", "body"});
    statement.kind = Statement::Kind::Frame;
    statement.frame = true;
    statement.held = read_refs(item.child("frame"));
    statement.body = read_body(item.child("body"), depth + 1);
    return statement;
  }
  if (!item.child("hold").is_missing()) {
    item.reject_unknown_keys({"hold"});
    statement.kind = Statement::Kind::Hold;
    statement.held = read_refs(item.child("hold"));
    return statement;
  }
  if (!item.child("repeat").is_missing()) {
    item.reject_unknown_keys({"repeat", "index", "body"});
    statement.kind = Statement::Kind::Repeat;
    statement.count = read_count(item.child("repeat"));
    statement.index_slot = push_index(item);
    if (item.child("body").is_missing()) item.fail("a repeat needs a 'body'");
    statement.body = read_body(item.child("body"), depth + 1);
    scope_.indices.pop_back();
    return statement;
  }
  std::vector<std::string> keys = item.keys();
  item.fail("a statement needs one of op, module, frame, hold, repeat" +
            (keys.empty() ? std::string() : did_you_mean(keys[0], {"op", "module", "frame", "hold", "repeat"})));
}

void GraphReader::read_sizes(const YamlNode& sizes) {
  if (sizes.is_missing()) return;
  sizes.reject_unknown_keys({"seq_len", "image_size"});
  for (const std::string& key : sizes.keys()) {
    YamlNode entry = sizes.child(key);
    if (file_.seq_len || file_.image_size) entry.fail("a graph file uses seq_len or image_size, not both");
    (key == "seq_len" ? file_.seq_len : file_.image_size) = true;
    file_.size_where = entry.location();
    if (entry.is_scalar()) {
      file_.default_size = entry.as_integer(1, 1 << 24);
      continue;
    }
    entry.reject_unknown_keys({"default", "max"});
    if (entry.child("default").is_missing()) entry.fail("'" + key + "' needs a 'default'");
    file_.default_size = entry.child("default").as_integer(1, 1 << 24);
    file_.max_size = entry.integer_or("max", 0, 1, 1 << 24);
    if (file_.max_size > 0 && file_.default_size > file_.max_size) {
      entry.child("default").fail("default " + std::to_string(file_.default_size) + " exceeds max " +
                                  std::to_string(file_.max_size));
    }
  }
  scope_.seq_len = file_.seq_len;
  scope_.image_size = file_.image_size;
}

void GraphReader::read_dims(const YamlNode& dims) {
  if (dims.is_missing()) return;
  dims.require_map();
  for (const std::string& key : dims.keys()) {
    YamlNode value = dims.child(key);
    if (!is_identifier(key)) value.fail("dim names are identifiers (letters, digits, _), got '" + key + "'");
    if (key == "batch_size" || key == "seq_len" || key == "image_size") value.fail("'" + key + "' is a scenario size, not a dim");
    // A dim may use the dims before it.
    Expr expr = read_expr(value);
    if (!expr.is_constant()) value.fail("a dim is a constant; '" + expr.text() + "' uses a scenario size");
    int64_t number = expr.eval(Environment{});
    if (number < 0 || number > kMaxDimension) value.fail("dim " + key + " = " + std::to_string(number) + " is outside 0 .. 2^40");
    scope_.dims.emplace_back(key, number);
  }
}

void GraphReader::read(const YamlNode& root) {
  if (!root.is_map()) root.fail("a graph file is a map (oomcast_graph, parameters, inputs, forward, outputs)");
  root.reject_unknown_keys({"oomcast_graph", "name", "description", "torch_version", "sizes", "dims", "parameters",
                            "buffers", "inputs", "forward", "outputs", "optimizer", "compiled"});
  file_.declares_optimizer = !root.child("optimizer").is_missing();
  if (root.child("oomcast_graph").as_integer(1, 1000) != 1) {
    root.child("oomcast_graph").fail("this oomcast reads graph format version 1");
  }
  file_.name = root.string_or("name", std::filesystem::path(file_.path).stem().string());
  root.string_or("description", "");
  if (YamlNode torch = root.child("torch_version"); !torch.is_missing()) {
    std::optional<ReleaseNumber> release = parse_release(torch.as_string());
    if (!release) torch.fail("'torch_version' must be the PyTorch release the capture ran under, such as \"2.13\"");
    file_.torch_version = *release;
  }
  // A compiled capture's settings (scenario/compile_config_loader.cc reads both keys the same way).
  file_.compiled = read_compile_map(root.child("compiled"), /*graph_file_keys=*/true);
  read_sizes(root.child("sizes"));
  read_dims(root.child("dims"));
  file_.parameters = read_declarations(root.child("parameters"), DeclarationKind::Parameter, 0);
  file_.buffers = read_declarations(root.child("buffers"), DeclarationKind::Buffer, 0);
  file_.inputs = read_declarations(root.child("inputs"), DeclarationKind::Input, 0);
  if (root.child("forward").is_missing()) root.fail("a graph file needs 'forward' (the ops in program order)");
  file_.forward = read_body(root.child("forward"), 0);
  YamlNode outputs = root.child("outputs");
  if (outputs.is_missing() || outputs.child("loss").is_missing()) {
    (outputs.is_missing() ? root : outputs).fail("a graph file needs 'outputs' with a 'loss' (the 0-dim training loss)");
  }
  outputs.reject_unknown_keys({"loss", "logits"});
  file_.outputs.emplace_back("loss", read_ref(outputs.child("loss")));
  if (!outputs.child("logits").is_missing()) file_.outputs.emplace_back("logits", read_ref(outputs.child("logits")));
}

}  // namespace graph

bool is_graph_file(const std::string& path) {
  YamlDocument document = YamlDocument::load_file(path);
  YamlNode root = document.root();
  return root.is_map() && !root.child("oomcast_graph").is_missing();
}

std::shared_ptr<const GraphFile> load_graph_file(const std::string& path) {
  YamlDocument document = YamlDocument::load_file(path);
  auto file = std::make_shared<GraphFile>();
  file->path = path;
  graph::GraphReader reader(*file);
  reader.read(document.root());
  return file;
}

ModelConfig graph_model(const std::string& path) {
  ModelConfig model;
  auto file = load_graph_file(path);
  model.name = file->name;
  model.family = "graph";
  model.source = path;
  model.graph = std::move(file);
  return model;
}

void check_graph_size(const GraphFile& file, int64_t size, const YamlNode& where) {
  if (file.max_size <= 0 || size <= file.max_size) return;
  const char* key = file.image_size ? "image_size" : "seq_len";
  std::string message = "'" + std::string(key) + "' " + std::to_string(size) + " exceeds graph '" + file.name +
                        "''s max " + std::to_string(file.max_size) + " (" + file.path + ":" +
                        std::to_string(file.size_where.line) + ")";
  if (where.is_missing()) throw InputError(file.size_where, key, message);
  where.fail(message);
}

int graph_torch_version(const GraphFile& file, bool scenario_names_release, int scenario_release,
                        std::vector<std::string>& warnings) {
  if (file.torch_version == 0) return scenario_release;
  if (!scenario_names_release) return file.torch_version;
  if (file.torch_version != scenario_release) {
    warnings.push_back(file.path + " was captured under torch " + release_text(file.torch_version) +
                       " but the scenario plans torch " + release_text(scenario_release) +
                       " (allocator.torch_version): what autograd saves and which kernels run differ between "
                       "releases (planner/torch_release_facts.yaml); capture it again under " +
                       release_text(scenario_release) + " or plan " + release_text(file.torch_version));
  }
  return scenario_release;
}

}  // namespace oomcast::scenario
