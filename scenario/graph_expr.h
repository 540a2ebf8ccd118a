// Integer expressions and name templates of graph files (docs/graph-format.md): shapes symbolic
// in the scenario's sizes (`batch_size*seq_len`, `image_size/2`), named dims folded in at parse
// time, repeat indices, and strings with `${EXPR}` parts. Parsed once, evaluated per use
// against a small environment of slots.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/input_error.h"

namespace oomcast::scenario::graph {

// Environment slots: the three scenario sizes, then one per enclosing repeat index.
enum Slot : uint32_t { kBatchSize = 0, kSeqLen = 1, kImageSize = 2, kFirstIndex = 3 };
constexpr uint32_t kMaxRepeatDepth = 8;
constexpr uint32_t kSlots = kFirstIndex + kMaxRepeatDepth;
constexpr int64_t kMaxDimension = int64_t{1} << 40;

struct Environment {
  int64_t values[kSlots] = {};
};

// What names an expression may use while one statement is parsed.
struct ExprScope {
  bool seq_len = false;     // the file declares seq_len under sizes:
  bool image_size = false;  // ... or image_size
  std::vector<std::pair<std::string, int64_t>> dims;        // dims: constants
  std::vector<std::pair<std::string, uint32_t>> indices;     // repeat index name -> slot
};

class Expr {
 public:
  Expr() = default;
  // Parses `text` (integers, names, + - * /, parentheses). Throws InputError at `where` for a
  // syntax error or a name that is not a scenario size, dim or repeat index.
  static Expr parse(const std::string& text, const ExprScope& scope, const SourceLocation& where);
  static Expr constant(int64_t value);

  // Throws InputError at the expression's location on overflow or division by zero.
  int64_t eval(const Environment& env) const;
  bool is_constant() const { return steps_.size() == 1 && steps_[0].kind == Step::Const; }
  bool uses_slot(uint32_t slot) const;
  const std::string& text() const { return text_; }
  const SourceLocation& where() const { return where_; }

 private:
  struct Step {
    enum Kind : uint8_t { Const, Load, Add, Sub, Mul, Div } kind;
    int64_t value;  // the constant, or the slot for Load
  };
  std::vector<Step> steps_;  // postfix
  std::string text_;
  SourceLocation where_;
  friend class ExprParser;
};

// A string with `${EXPR}` parts ("h.${i}.attn"); plain strings render without work.
class Template {
 public:
  Template() = default;
  static Template parse(const std::string& text, const ExprScope& scope, const SourceLocation& where);
  std::string render(const Environment& env) const;
  bool is_plain() const { return parts_.empty(); }
  bool empty() const { return text_.empty(); }
  const std::string& text() const { return text_; }

 private:
  std::vector<std::pair<std::string, Expr>> parts_;  // literal text before each expression
  std::string tail_;
  std::string text_;
};

}  // namespace oomcast::scenario::graph
