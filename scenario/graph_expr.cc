// Graph-file expressions: a recursive-descent parser to postfix steps, checked evaluation,
// and `${...}` templates.
#include "scenario/graph_expr.h"

#include <cctype>

#include "base/edit_distance.h"

namespace oomcast::scenario::graph {

class ExprParser {
 public:
  ExprParser(const std::string& text, const ExprScope& scope, const SourceLocation& where)
      : text_(text), scope_(scope), where_(where) {}

  Expr parse() {
    Expr expr;
    expr.text_ = text_;
    expr.where_ = where_;
    out_ = &expr.steps_;
    sum();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected '" + text_.substr(pos_, 1) + "'");
    fold(expr);
    return expr;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(where_, text_, "in expression '" + text_ + "': " + message);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  void emit(Expr::Step::Kind kind, int64_t value = 0) { out_->push_back(Expr::Step{kind, value}); }

  void sum() {
    product();
    for (;;) {
      skip_space();
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) {
        char op = text_[pos_++];
        product();
        emit(op == '+' ? Expr::Step::Add : Expr::Step::Sub);
      } else {
        return;
      }
    }
  }
  void product() {
    factor();
    for (;;) {
      skip_space();
      if (pos_ < text_.size() && (text_[pos_] == '*' || text_[pos_] == '/')) {
        char op = text_[pos_++];
        if (op == '/' && pos_ < text_.size() && text_[pos_] == '/') ++pos_;  // `//` reads as `/`
        factor();
        emit(op == '*' ? Expr::Step::Mul : Expr::Step::Div);
      } else {
        return;
      }
    }
  }
  void factor() {
    skip_space();
    if (pos_ >= text_.size()) fail("expression ends too early");
    char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      if (++depth_ > 32) fail("too deeply nested");
      sum();
      --depth_;
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ')') fail("missing ')'");
      ++pos_;
      return;
    }
    if (c == '-') {
      ++pos_;
      if (++depth_ > 32) fail("too deeply nested");
      emit(Expr::Step::Const, 0);
      factor();
      emit(Expr::Step::Sub);
      --depth_;
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t value = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        if (value > (INT64_MAX - 9) / 10) fail("number too large");
        value = value * 10 + (text_[pos_++] - '0');
      }
      emit(Expr::Step::Const, value);
      return;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
      name(text_.substr(start, pos_ - start));
      return;
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }
  void name(const std::string& word) {
    if (word == "batch_size") return emit(Expr::Step::Load, kBatchSize);
    if (word == "seq_len" && scope_.seq_len) return emit(Expr::Step::Load, kSeqLen);
    if (word == "image_size" && scope_.image_size) return emit(Expr::Step::Load, kImageSize);
    for (auto it = scope_.indices.rbegin(); it != scope_.indices.rend(); ++it) {
      if (it->first == word) return emit(Expr::Step::Load, it->second);
    }
    for (const auto& [dim, value] : scope_.dims) {
      if (dim == word) return emit(Expr::Step::Const, value);
    }
    std::vector<std::string> known{"batch_size"};
    if (scope_.seq_len) known.emplace_back("seq_len");
    if (scope_.image_size) known.emplace_back("image_size");
    std::string listed = "batch_size";
    if (scope_.seq_len) listed += ", seq_len";
    if (scope_.image_size) listed += ", image_size";
    for (const auto& entry : scope_.dims) known.push_back(entry.first);
    for (const auto& entry : scope_.indices) known.push_back(entry.first);
    std::string hint;
    if ((word == "seq_len" && !scope_.seq_len) || (word == "image_size" && !scope_.image_size)) {
      hint = " (declare it under sizes:)";
    }
    fail("'" + word + "' is not a scenario size (" + listed + "), a dim or a repeat index" + hint +
         did_you_mean(word, known));
  }

  // Folds an expression without loads into one constant (dims make most shapes constant).
  void fold(Expr& expr) {
    for (const auto& step : expr.steps_) {
      if (step.kind == Expr::Step::Load) return;
    }
    Environment empty;
    int64_t value = expr.eval(empty);
    expr.steps_ = {Expr::Step{Expr::Step::Const, value}};
  }

  const std::string& text_;
  const ExprScope& scope_;
  const SourceLocation& where_;
  std::vector<Expr::Step>* out_ = nullptr;
  size_t pos_ = 0;
  int depth_ = 0;
};

Expr Expr::parse(const std::string& text, const ExprScope& scope, const SourceLocation& where) {
  return ExprParser(text, scope, where).parse();
}

Expr Expr::constant(int64_t value) {
  Expr expr;
  expr.steps_ = {Step{Step::Const, value}};
  expr.text_ = std::to_string(value);
  return expr;
}

bool Expr::uses_slot(uint32_t slot) const {
  for (const auto& step : steps_) {
    if (step.kind == Step::Load && step.value == static_cast<int64_t>(slot)) return true;
  }
  return false;
}

int64_t Expr::eval(const Environment& env) const {
  if (steps_.size() == 1 && steps_[0].kind == Step::Const) return steps_[0].value;
  int64_t stack[256];
  size_t top = 0;
  auto fail = [&](const std::string& message) {
    throw InputError(where_, text_, "in expression '" + text_ + "': " + message);
  };
  for (const auto& step : steps_) {
    if (step.kind == Step::Const || step.kind == Step::Load) {
      if (top == 256) fail("too complex");
      stack[top++] = step.kind == Step::Const ? step.value : env.values[step.value];
      continue;
    }
    int64_t b = stack[--top];
    int64_t a = stack[top - 1];
    int64_t result = 0;
    switch (step.kind) {
      case Step::Add:
        if (__builtin_add_overflow(a, b, &result)) fail("overflows");
        break;
      case Step::Sub:
        if (__builtin_sub_overflow(a, b, &result)) fail("overflows");
        break;
      case Step::Mul:
        if (__builtin_mul_overflow(a, b, &result)) fail("overflows");
        break;
      case Step::Div: {
        if (b == 0) fail("divides by zero");
        if (a == INT64_MIN && b == -1) fail("overflows");
        result = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --result;  // floor, as Python's //
        break;
      }
      default: break;
    }
    stack[top - 1] = result;
  }
  return stack[0];
}

Template Template::parse(const std::string& text, const ExprScope& scope, const SourceLocation& where) {
  Template result;
  result.text_ = text;
  size_t pos = 0;
  std::string literal;
  while (pos < text.size()) {
    size_t open = text.find("${", pos);
    if (open == std::string::npos) break;
    size_t close = text.find('}', open);
    if (close == std::string::npos) throw InputError(where, text, "'${' without a closing '}' in '" + text + "'");
    literal += text.substr(pos, open - pos);
    result.parts_.emplace_back(std::move(literal), Expr::parse(text.substr(open + 2, close - open - 2), scope, where));
    literal.clear();
    pos = close + 1;
  }
  if (result.parts_.empty()) return result;
  result.tail_ = literal + text.substr(pos);
  return result;
}

std::string Template::render(const Environment& env) const {
  if (parts_.empty()) return text_;
  std::string out;
  for (const auto& [literal, expr] : parts_) {
    out += literal;
    out += std::to_string(expr.eval(env));
  }
  out += tail_;
  return out;
}

}  // namespace oomcast::scenario::graph
