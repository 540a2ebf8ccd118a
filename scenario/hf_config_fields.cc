// Shared checks for the Hugging Face config.json readers, and the keys every HF config may
// carry that do not change how much memory a training step takes.
#include "scenario/hf_config_fields.h"

#include <algorithm>

#include "base/input_error.h"

namespace oomcast::scenario::hf {

namespace {

// The largest dimension a config may give: 2^24 is above every published width, vocabulary
// and context length, and keeps every product of two dimensions far from int64 overflow.
constexpr int64_t kMaxDimension = int64_t{1} << 24;

// Keys of PretrainedConfig and of the supported model types that leave the training step's
// memory unchanged: token ids, initialisation, epsilons, rotary base and scaling (the tables
// keep their size), dropout rates (nn.Dropout allocates the same for any p > 0; the scenario's
// `dropout` decides), generation and tokenizer settings, labels of heads not planned.
const std::set<std::string>& keys_without_memory_effect() {
  static const std::set<std::string> keys = {
      "_name_or_path", "architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
      "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
      "initializer_range", "initializer_factor", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon",
      "norm_eps", "rope_theta", "rope_scaling", "rotary_emb_base", "use_cache", "attention_dropout",
      "hidden_dropout", "hidden_dropout_prob", "attention_probs_dropout_prob", "resid_pdrop", "embd_pdrop",
      "attn_pdrop", "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
      "summary_use_proj", "task_specific_params", "pretraining_tp", "tokenizer_class", "return_dict",
      "output_attentions", "output_hidden_states", "problem_type", "finetuning_task", "gradient_checkpointing",
      "classifier_dropout", "chunk_size_feed_forward", "bad_words_ids", "do_sample", "max_length",
      "min_length", "num_beams", "temperature", "top_k", "top_p", "repetition_penalty", "length_penalty",
      "no_repeat_ngram_size", "early_stopping", "prefix", "ctc_loss_reduction", "is_encoder_decoder",
      "tie_encoder_decoder", "use_bfloat16", "n_ctx", "original_max_position_embeddings",
      "attn_implementation", "_attn_implementation", "auto_map", "quantization_config", "use_return_dict",
      "torchscript", "pruned_heads", "forced_bos_token_id", "forced_eos_token_id", "suppress_tokens",
      "begin_suppress_tokens", "typical_p", "diversity_penalty", "num_beam_groups", "num_return_sequences",
      "output_scores", "return_dict_in_generate", "remove_invalid_values", "exponential_decay_length_penalty",
      "encoder_no_repeat_ngram_size", "cross_attention_hidden_size", "tf_legacy_loss", "label2id", "id2label",
      "scale_attn_weights", "reorder_and_upcast_attn", "use_flash_attn", "use_sdpa", "layer_types_comment",
      "bias_dropout_fusion", "router_jitter_noise", "embedding_dropout",
      "classifier_dropout_prob", "mlp_dropout", "ffn_dropout", "residual_dropout", "hidden_dropout_rate"};
  return keys;
}

}  // namespace

HfConfigFields::HfConfigFields(const nlohmann::json& config, std::string path)
    : config_(config), path_(std::move(path)) {}

bool HfConfigFields::has(const std::string& key) const { return config_.contains(key) && !config_[key].is_null(); }

void HfConfigFields::fail(const std::string& key, const std::string& message) const {
  throw InputError(SourceLocation{path_, 0, 0, -1}, key, message);
}

int64_t HfConfigFields::required_int(const std::string& key) {
  if (!has(key)) fail(key, "config.json needs an integer '" + key + "'");
  return optional_int(key, 0);
}

int64_t HfConfigFields::required_int_of(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    if (has(key)) return required_int(key);
  }
  std::string names;
  for (const auto& key : keys) names += (names.empty() ? "'" : " or '") + key + "'";
  fail(keys.front(), "config.json needs an integer " + names);
}

int64_t HfConfigFields::optional_int(const std::string& key, int64_t fallback, int64_t minimum) {
  read_.insert(key);
  if (!has(key)) return fallback;
  const nlohmann::json& value = config_[key];
  if (!value.is_number_integer()) fail(key, "config.json key '" + key + "' must be an integer, not " + value.dump());
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(kMaxDimension)) {
    fail(key, "config.json key '" + key + "' = " + value.dump() + " is beyond the limit " + std::to_string(kMaxDimension));
  }
  const auto number = value.get<int64_t>();
  if (number < minimum) {
    fail(key, "config.json key '" + key + "' must be at least " + std::to_string(minimum) + ", not " + value.dump());
  }
  if (number > kMaxDimension) {
    fail(key, "config.json key '" + key + "' = " + value.dump() + " is beyond the limit " + std::to_string(kMaxDimension));
  }
  return number;
}

std::vector<int64_t> HfConfigFields::optional_int_list(const std::string& key, int64_t minimum) {
  read_.insert(key);
  std::vector<int64_t> numbers;
  if (!has(key)) return numbers;
  const nlohmann::json& value = config_[key];
  if (!value.is_array()) fail(key, "config.json key '" + key + "' must be a list of integers, not " + value.dump());
  if (value.size() > static_cast<size_t>(kMaxDimension)) fail(key, "config.json key '" + key + "' has too many entries");
  for (const nlohmann::json& entry : value) {
    if (!entry.is_number_integer()) {
      fail(key, "config.json key '" + key + "' must be a list of integers; it holds " + entry.dump());
    }
    if (entry.is_number_unsigned() && entry.get<uint64_t>() > static_cast<uint64_t>(kMaxDimension)) {
      fail(key, "config.json key '" + key + "' holds " + entry.dump() + ", beyond the limit " +
                    std::to_string(kMaxDimension));
    }
    const auto number = entry.get<int64_t>();
    if (number < minimum) {
      fail(key, "config.json key '" + key + "' entries must be at least " + std::to_string(minimum) + ", not " +
                    entry.dump());
    }
    numbers.push_back(number);
  }
  return numbers;
}

bool HfConfigFields::optional_bool(const std::string& key, bool fallback) {
  read_.insert(key);
  if (!has(key)) return fallback;
  const nlohmann::json& value = config_[key];
  if (!value.is_boolean()) fail(key, "config.json key '" + key + "' must be true or false, not " + value.dump());
  return value.get<bool>();
}

double HfConfigFields::optional_number(const std::string& key, double fallback) {
  read_.insert(key);
  if (!has(key)) return fallback;
  const nlohmann::json& value = config_[key];
  if (!value.is_number()) fail(key, "config.json key '" + key + "' must be a number, not " + value.dump());
  return value.get<double>();
}

std::string HfConfigFields::optional_string(const std::string& key, const std::string& fallback) {
  read_.insert(key);
  if (!has(key)) return fallback;
  const nlohmann::json& value = config_[key];
  if (!value.is_string()) fail(key, "config.json key '" + key + "' must be a string, not " + value.dump());
  return value.get<std::string>();
}

void HfConfigFields::read(const std::string& key) { read_.insert(key); }

size_t HfConfigFields::json_size(const std::string& key) const {
  if (!has(key)) return 0;
  const nlohmann::json& value = config_[key];
  return value.is_object() || value.is_array() ? value.size() : 0;
}

void HfConfigFields::expect_string(const std::string& key, const std::vector<std::string>& accepted) {
  if (!has(key)) {
    read_.insert(key);
    return;
  }
  std::string value = optional_string(key, "");
  if (std::find(accepted.begin(), accepted.end(), value) != accepted.end()) return;
  std::string list;
  for (const auto& entry : accepted) list += (list.empty() ? "" : ", ") + entry;
  notes_.push_back(key + " = \"" + value + "\" is planned as " + list);
}

void HfConfigFields::note_unmodelled(const std::string& key, const std::string& why) {
  read_.insert(key);
  notes_.push_back(key + ": " + why);
}

std::vector<std::string> HfConfigFields::unread_keys() const {
  std::vector<std::string> keys;
  for (const auto& [key, value] : config_.items()) {
    if (read_.count(key) || keys_without_memory_effect().count(key)) continue;
    keys.push_back(key);
  }
  return keys;
}

void read_transformer_dims(HfConfigFields& fields, ModelConfig& model) {
  model.dims["layers"] = fields.required_int("num_hidden_layers");
  model.dims["hidden"] = fields.required_int("hidden_size");
  model.dims["heads"] = fields.required_int("num_attention_heads");
  model.dims["ffn_hidden"] = fields.required_int("intermediate_size");
}

void read_tied_embeddings(HfConfigFields& fields, ModelConfig& model, bool fallback) {
  model.options["tied_embeddings"] = fields.optional_bool("tie_word_embeddings", fallback) ? "true" : "false";
}

}  // namespace oomcast::scenario::hf
