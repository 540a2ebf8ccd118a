// The graph-file reader's state (internal to graph_file.cc and graph_file_ops.cc): the names
// expressions may use at the current point, statement counts and nesting.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "scenario/graph_file.h"
#include "scenario/yaml_reader.h"

namespace oomcast::scenario::graph {

constexpr int64_t kMaxStatements = 1000000;
constexpr int64_t kMaxRepeat = 100000;

enum class DeclarationKind : uint8_t { Parameter, Buffer, Input };

class GraphReader {
 public:
  explicit GraphReader(GraphFile& file) : file_(file) {}
  void read(const YamlNode& root);

 private:
  void read_sizes(const YamlNode& sizes);
  void read_dims(const YamlNode& dims);
  std::vector<Statement> read_declarations(const YamlNode& list, DeclarationKind kind, int depth);
  std::vector<Statement> read_body(const YamlNode& list, int depth);
  Statement read_statement(const YamlNode& item, int depth);
  // graph_file_ops.cc
  std::shared_ptr<const OpStatement> read_op(const YamlNode& item);
  void read_catalogue_op(const YamlNode& item, OpStatement& op);
  void read_generic_op(const YamlNode& item, OpStatement& op);
  std::vector<Temporary> read_temporaries(const YamlNode& list);
  Output read_output(const YamlNode& node);

  Template read_template(const YamlNode& node);
  Ref read_ref(const YamlNode& node);
  std::vector<Ref> read_refs(const YamlNode& node);
  Expr read_expr(const YamlNode& node);
  Expr read_count(const YamlNode& node);
  Shape read_shape(const YamlNode& node);
  DTypeSpec read_dtype(const YamlNode& node);
  uint32_t push_index(const YamlNode& repeat);
  void count_statement(const YamlNode& node);

  GraphFile& file_;
  ExprScope scope_;
  int64_t statements_ = 0;
  bool in_unit_ = false;
};

}  // namespace oomcast::scenario::graph
