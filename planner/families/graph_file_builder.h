// GraphFileBuilder: runs a graph file (scenario/graph_file.h) into a GraphBuilder, statement by
// statement, the way a C++ family writes its forward: parameters, buffers, inputs, then ops
// through the catalogue (graph_catalogue_ops.cc) or as generic ops (graph_generic_op.cc),
// inside module paths, frames and checkpoint units. It tracks each bound name's tensor and
// concrete shape, evaluated against the scenario's sizes, and raises InputError at the file,
// line and op for unbound names and shape mismatches.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/families/families.h"
#include "planner/ops/graph_builder.h"
#include "scenario/graph_file.h"

namespace oomcast::planner::families {

using Shape = std::vector<int64_t>;

struct Binding {
  TensorId tensor = kNoTensor;  // kNoTensor: a buffer not registered for this scenario (`when`)
  Shape shape;
};

class GraphFileBuilder {
 public:
  GraphFileBuilder(GraphBuilder& builder, const scenario::GraphFile& file);
  void run();
  // The op statements and parameter declarations the file runs, repeats multiplied out,
  // counted without building (families.h, least_graph_file_work). Throws InputError at the
  // repeat that multiplies most when the ops are more than any schedule can hold.
  LeastWork least_work();

 private:
  void declare_parameters(const std::vector<scenario::graph::Statement>& statements);
  void declare_buffers(const std::vector<scenario::graph::Statement>& statements);
  void declare_inputs(const std::vector<scenario::graph::Statement>& statements);
  void execute(const std::vector<scenario::graph::Statement>& statements);
  void run_op(const scenario::graph::Statement& statement, const scenario::graph::OpStatement& op);
  void run_catalogue_op(const scenario::graph::Statement& statement, const scenario::graph::OpStatement& op, const std::string& leaf);
  void run_generic_op(const scenario::graph::Statement& statement, const scenario::graph::OpStatement& op, const std::string& leaf);
  void adjust_saves_to_release(const std::string& aten, const std::vector<TensorId>& inputs, std::vector<TensorId>& saved) const;
  std::vector<BackwardStep> backward_program(const scenario::graph::Statement& statement,
                                             const scenario::graph::OpStatement& op, const std::string& leaf,
                                             const std::vector<TensorId>& inputs, const std::vector<TensorId>& originals,
                                             const std::vector<TensorId>& saved);
  void hold(const std::vector<scenario::graph::Ref>& refs);
  template <typename Visit>
  void for_each_iteration(const scenario::graph::Statement& statement, Visit visit);
  int64_t repeat_count(const scenario::graph::Statement& statement);
  // Statements of `kind` under `statements`; a repeat's body is counted once (at index 0) and
  // multiplied by its count. Saturates. `largest` receives the repeat that multiplies most.
  int64_t count_statements(const std::vector<scenario::graph::Statement>& statements,
                           scenario::graph::Statement::Kind kind, const scenario::graph::Statement** largest,
                           int64_t* largest_count);

  // Name lookups. `op` names the op in errors (nullptr outside ops).
  const Binding& lookup(const scenario::graph::Ref& ref, const scenario::graph::OpStatement* op);
  void add_cpu_gemm_buffers(OpNode& node, const scenario::graph::OpStatement& op, const std::string& aten,
                            const std::string& leaf, const std::vector<Shape>& output_shapes);
  const Binding* lookup_optional(const scenario::graph::OpStatement& op, const std::string& argument);
  const Binding& argument(const scenario::graph::OpStatement& op, const std::string& argument);
  void bind(const std::string& name, Binding binding);

  Shape eval_shape(const scenario::graph::Shape& shape, const SourceLocation& where);
  int64_t eval(const scenario::graph::Expr& expr);
  int64_t option_integer(const scenario::graph::OpStatement& op, const std::string& key, int64_t fallback);
  bool option_flag(const scenario::graph::OpStatement& op, const std::string& key, bool fallback);
  DType dtype_of(scenario::graph::DTypeSpec spec, DType inferred) const;
  uint64_t checked_numel(const Shape& shape, const SourceLocation& where);
  // Binds the op's results, checking stated shapes against the derived ones.
  void bind_outputs(const scenario::graph::OpStatement& op, const std::vector<TensorId>& tensors, const std::vector<Shape>& shapes);

  [[noreturn]] void fail_op(const scenario::graph::OpStatement& op, const SourceLocation& where, const std::string& message) const;
  [[noreturn]] void fail_at(const SourceLocation& where, const std::string& key, const std::string& message) const;
  std::string where_produced(const std::string& name_text) const;

  GraphBuilder& g_;
  const scenario::GraphFile& file_;
  scenario::graph::Environment env_;
  std::unordered_map<std::string, Binding> names_;
  const scenario::graph::Statement* current_ = nullptr;  // the statement being run, for error locations
  std::string current_leaf_;
  int64_t ops_run_ = 0;
};

std::string shape_text(const Shape& shape);

}  // namespace oomcast::planner::families
