// A graph file (docs/graph-format.md) as read and checked: parameters, buffers, inputs and the
// forward statements, with expressions and name templates parsed, every key and op checked,
// and each item's file/line kept for the errors the planner raises while it runs the file
// into a GraphBuilder (planner/families/graph_file_builder.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/input_error.h"
#include "scenario/graph_expr.h"
#include "scenario/graph_op_table.h"
#include "scenario/scenario.h"

namespace oomcast::scenario {

class YamlNode;  // scenario/yaml_reader.h

namespace graph {

// A dtype as written: `param` (the regime's parameter dtype), a concrete dtype, or Inferred
// (not written: the op or its inputs decide).
enum class DTypeSpec : uint8_t { Inferred, Param, Float32, Float16, BFloat16, Int64, Int32, Bool, UInt8 };
enum class GradSpec : uint8_t { Default, New, Pass, None };

struct Shape {
  bool present = false;
  std::vector<Expr> dims;
};

// A reference to a bound name (parameter, buffer, input or op output).
struct Ref {
  Template name;
  SourceLocation where;
  bool present() const { return !name.empty(); }
};

// A tensor declared under parameters:, buffers: or inputs:.
struct TensorDecl {
  Template name;
  Shape shape;
  DTypeSpec dtype = DTypeSpec::Param;
  bool requires_grad = true;
  Ref tied_to;                      // parameters: another name for an earlier parameter
  // parameters: not a parameter but a tensor the constructor allocates at this point of the
  // parameter order and frees before it returns (`construction_temporary: NAME`); never bound.
  bool construction_temporary = false;
  std::string when_attention;       // buffers: only for this attention backend ("" = always)
};

struct Output {
  Template name;
  Shape shape;
  DTypeSpec dtype = DTypeSpec::Inferred;
  Ref view_of;
  SourceLocation where;
};

struct Temporary {
  Template name;
  Expr bytes;          // used when shape is absent
  Shape shape;
  DTypeSpec dtype = DTypeSpec::Inferred;
  bool after_outputs = false;
};

// One step of a backward written out in the order it runs (`backward_program:`, a compiled
// graph's backward as capture/compiled_capture.py records it): allocate or free one of its
// buffers, drop a saved tensor or the incoming gradient (`release: grad_output`), or allocate
// the gradient of one of the op's inputs.
struct BackwardStep {
  enum class Kind : uint8_t { Alloc, Free, Release, Grad };
  Kind kind = Kind::Alloc;
  Ref name;            // alloc/free: the buffer; release: a saved name or grad_output; grad: an input
  Expr bytes;          // alloc, when shape is absent
  Shape shape;
  DTypeSpec dtype = DTypeSpec::Inferred;
};

// An option value: a flag, an integer expression, a shape or a dtype (by the op's table).
struct Option {
  std::string key;
  bool flag = false;
  Expr number;
  double real = 0.0;  // OptionType::Real (a probability: attention's dropout)
  Shape shape;
  DTypeSpec dtype = DTypeSpec::Inferred;
  SourceLocation where;
};

struct OpStatement {
  std::string op;                                   // catalogue op name, or "generic"
  CatalogueOp id = CatalogueOp::Generic;
  Template name;                                    // relative to the enclosing modules
  std::vector<std::pair<std::string, Ref>> tensors; // catalogue ops: argument name -> reference
  std::vector<Option> options;
  std::vector<Output> outputs;                      // `out:` (with `shape:`) or generic `outputs:`
  // Generic ops.
  std::string aten;
  std::string kind;                                 // op kind name; "" = from aten
  std::vector<Ref> inputs;
  std::vector<Ref> saves;
  std::vector<GradSpec> grads;
  std::vector<Temporary> forward_temporaries;
  std::vector<Temporary> backward_temporaries;
  std::vector<BackwardStep> backward_program;       // replaces grads and backward_temporaries
  int cublas = -1;                                  // -1: from aten

  const Ref* tensor(const std::string& argument) const;
  const Option* option(const std::string& key) const;
};

struct Statement {
  enum class Kind : uint8_t { Op, Module, Frame, Hold, Repeat, Tensor };
  Kind kind = Kind::Op;
  SourceLocation where;
  std::shared_ptr<const OpStatement> op;            // Op
  Template module;                                  // Module
  bool checkpoint_unit = false;                     // Module
  // Module `checkpoint:`: the model's forward wraps this module in torch.utils.checkpoint
  // (a checkpoint unit that is always checkpointed, whatever the scenario says).
  enum class ModelCheckpoint : uint8_t { None, NonReentrant, Reentrant };
  ModelCheckpoint model_checkpoint = ModelCheckpoint::None;  // Module
  bool frame = false;                               // Module with frame:, and Frame
  std::vector<Ref> held;                            // Module/Frame frame:, Hold
  Expr count;                                       // Repeat
  uint32_t index_slot = 0;                          // Repeat
  std::vector<Statement> body;                      // Module, Frame, Repeat
  std::shared_ptr<const TensorDecl> tensor;         // Tensor (parameters, buffers, inputs)
};

}  // namespace graph

struct GraphFile {
  std::string path;
  std::string name;
  bool seq_len = false;              // the shapes use seq_len (a sequence model) ...
  bool image_size = false;           // ... or image_size (a vision model); at most one
  int64_t default_size = 1;          // that size's default
  int64_t max_size = 0;              // its bound; 0 = none
  SourceLocation size_where;
  std::vector<graph::Statement> parameters;
  std::vector<graph::Statement> buffers;
  std::vector<graph::Statement> inputs;
  std::vector<graph::Statement> forward;
  std::vector<std::pair<std::string, graph::Ref>> outputs;   // "loss" first
  // `optimizer:` (the scenario's keys: type, impl, momentum, amsgrad), as the capture read it
  // from the model file; a scenario without `optimizer:` uses it (scenario_loader.cc).
  bool declares_optimizer = false;
  // `torch_version:` the release the capture ran under (100 * major + minor); 0 when the file
  // does not say. A scenario that names no allocator.torch_version plans this release, one that
  // names another is warned (scenario_loader.cc).
  int torch_version = 0;
  // `compiled:` the torch.compile settings a compiled capture ran with (capture/compiled_capture.py);
  // enabled is false for an eager capture. A scenario planning the file must give the same `compile:`.
  CompileConfig compiled;
};

// True when the YAML file at `path` is a graph file (it has a top-level `oomcast_graph` key).
bool is_graph_file(const std::string& path);
// Reads and checks a graph file; throws InputError naming file, line, column and key or op.
std::shared_ptr<const GraphFile> load_graph_file(const std::string& path);
// A ModelConfig (family "graph") for a graph file.
ModelConfig graph_model(const std::string& path);
// Throws at `where` (the scenario's seq_len or image_size) when `size` exceeds the file's max.
void check_graph_size(const GraphFile& file, int64_t size, const YamlNode& where);
// The torch release a scenario of a captured graph plans: the file's own when the scenario names
// none (`scenario_names_release` false), else the scenario's, with a warning in `warnings` when
// the two differ (what autograd saves and which kernels run differ between releases).
int graph_torch_version(const GraphFile& file, bool scenario_names_release, int scenario_release,
                        std::vector<std::string>& warnings);

}  // namespace oomcast::scenario
