// The kinds of op the catalogue knows, by the names a scenario uses for them
// (checkpointing.recompute_ops: "attention", "gelu", ...). The planner's layer graph tags
// each op with one; the scenario reader checks names against the same list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oomcast::scenario {

enum class OpKind : uint8_t {
  Linear, Matmul, Attention, Conv, Embedding, LayerNorm, BatchNorm, Softmax, LogSoftmax,
  NllLoss, Dropout, Gelu, Silu, Relu, Tanh, Add, Mul, Pow, Mean, Rsqrt, Neg, Cat, MaskedFill,
  Cast, Copy, View, Split, Pool, Compare, Constant, ScopeEnd,
  Other,  // a graph file's generic op of no kind above
  Sigmoid, TopK, Gather, IndexAdd,
};
const char* op_kind_name(OpKind kind);
// Parses the names used by checkpointing.recompute_ops ("attention", "gelu", ...); false if unknown.
bool parse_op_kind(const std::string& text, OpKind* kind);
std::vector<std::string> op_kind_names();

}  // namespace oomcast::scenario
