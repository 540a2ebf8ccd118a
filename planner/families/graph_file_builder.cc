// GraphFileBuilder: declarations, statements (module, frame, hold, repeat), name bindings and
// the errors that name file, line and op. The family entry point build_graph() is here too.
#include "planner/families/graph_file_builder.h"

#include <cstdint>
#include <functional>
#include <optional>

#include "planner/families/families.h"
#include "planner/schedule_size.h"
#include "scenario/size_limits.h"

namespace oomcast::planner::families {

using scenario::AttentionImpl;
using scenario::GraphFile;
using scenario::ModelConfig;

namespace {

constexpr uint64_t kMaxNumel = uint64_t{1} << 48;
// A forward writes about three events per op (schedule_size.cc's estimate), and no schedule may
// hold more than kMaxPlannedEvents.
constexpr int64_t kMaxOps = kMaxPlannedEvents / 3;

const char* attention_name(AttentionImpl impl) {
  switch (impl) {
    case AttentionImpl::Eager: return "eager";
    case AttentionImpl::SdpaMath: return "sdpa_math";
    case AttentionImpl::Flash: return "flash";
    case AttentionImpl::MemEfficient: return "mem_efficient";
  }
  return "";
}

}  // namespace

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

GraphFileBuilder::GraphFileBuilder(GraphBuilder& builder, const GraphFile& file) : g_(builder), file_(file) {
  env_.values[scenario::graph::kBatchSize] = builder.context().batch;
  env_.values[scenario::graph::kSeqLen] = builder.context().seq_len;
  env_.values[scenario::graph::kImageSize] = builder.context().seq_len;
}

void GraphFileBuilder::fail_at(const SourceLocation& where, const std::string& key, const std::string& message) const {
  throw InputError(where, key, message);
}

void GraphFileBuilder::fail_op(const scenario::graph::OpStatement& op, const SourceLocation& where,
                               const std::string& message) const {
  std::string name = g_.qualified(current_leaf_);
  throw InputError(where, name, "op '" + name + "' (" + op.op + "): " + message);
}

int64_t GraphFileBuilder::eval(const scenario::graph::Expr& expr) { return expr.eval(env_); }

Shape GraphFileBuilder::eval_shape(const scenario::graph::Shape& shape, const SourceLocation& where) {
  Shape out;
  out.reserve(shape.dims.size());
  for (const scenario::graph::Expr& dim : shape.dims) {
    int64_t value = dim.eval(env_);
    if (value < 0 || value > scenario::graph::kMaxDimension) {
      fail_at(dim.where().line ? dim.where() : where, dim.text(),
              "dimension '" + dim.text() + "' = " + std::to_string(value) + " is outside 0 .. 2^40");
    }
    out.push_back(value);
  }
  return out;
}

uint64_t GraphFileBuilder::checked_numel(const Shape& shape, const SourceLocation& where) {
  uint64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim != 0 && numel > kMaxNumel / static_cast<uint64_t>(dim)) {
      fail_at(where, "shape", "tensor of shape " + shape_text(shape) + " has more than 2^48 elements");
    }
    numel *= static_cast<uint64_t>(dim);
  }
  return numel;
}

DType GraphFileBuilder::dtype_of(scenario::graph::DTypeSpec spec, DType inferred) const {
  switch (spec) {
    case scenario::graph::DTypeSpec::Inferred: return inferred;
    case scenario::graph::DTypeSpec::Param: return g_.precision().parameter_dtype;
    case scenario::graph::DTypeSpec::Float32: return DType::Float32;
    case scenario::graph::DTypeSpec::Float16: return DType::Float16;
    case scenario::graph::DTypeSpec::BFloat16: return DType::BFloat16;
    case scenario::graph::DTypeSpec::Int64: return DType::Int64;
    case scenario::graph::DTypeSpec::Int32: return DType::Int32;
    case scenario::graph::DTypeSpec::Bool: return DType::Bool;
    case scenario::graph::DTypeSpec::UInt8: return DType::UInt8;
  }
  return inferred;
}

// Where a name that is not bound yet gets produced later in the file, for the error.
std::string GraphFileBuilder::where_produced(const std::string& name_text) const {
  std::function<const scenario::graph::Statement*(const std::vector<scenario::graph::Statement>&)> search =
      [&](const std::vector<scenario::graph::Statement>& statements) -> const scenario::graph::Statement* {
    for (const scenario::graph::Statement& statement : statements) {
      if (statement.kind == scenario::graph::Statement::Kind::Op) {
        for (const scenario::graph::Output& output : statement.op->outputs) {
          if (output.name.text() == name_text) return &statement;
        }
      }
      if (const scenario::graph::Statement* found = search(statement.body)) return found;
    }
    return nullptr;
  };
  const scenario::graph::Statement* producer = search(file_.forward);
  if (producer == nullptr) return "";
  return "; it is produced later, at line " + std::to_string(producer->where.line) + " by op '" +
         producer->op->name.text() + "': the ops are out of program order or form a cycle";
}

const Binding& GraphFileBuilder::lookup(const scenario::graph::Ref& ref, const scenario::graph::OpStatement* op) {
  std::string name = ref.name.render(env_);
  auto found = names_.find(name);
  if (found != names_.end()) return found->second;
  std::string message = "tensor '" + name + "' is used before it is produced" + where_produced(ref.name.text());
  if (op != nullptr) fail_op(*op, ref.where, message);
  fail_at(ref.where, name, message);
}

const Binding* GraphFileBuilder::lookup_optional(const scenario::graph::OpStatement& op, const std::string& argument) {
  const scenario::graph::Ref* ref = op.tensor(argument);
  if (ref == nullptr) return nullptr;
  const Binding& binding = lookup(*ref, &op);
  return binding.tensor == kNoTensor ? nullptr : &binding;
}

const Binding& GraphFileBuilder::argument(const scenario::graph::OpStatement& op, const std::string& argument) {
  const scenario::graph::Ref* ref = op.tensor(argument);
  const Binding& binding = lookup(*ref, &op);
  if (binding.tensor == kNoTensor) {
    fail_op(op, ref->where, "'" + argument + "' is buffer '" + ref->name.render(env_) + "', which is not registered with " +
                                "attention " + attention_name(g_.context().attention));
  }
  return binding;
}

void GraphFileBuilder::bind(const std::string& name, Binding binding) { names_[name] = std::move(binding); }

int64_t GraphFileBuilder::option_integer(const scenario::graph::OpStatement& op, const std::string& key, int64_t fallback) {
  const scenario::graph::Option* option = op.option(key);
  return option ? eval(option->number) : fallback;
}

bool GraphFileBuilder::option_flag(const scenario::graph::OpStatement& op, const std::string& key, bool fallback) {
  const scenario::graph::Option* option = op.option(key);
  return option ? option->flag : fallback;
}

void GraphFileBuilder::bind_outputs(const scenario::graph::OpStatement& op, const std::vector<TensorId>& tensors,
                                    const std::vector<Shape>& shapes) {
  if (op.outputs.size() != tensors.size()) {
    fail_op(op, current_->where,
            "binds " + std::to_string(op.outputs.size()) + " names to " + std::to_string(tensors.size()) + " results");
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const scenario::graph::Output& output = op.outputs[i];
    checked_numel(shapes[i], output.where);
    if (output.shape.present) {
      Shape stated = eval_shape(output.shape, output.where);
      if (stated != shapes[i]) {
        fail_op(op, output.where,
                "shape mismatch: '" + output.name.render(env_) + "' is stated as " + shape_text(stated) + " but the op makes " +
                    shape_text(shapes[i]));
      }
    }
    bind(output.name.render(env_), Binding{tensors[i], shapes[i]});
  }
}

int64_t GraphFileBuilder::repeat_count(const scenario::graph::Statement& statement) {
  int64_t count = eval(statement.count);
  if (count < 1 || count > 100000) {
    fail_at(statement.where, "repeat", "repeat count " + std::to_string(count) + " is outside 1 .. 100000");
  }
  return count;
}

template <typename Visit>
void GraphFileBuilder::for_each_iteration(const scenario::graph::Statement& statement, Visit visit) {
  const int64_t count = repeat_count(statement);
  for (int64_t i = 0; i < count; ++i) {
    env_.values[statement.index_slot] = i;
    visit(statement.body);
  }
}

void GraphFileBuilder::declare_parameters(const std::vector<scenario::graph::Statement>& statements) {
  for (const scenario::graph::Statement& statement : statements) {
    if (statement.kind == scenario::graph::Statement::Kind::Repeat) {
      for_each_iteration(statement, [&](const auto& body) { declare_parameters(body); });
      continue;
    }
    const scenario::graph::TensorDecl& decl = *statement.tensor;
    std::string name = decl.name.render(env_);
    if (decl.construction_temporary) {
      Shape shape = eval_shape(decl.shape, statement.where);
      checked_numel(shape, statement.where);
      std::optional<DType> dtype;  // `param`: the dtype the parameters are built in
      if (decl.dtype != scenario::graph::DTypeSpec::Param) dtype = dtype_of(decl.dtype, DType::Float32);
      g_.construction_temporary(name, std::move(shape), dtype);
      continue;
    }
    if (names_.count(name)) fail_at(statement.where, name, "'" + name + "' is declared twice");
    if (decl.tied_to.present()) {
      const Binding& target = lookup(decl.tied_to, nullptr);
      if (g_.tensor(target.tensor).role != TensorRole::Parameter) {
        fail_at(decl.tied_to.where, name, "'" + name + "' is tied to '" + decl.tied_to.name.render(env_) + "', not a parameter");
      }
      bind(name, target);
      continue;
    }
    Shape shape = eval_shape(decl.shape, statement.where);
    checked_numel(shape, statement.where);
    TensorId id = g_.parameter(name, shape);
    DType dtype = dtype_of(decl.dtype, g_.precision().parameter_dtype);
    g_.mutable_tensor(id).dtype = dtype;
    g_.mutable_tensor(id).requires_grad = decl.requires_grad;
    bind(name, Binding{id, std::move(shape)});
  }
}

void GraphFileBuilder::declare_buffers(const std::vector<scenario::graph::Statement>& statements) {
  for (const scenario::graph::Statement& statement : statements) {
    if (statement.kind == scenario::graph::Statement::Kind::Repeat) {
      for_each_iteration(statement, [&](const auto& body) { declare_buffers(body); });
      continue;
    }
    const scenario::graph::TensorDecl& decl = *statement.tensor;
    std::string name = decl.name.render(env_);
    if (names_.count(name)) fail_at(statement.where, name, "'" + name + "' is declared twice");
    Shape shape = eval_shape(decl.shape, statement.where);
    uint64_t numel = checked_numel(shape, statement.where);
    if (!decl.when_attention.empty() && decl.when_attention != attention_name(g_.context().attention)) {
      bind(name, Binding{kNoTensor, std::move(shape)});
      continue;
    }
    bind(name, Binding{g_.buffer(name, numel, dtype_of(decl.dtype, DType::Float32)), std::move(shape)});
  }
}

void GraphFileBuilder::declare_inputs(const std::vector<scenario::graph::Statement>& statements) {
  for (const scenario::graph::Statement& statement : statements) {
    if (statement.kind == scenario::graph::Statement::Kind::Repeat) {
      for_each_iteration(statement, [&](const auto& body) { declare_inputs(body); });
      continue;
    }
    const scenario::graph::TensorDecl& decl = *statement.tensor;
    std::string name = decl.name.render(env_);
    if (names_.count(name)) fail_at(statement.where, name, "'" + name + "' is declared twice");
    Shape shape = eval_shape(decl.shape, statement.where);
    uint64_t numel = checked_numel(shape, statement.where);
    bind(name, Binding{g_.input(name, numel, dtype_of(decl.dtype, DType::Float32)), std::move(shape)});
  }
}

void GraphFileBuilder::hold(const std::vector<scenario::graph::Ref>& refs) {
  for (const scenario::graph::Ref& ref : refs) {
    const Binding& binding = lookup(ref, nullptr);
    if (binding.tensor != kNoTensor) g_.hold(binding.tensor);
  }
}

void GraphFileBuilder::execute(const std::vector<scenario::graph::Statement>& statements) {
  using Kind = scenario::graph::Statement::Kind;
  for (const scenario::graph::Statement& statement : statements) {
    switch (statement.kind) {
      case Kind::Op:
        run_op(statement, *statement.op);
        break;
      case Kind::Module:
        g_.push_module(statement.module.render(env_));
        if (statement.checkpoint_unit) {
          using Model = scenario::graph::Statement::ModelCheckpoint;
          g_.begin_unit(statement.model_checkpoint == Model::Reentrant      ? LayerGraph::ModelCheckpoint::Reentrant
                        : statement.model_checkpoint == Model::NonReentrant ? LayerGraph::ModelCheckpoint::NonReentrant
                                                                            : LayerGraph::ModelCheckpoint::None);
        }
        if (statement.frame) {
          g_.begin_scope();
          hold(statement.held);
        }
        execute(statement.body);
        if (statement.frame) g_.end_scope();
        if (statement.checkpoint_unit) g_.end_unit();
        g_.pop_module();
        break;
      case Kind::Frame:
        g_.begin_scope();
        hold(statement.held);
        execute(statement.body);
        g_.end_scope();
        break;
      case Kind::Hold:
        hold(statement.held);
        break;
      case Kind::Repeat:
        for_each_iteration(statement, [&](const auto& body) { execute(body); });
        break;
      case Kind::Tensor:
        break;
    }
  }
}

void GraphFileBuilder::run_op(const scenario::graph::Statement& statement, const scenario::graph::OpStatement& op) {
  if (++ops_run_ > kMaxOps) fail_at(statement.where, "repeat", "the graph runs more than " + std::to_string(kMaxOps) + " ops");
  current_ = &statement;
  current_leaf_ = op.name.render(env_);
  if (op.id == scenario::graph::CatalogueOp::Generic) {
    run_generic_op(statement, op, current_leaf_);
  } else {
    run_catalogue_op(statement, op, current_leaf_);
  }
}

int64_t GraphFileBuilder::count_statements(const std::vector<scenario::graph::Statement>& statements,
                                           scenario::graph::Statement::Kind kind,
                                           const scenario::graph::Statement** largest, int64_t* largest_count) {
  using Kind = scenario::graph::Statement::Kind;
  int64_t total = 0;
  auto add = [&total](int64_t n) { total = n > INT64_MAX - total ? INT64_MAX : total + n; };
  for (const scenario::graph::Statement& statement : statements) {
    if (statement.kind == Kind::Repeat) {
      const int64_t count = repeat_count(statement);
      env_.values[statement.index_slot] = 0;
      const int64_t repeated = scenario::saturating_product(count, count_statements(statement.body, kind, largest, largest_count));
      if (repeated > *largest_count) {
        *largest = &statement;
        *largest_count = repeated;
      }
      add(repeated);
    } else if (statement.kind == Kind::Module || statement.kind == Kind::Frame) {
      add(count_statements(statement.body, kind, largest, largest_count));
    } else if (statement.kind == kind) {
      add(1);
    }
  }
  return total;
}

LeastWork GraphFileBuilder::least_work() {
  using Kind = scenario::graph::Statement::Kind;
  const scenario::graph::Statement* largest = nullptr;
  int64_t largest_count = 0;
  LeastWork work;
  work.parameters = count_statements(file_.parameters, Kind::Tensor, &largest, &largest_count);
  largest = nullptr;
  largest_count = 0;
  work.ops = count_statements(file_.forward, Kind::Op, &largest, &largest_count);
  // A forward alone writes about three events per op (schedule_size.cc's estimate): a file whose
  // op statements, repeats multiplied out, exceed a third of kMaxPlannedEvents cannot be
  // planned by any job, and is refused at the repeat that multiplies most.
  if (work.ops > kMaxOps) {
    fail_at(largest ? largest->where : SourceLocation{file_.path}, "repeat",
            "the forward runs at least " + std::to_string(work.ops) + " ops (its op statements with the repeats " +
                "multiplied out), over the limit of " + std::to_string(kMaxOps) + " that a schedule of " +
                std::to_string(kMaxPlannedEvents) + " events allows: lower this repeat count");
  }
  return work;
}

void GraphFileBuilder::run() {
  const int64_t size = g_.context().seq_len;
  if ((file_.seq_len || file_.image_size) && file_.max_size > 0 && size > file_.max_size) {
    fail_at(file_.size_where, file_.image_size ? "image_size" : "seq_len",
            std::string(file_.image_size ? "image_size " : "seq_len ") + std::to_string(size) + " exceeds graph '" +
                file_.name + "''s max " + std::to_string(file_.max_size));
  }
  least_work();  // refuses a forward too long for any schedule before anything is built
  declare_parameters(file_.parameters);
  declare_buffers(file_.buffers);
  declare_inputs(file_.inputs);
  execute(file_.forward);
  for (const auto& [key, ref] : file_.outputs) {
    const Binding& binding = lookup(ref, nullptr);
    if (binding.tensor == kNoTensor) fail_at(ref.where, key, "output '" + key + "' is not a tensor of this scenario");
    if (key == "loss") {
      if (g_.tensor(binding.tensor).numel != 1) {
        fail_at(ref.where, key, "the loss '" + ref.name.render(env_) + "' has shape " + shape_text(binding.shape) +
                                    "; it must be a scalar");
      }
      g_.set_loss(binding.tensor);
    } else {
      g_.set_named_output(key, binding.tensor);
    }
  }
}

void build_graph(GraphBuilder& builder, const ModelConfig& model) {
  GraphFileBuilder(builder, *model.graph).run();
}

LeastWork least_graph_file_work(const ModelConfig& model, const BuildContext& context) {
  if (!model.graph) return {};
  GraphBuilder builder(context);
  return GraphFileBuilder(builder, *model.graph).least_work();
}

}  // namespace oomcast::planner::families
