// YamlDocument and YamlNode over yaml-cpp. yaml-cpp marks are 0-based, our locations
// 1-based. A value that came from `--set` has no line of its own: its errors lead with the
// override's text instead, so the user sees which flag to fix.
#include "scenario/yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "base/bounded_file.h"
#include "base/edit_distance.h"

namespace oomcast::scenario {

struct YamlDocumentState {
  std::string path;
  YAML::Node root;
  std::map<std::string, std::string> override_text;  // dotted path -> "--set key=value"
};

struct YamlNodeData {
  std::shared_ptr<const YamlDocumentState> document;
  YAML::Node node;         // invalid when missing
  bool missing = false;
  std::string path;
  YAML::Mark key_mark = YAML::Mark::null_mark();  // where the key was written
  YAML::Mark value_mark = YAML::Mark::null_mark();
};

namespace {

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// The `--set` text that produced `path` or one of its ancestors, or "".
std::string override_for(const YamlDocumentState& document, std::string path) {
  while (true) {
    auto found = document.override_text.find(path);
    if (found != document.override_text.end()) return found->second;
    size_t cut = path.find_last_of(".[");
    if (cut == std::string::npos) return std::string();
    path.resize(cut);
  }
}

SourceLocation location_at(const YamlDocumentState& document, const std::string& path,
                           const YAML::Mark& mark) {
  SourceLocation where;
  where.file = document.path;
  if (!override_for(document, path).empty()) return where;
  if (!mark.is_null()) {
    where.line = mark.line + 1;
    where.column = mark.column + 1;
  }
  return where;
}

[[noreturn]] void fail_at(const YamlDocumentState& document, const std::string& path,
                          const YAML::Mark& mark, const std::string& message) {
  std::string text = override_for(document, path);
  throw InputError(location_at(document, path, mark), path,
                   text.empty() ? message : text + ": " + message);
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Finds `key` in map `node` by iteration: yaml-cpp's const operator[] cannot tell an absent
// key from a null value, and we need the key's own mark.
bool find_entry(const YAML::Node& node, const std::string& key, YAML::Node& value,
                YAML::Mark& key_mark) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) {
      value.reset(it->second);
      key_mark = it->first.Mark();
      return true;
    }
  }
  return false;
}

// Splits "a.b.c" into its components; an empty component is an error.
std::vector<std::string> split_dotted(const std::string& key, const std::string& text,
                                      const std::string& file) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) {
      throw InputError(SourceLocation{file}, key,
                       text + ": malformed key '" + key + "' (expected dotted.key=value)");
    }
    parts.push_back(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Merges one "dotted.key=value" into the tree and records its text for error locations.
void apply_override(YamlDocumentState& document, const std::string& assignment,
                    const ShorthandKey& shorthand) {
  const std::string text = "--set " + assignment;
  size_t equals = assignment.find('=');
  if (equals == std::string::npos) {
    throw InputError(SourceLocation{document.path}, assignment,
                     text + ": expected dotted.key=value");
  }
  std::string key = assignment.substr(0, equals);
  std::string value_text = assignment.substr(equals + 1);
  std::vector<std::string> parts = split_dotted(key, text, document.path);

  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& error) {
    throw InputError(SourceLocation{document.path}, key,
                     text + ": value is not valid YAML: " + error.msg);
  }

  if (!document.root.IsMap()) document.root = YAML::Node(YAML::NodeType::Map);
  YAML::Node section;
  section.reset(document.root);
  std::string path;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    path = join_path(path, parts[i]);
    YAML::Node child;
    YAML::Mark ignored;
    if (!find_entry(section, parts[i], child, ignored) || child.IsNull()) {
      section[parts[i]] = YAML::Node(YAML::NodeType::Map);
    } else if (child.IsScalar()) {
      std::string inner = shorthand ? shorthand(path, child.Scalar()) : std::string();
      if (inner.empty()) {
        throw InputError(SourceLocation{document.path}, key,
                         text + ": '" + path + "' is a single value, not a section");
      }
      YAML::Node expanded(YAML::NodeType::Map);
      expanded[inner] = child.Scalar();
      section[parts[i]] = expanded;
    } else if (child.IsSequence()) {
      throw InputError(SourceLocation{document.path}, key,
                       text + ": '" + path + "' is a list; --set cannot reach inside a list");
    }
    YAML::Node next = section[parts[i]];
    section.reset(next);
  }
  section[parts.back()] = value;
  document.override_text[key] = text;
}

}  // namespace

// ---- YamlNode ---------------------------------------------------------------------------

YamlNode::Kind YamlNode::kind() const {
  if (data_->missing) return Kind::Missing;
  switch (data_->node.Type()) {
    case YAML::NodeType::Scalar: return Kind::Scalar;
    case YAML::NodeType::Sequence: return Kind::Sequence;
    case YAML::NodeType::Map: return Kind::Map;
    default: return Kind::Null;
  }
}

const std::string& YamlNode::path() const { return data_->path; }

std::string YamlNode::key() const {
  size_t dot = data_->path.find_last_of('.');
  return dot == std::string::npos ? data_->path : data_->path.substr(dot + 1);
}

SourceLocation YamlNode::location() const {
  const YAML::Mark& mark = data_->value_mark.is_null() ? data_->key_mark : data_->value_mark;
  return location_at(*data_->document, data_->path, mark);
}

std::string YamlNode::set_by() const { return override_for(*data_->document, data_->path); }

void YamlNode::fail(const std::string& message) const {
  const YAML::Mark& mark = data_->value_mark.is_null() ? data_->key_mark : data_->value_mark;
  fail_at(*data_->document, data_->path, mark, message);
}

std::string YamlNode::kind_name() const {
  switch (kind()) {
    case Kind::Missing: return "nothing";
    case Kind::Null: return "nothing";
    case Kind::Scalar: return quoted(data_->node.Scalar());
    case Kind::Sequence: return "a list";
    case Kind::Map: return "a map";
  }
  return "nothing";
}

std::string YamlNode::as_string() const {
  if (is_missing()) fail("missing required key " + quoted(path()));
  if (!is_scalar()) fail(quoted(path()) + " must be a string, got " + kind_name());
  return data_->node.Scalar();
}

int64_t YamlNode::as_integer(int64_t min, int64_t max) const {
  if (is_missing()) fail("missing required key " + quoted(path()));
  if (!is_scalar()) fail(quoted(path()) + " must be an integer, got " + kind_name());
  const std::string& text = data_->node.Scalar();
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    fail(quoted(path()) + " must be an integer, got " + quoted(text));
  }
  if (value < min) fail(quoted(path()) + " must be at least " + std::to_string(min) + ", got " + text);
  if (value > max) fail(quoted(path()) + " must be at most " + std::to_string(max) + ", got " + text);
  return value;
}

double YamlNode::as_number(double min, double max) const {
  if (is_missing()) fail("missing required key " + quoted(path()));
  if (!is_scalar()) fail(quoted(path()) + " must be a number, got " + kind_name());
  const std::string& text = data_->node.Scalar();
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(value)) {
    fail(quoted(path()) + " must be a number, got " + quoted(text));
  }
  std::ostringstream bound;
  if (value < min) {
    bound << min;
    fail(quoted(path()) + " must be at least " + bound.str() + ", got " + text);
  }
  if (value > max) {
    bound << max;
    fail(quoted(path()) + " must be at most " + bound.str() + ", got " + text);
  }
  return value;
}

bool YamlNode::as_bool() const {
  if (is_missing()) fail("missing required key " + quoted(path()));
  if (is_scalar()) {
    // YAML 1.1 spellings, which yaml-cpp and PyYAML both accept.
    std::string text = lowercase(data_->node.Scalar());
    if (text == "true" || text == "yes" || text == "on") return true;
    if (text == "false" || text == "no" || text == "off") return false;
  }
  fail(quoted(path()) + " must be true or false, got " + kind_name());
}

std::string YamlNode::as_choice(const std::vector<std::string>& choices) const {
  std::string value = as_string();
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return value;
  std::string list;
  for (const auto& choice : choices) list += (list.empty() ? "" : ", ") + choice;
  fail(quoted(path()) + " must be one of " + list + "; got " + quoted(value) +
       did_you_mean(value, choices));
}

std::vector<YamlNode> YamlNode::items() const {
  if (is_missing()) fail("missing required key " + quoted(path()));
  if (!is_sequence()) fail(quoted(path()) + " must be a list, got " + kind_name());
  std::vector<YamlNode> result;
  size_t index = 0;
  for (const auto& element : data_->node) {
    auto data = std::make_shared<YamlNodeData>();
    data->document = data_->document;
    data->node.reset(element);
    data->path = data_->path + "[" + std::to_string(index++) + "]";
    data->value_mark = element.Mark();
    result.push_back(YamlNode(data));
  }
  return result;
}

std::vector<std::string> YamlNode::as_string_list() const {
  if (is_scalar()) return {as_string()};
  std::vector<std::string> result;
  for (const auto& item : items()) result.push_back(item.as_string());
  return result;
}

YamlNode YamlNode::child(const std::string& key) const {
  auto data = std::make_shared<YamlNodeData>();
  data->document = data_->document;
  data->path = join_path(data_->path, key);
  YAML::Node value;
  YAML::Mark key_mark;
  if (is_map() && find_entry(data_->node, key, value, key_mark)) {
    data->node.reset(value);
    data->key_mark = key_mark;
    data->value_mark = value.Mark();
    // A null value (`key:` with nothing after it) has no mark of its own.
    if (data->value_mark.is_null() || value.IsNull()) data->value_mark = key_mark;
  } else {
    data->missing = true;
    data->key_mark = data_->value_mark.is_null() ? data_->key_mark : data_->value_mark;
  }
  return YamlNode(data);
}

std::vector<std::string> YamlNode::keys() const {
  std::vector<std::string> result;
  if (!is_map()) return result;
  for (auto it = data_->node.begin(); it != data_->node.end(); ++it) {
    if (!it->first.IsScalar()) {
      fail_at(*data_->document, data_->path, it->first.Mark(), "keys must be plain words");
    }
    result.push_back(it->first.Scalar());
  }
  return result;
}

void YamlNode::require_map() const {
  if (is_missing() || is_map()) return;
  std::string what = path().empty() ? std::string("the scenario") : quoted(path());
  fail(what + " must be a map of keys, got " + kind_name());
}

void YamlNode::reject_unknown_keys(const std::vector<std::string>& allowed) const {
  require_map();
  if (!is_map()) return;
  std::map<std::string, int64_t> seen_at_line;
  for (auto it = data_->node.begin(); it != data_->node.end(); ++it) {
    if (!it->first.IsScalar()) {
      fail_at(*data_->document, data_->path, it->first.Mark(), "keys must be plain words");
    }
    const std::string& key = it->first.Scalar();
    const std::string key_path = join_path(data_->path, key);
    const std::string section = data_->path.empty() ? "scenario" : quoted(data_->path);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      fail_at(*data_->document, key_path, it->first.Mark(),
              "unknown key " + quoted(key) + " in " + section + did_you_mean(key, allowed));
    }
    auto [previous, inserted] = seen_at_line.emplace(key, it->first.Mark().line + 1);
    if (!inserted) {
      fail_at(*data_->document, key_path, it->first.Mark(),
              "duplicate key " + quoted(key) + " in " + section + " (first given on line " +
                  std::to_string(previous->second) + ")");
    }
  }
}

std::string YamlNode::string_or(const std::string& key, const std::string& fallback) const {
  YamlNode value = child(key);
  return value.is_missing() ? fallback : value.as_string();
}

int64_t YamlNode::integer_or(const std::string& key, int64_t fallback, int64_t min,
                             int64_t max) const {
  YamlNode value = child(key);
  return value.is_missing() ? fallback : value.as_integer(min, max);
}

double YamlNode::number_or(const std::string& key, double fallback, double min, double max) const {
  YamlNode value = child(key);
  return value.is_missing() ? fallback : value.as_number(min, max);
}

bool YamlNode::bool_or(const std::string& key, bool fallback) const {
  YamlNode value = child(key);
  return value.is_missing() ? fallback : value.as_bool();
}

std::string YamlNode::choice_or(const std::string& key, const std::string& fallback,
                                const std::vector<std::string>& choices) const {
  YamlNode value = child(key);
  return value.is_missing() ? fallback : value.as_choice(choices);
}

// ---- YamlDocument -----------------------------------------------------------------------

YamlDocument YamlDocument::parse(const std::string& text, const std::string& path,
                                 const std::vector<std::string>& overrides,
                                 const ShorthandKey& shorthand) {
  auto state = std::make_shared<YamlDocumentState>();
  state->path = path;
  try {
    state->root = YAML::Load(text);
  } catch (const YAML::ParserException& error) {
    SourceLocation where{path};
    if (!error.mark.is_null()) {
      where.line = error.mark.line + 1;
      where.column = error.mark.column + 1;
    }
    throw InputError(where, "", "invalid YAML: " + error.msg);
  } catch (const YAML::Exception& error) {
    throw InputError(SourceLocation{path}, "", "invalid YAML: " + error.msg);
  }
  for (const auto& assignment : overrides) apply_override(*state, assignment, shorthand);
  return YamlDocument(std::move(state));
}

YamlDocument YamlDocument::load_file(const std::string& path,
                                     const std::vector<std::string>& overrides,
                                     const ShorthandKey& shorthand) {
  return parse(read_text_file(path, "", "YAML"), path, overrides, shorthand);
}

YamlNode YamlDocument::root() const {
  auto data = std::make_shared<YamlNodeData>();
  data->document = state_;
  data->node.reset(state_->root);
  data->value_mark = state_->root.Mark();
  if (data->value_mark.is_null()) data->value_mark = YAML::Mark();  // line 0, column 0
  return YamlNode(data);
}

const std::string& YamlDocument::path() const { return state_->path; }

}  // namespace oomcast::scenario
