// Typed, located access to a YAML document: every value knows its file, line, column and
// dotted key, so each error reads "path:line:col: error: ..." and names the key. Applies
// `--set dotted.key=value` overrides before reading. yaml-cpp stays inside yaml_reader.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/input_error.h"

namespace oomcast::scenario {

struct YamlDocumentState;  // the parsed tree and the override table (yaml_reader.cc)
struct YamlNodeData;       // one node of the tree (yaml_reader.cc)

// For a section that may be written as a scalar shorthand (`device: a100-80gb`), the map key
// the scalar stands for when an override reaches inside it (`--set device.context_mib=600`
// turns it into {profile: a100-80gb, context_mib: 600}). Returns "" for a section that has
// no shorthand. `path` is the section's dotted path, `scalar` its current text.
using ShorthandKey = std::function<std::string(const std::string& path, const std::string& scalar)>;

// One value of a YAML document, with the dotted path that led to it ("optimizer.type").
// Cheap to copy. A key that is absent yields a node for which is_missing() is true.
class YamlNode {
 public:
  enum class Kind { Missing, Null, Scalar, Sequence, Map };

  Kind kind() const;
  bool is_missing() const { return kind() == Kind::Missing; }
  bool is_scalar() const { return kind() == Kind::Scalar; }
  bool is_map() const { return kind() == Kind::Map; }
  bool is_sequence() const { return kind() == Kind::Sequence; }
  const std::string& path() const;   // dotted key path; "" for the document root
  std::string key() const;           // last component of path()
  // Where the value was written: file:line:col, or nothing for a `--set` value (its text
  // then leads the message instead).
  SourceLocation location() const;
  // The "--set key=value" text that gave this value (or one of its parents), or "".
  std::string set_by() const;
  // Throws InputError at this value: "path:line:col: error: <message>".
  [[noreturn]] void fail(const std::string& message) const;

  // Scalars. Each throws InputError naming the key when the value has the wrong type or
  // lies outside [min, max].
  std::string as_string() const;
  int64_t as_integer(int64_t min, int64_t max) const;
  double as_number(double min, double max) const;
  bool as_bool() const;
  // One of `choices`; otherwise an error listing them, with a did-you-mean.
  std::string as_choice(const std::vector<std::string>& choices) const;
  // A sequence of strings; a single scalar counts as a list of one.
  std::vector<std::string> as_string_list() const;
  std::vector<YamlNode> items() const;  // the elements of a sequence

  // Maps. child() of a key that is absent is a Missing node (it still knows its path).
  YamlNode child(const std::string& key) const;
  std::vector<std::string> keys() const;  // in document order
  // Throws at the first key not in `allowed` (with a did-you-mean) or given twice, and
  // unless this is a map (or Missing).
  void reject_unknown_keys(const std::vector<std::string>& allowed) const;
  // Throws unless this is a map (or Missing).
  void require_map() const;

  // Convenience readers for a key of this map: the default when the key is absent.
  std::string string_or(const std::string& key, const std::string& fallback) const;
  int64_t integer_or(const std::string& key, int64_t fallback, int64_t min, int64_t max) const;
  double number_or(const std::string& key, double fallback, double min, double max) const;
  bool bool_or(const std::string& key, bool fallback) const;
  std::string choice_or(const std::string& key, const std::string& fallback,
                        const std::vector<std::string>& choices) const;

 private:
  friend class YamlDocument;
  explicit YamlNode(std::shared_ptr<const YamlNodeData> data) : data_(std::move(data)) {}
  std::string kind_name() const;
  std::shared_ptr<const YamlNodeData> data_;
};

// A parsed YAML file plus the `--set` overrides merged into it.
class YamlDocument {
 public:
  // Parses `text`; `path` is the file name errors print. Overrides are "dotted.key=value";
  // the value is read as a YAML scalar or flow collection ("32", "true", "[a, b]"). A
  // malformed override or document throws InputError.
  static YamlDocument parse(const std::string& text, const std::string& path,
                            const std::vector<std::string>& overrides = {},
                            const ShorthandKey& shorthand = {});
  // Reads the file at `path` and parses it.
  static YamlDocument load_file(const std::string& path,
                                const std::vector<std::string>& overrides = {},
                                const ShorthandKey& shorthand = {});

  YamlNode root() const;
  const std::string& path() const;

 private:
  explicit YamlDocument(std::shared_ptr<YamlDocumentState> state) : state_(std::move(state)) {}
  std::shared_ptr<YamlDocumentState> state_;
};

}  // namespace oomcast::scenario
