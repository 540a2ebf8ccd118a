// The ops a graph file may name (docs/graph-format.md): each catalogue op of
// planner/ops/op_catalogue.h with its tensor arguments and options, plus `generic`. The reader
// checks statements against this table; the planner dispatches on CatalogueOp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oomcast::scenario::graph {

enum class CatalogueOp : uint8_t {
  Linear, Embedding, LayerNorm, RmsNorm, Gelu, Silu, Tanh, Relu, Add, Mul, Scale, Dropout, Softmax,
  Cast, Constant, View, Split, Copy, ExpandCopy, Cat, Attention, BatchedMatmul, Rotary, CrossEntropy,
  Conv2d, BatchNorm, MaxPool2d, AdaptiveAvgPool2d, Generic,
};

enum class OptionType : uint8_t { Flag, Integer, Real, Shape, DType };

struct ArgumentSpec {
  const char* name;
  bool optional;
};

struct OptionSpec {
  const char* name;
  OptionType type;
  bool required;
};

struct CatalogueOpSpec {
  const char* name;
  CatalogueOp op;
  std::vector<ArgumentSpec> tensors;
  std::vector<OptionSpec> options;
  bool many_outputs;  // `out:` is a list (split)
};

const std::vector<CatalogueOpSpec>& catalogue_op_specs();
// nullptr when `name` is not an op of the table.
const CatalogueOpSpec* find_catalogue_op(const std::string& name);

}  // namespace oomcast::scenario::graph
