// The op kind names: one table read both ways.
#include "scenario/op_kind.h"

namespace oomcast::scenario {

namespace {

struct OpKindEntry {
  OpKind kind;
  const char* name;
};

constexpr OpKindEntry kOpKinds[] = {
    {OpKind::Linear, "linear"},       {OpKind::Matmul, "matmul"},
    {OpKind::Attention, "attention"}, {OpKind::Conv, "conv"},
    {OpKind::Embedding, "embedding"}, {OpKind::LayerNorm, "layer_norm"},
    {OpKind::BatchNorm, "batch_norm"}, {OpKind::Softmax, "softmax"},
    {OpKind::LogSoftmax, "log_softmax"}, {OpKind::NllLoss, "nll_loss"},
    {OpKind::Dropout, "dropout"},     {OpKind::Gelu, "gelu"},
    {OpKind::Silu, "silu"},           {OpKind::Relu, "relu"},
    {OpKind::Tanh, "tanh"},           {OpKind::Add, "add"},
    {OpKind::Mul, "mul"},             {OpKind::Pow, "pow"},
    {OpKind::Mean, "mean"},           {OpKind::Rsqrt, "rsqrt"},
    {OpKind::Neg, "neg"},             {OpKind::Cat, "cat"},
    {OpKind::MaskedFill, "masked_fill"}, {OpKind::Cast, "cast"},
    {OpKind::Copy, "copy"},           {OpKind::View, "view"},
    {OpKind::Split, "split"},         {OpKind::Pool, "pool"},
    {OpKind::Compare, "compare"},     {OpKind::Constant, "constant"},
    {OpKind::ScopeEnd, "scope_end"},  {OpKind::Other, "other"},
    {OpKind::Sigmoid, "sigmoid"},     {OpKind::TopK, "topk"},
    {OpKind::Gather, "gather"},       {OpKind::IndexAdd, "index_add"},
};

}  // namespace

const char* op_kind_name(OpKind kind) {
  for (const auto& entry : kOpKinds) {
    if (entry.kind == kind) return entry.name;
  }
  return "?";
}

bool parse_op_kind(const std::string& text, OpKind* kind) {
  for (const auto& entry : kOpKinds) {
    if (text == entry.name) {
      *kind = entry.kind;
      return true;
    }
  }
  return false;
}

std::vector<std::string> op_kind_names() {
  std::vector<std::string> names;
  for (const auto& entry : kOpKinds) names.emplace_back(entry.name);
  return names;
}

}  // namespace oomcast::scenario
