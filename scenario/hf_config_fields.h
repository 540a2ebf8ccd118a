// HfConfigFields: reads the keys of one Hugging Face config.json with the checks every reader
// shares (integers that are integers and positive, booleans that are booleans, within limits),
// and remembers which keys a reader used so that the rest can be reported instead of dropped.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "scenario/scenario.h"

namespace oomcast::scenario::hf {

class HfConfigFields {
 public:
  HfConfigFields(const nlohmann::json& config, std::string path);

  const std::string& path() const { return path_; }
  bool has(const std::string& key) const;  // present and not null

  // A positive integer; throws InputError naming the key when missing or not one.
  int64_t required_int(const std::string& key);
  // The first of `keys` present (HF renamed some, e.g. n_embd / hidden_size); required.
  int64_t required_int_of(const std::vector<std::string>& keys);
  // `fallback` when missing or null; otherwise a positive integer (>= `minimum`).
  int64_t optional_int(const std::string& key, int64_t fallback, int64_t minimum = 1);
  // true/false only: "yes", 1 or "true" in quotes are errors naming the key.
  // An array of integers >= `minimum`; empty when missing or null.
  std::vector<int64_t> optional_int_list(const std::string& key, int64_t minimum = 0);
  bool optional_bool(const std::string& key, bool fallback);
  double optional_number(const std::string& key, double fallback);
  std::string optional_string(const std::string& key, const std::string& fallback);
  // The number of entries of an object or array key (id2label); 0 when it is neither.
  size_t json_size(const std::string& key) const;
  // Marks a key as read without taking its value (it is known not to change memory here).
  void read(const std::string& key);
  // A key whose value must be one of `accepted` to be planned as modelled; any other value is
  // reported as not modelled (a warning), not refused.
  void expect_string(const std::string& key, const std::vector<std::string>& accepted);
  // A number the family cannot plan when it is non-zero/true (e.g. a dropout rate is fine, an
  // unsupported feature is not): a warning naming the key.
  void note_unmodelled(const std::string& key, const std::string& why);

  // Keys present in the file that no reader used and that are not known to leave memory
  // unchanged.
  std::vector<std::string> unread_keys() const;
  std::vector<std::string> notes() const { return notes_; }

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  const nlohmann::json& config_;
  std::string path_;
  std::set<std::string> read_;
  std::vector<std::string> notes_;
};

// The dimensions every llama-style HF config names the same way: num_hidden_layers,
// hidden_size, num_attention_heads, intermediate_size.
void read_transformer_dims(HfConfigFields& fields, ModelConfig& model);
// "tie_word_embeddings" with the given default into model.options["tied_embeddings"].
void read_tied_embeddings(HfConfigFields& fields, ModelConfig& model, bool fallback);

}  // namespace oomcast::scenario::hf
