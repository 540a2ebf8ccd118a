// Parser of PYTORCH_CUDA_ALLOC_CONF. Reproduces PyTorch's lexer (", : [ ]" are tokens,
// spaces dropped), its grammar (key:value pairs, trailing comma accepted) and its error
// texts, so users see the message PyTorch would give them (spec §6).
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/edit_distance.h"
#include "base/input_error.h"
#include "sim/allocator_config.h"
#include "sim/allocator_release_facts.h"

namespace oomcast::sim {
namespace {

const std::vector<std::string>& known_options() {
  static const std::vector<std::string> options = {
      "backend", "max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
      "garbage_collection_threshold", "expandable_segments", "release_lock_on_cudamalloc",
      "pinned_use_cuda_host_register", "pinned_num_register_threads", "pinned_use_background_threads"};
  return options;
}

std::vector<std::string> lex(std::string_view text, bool any_whitespace) {
  std::vector<std::string> tokens;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) tokens.push_back(std::move(current));
    current.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      flush();
      tokens.emplace_back(1, c);
    } else if (c == ' ' || (any_whitespace && (c == '\t' || c == '\n' || c == '\r'))) {
      continue;
    } else {
      current += c;
    }
  }
  flush();
  return tokens;
}

class ConfParser {
 public:
  ConfParser(std::string_view text, AllocatorConfig& config)
      : config_(config),
        release_facts_(allocator_release_facts(config.torch_version)),
        tokens_(lex(text, release_facts_.conf_drops_any_whitespace)) {}

  void parse() {
    for (index_ = 0; index_ < tokens_.size(); ++index_) {
      key_ = tokens_[index_];
      parse_option();
      if (index_ + 1 < tokens_.size()) expect(",");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& pytorch_message) const {
    throw InputError({"PYTORCH_CUDA_ALLOC_CONF", 0, 0, -1}, key_,
                     "invalid option '" + key_ + "': " + pytorch_message);
  }

  const std::string& next_token(const char* what) {
    if (++index_ >= tokens_.size()) fail(std::string("Error parsing CachingAllocator settings, expected ") + what);
    return tokens_[index_];
  }

  void expect(const char* token) {
    if (next_token(token) != token) fail(std::string("Error parsing CachingAllocator settings, expected ") + token);
  }

  uint64_t parse_unsigned(const std::string& token) const {
    // PyTorch uses stoi/stoul, which throw std::invalid_argument for non-numbers.
    if (token.empty() || token.find_first_not_of("0123456789") != std::string::npos) {
      if (!token.empty() && token[0] == '-') fail("value '" + token + "' must not be negative");
      fail("value '" + token + "' is not an integer (PyTorch raises std::invalid_argument from stoi)");
    }
    errno = 0;
    uint64_t value = std::strtoull(token.c_str(), nullptr, 10);
    if (errno == ERANGE || value > (1ull << 40)) fail("value '" + token + "' is out of range");
    return value;
  }

  bool parse_bool(const std::string& option) {
    expect(":");
    const std::string& value = next_token("a value");
    if (value == "True") return true;
    if (value == "False") return false;
    fail("Expected a single True/False argument for " + option);
  }

  void parse_option() {
    if (key_ == "backend") {
      expect(":");
      const std::string& value = next_token("a value");
      if (value == "cudaMallocAsync")
        fail("backend:cudaMallocAsync uses CUDA's stream-ordered allocator, which oomcast does not simulate");
      if (value != "native") fail("Unknown allocator backend, options are native and cudaMallocAsync");
    } else if (key_ == "max_split_size_mb") {
      config_.max_split_size = parse_megabytes_above_20("max_split_size_mb");
    } else if (key_ == "max_non_split_rounding_mb" && release_facts_.conf_max_non_split_rounding_mb) {
      config_.max_non_split_rounding_size = parse_megabytes_above_20("max_non_split_rounding_mb");
    } else if (key_ == "roundup_power2_divisions") {
      parse_roundup_divisions();
    } else if (key_ == "garbage_collection_threshold") {
      expect(":");
      const std::string& value = next_token("a value");
      char* end = nullptr;
      double threshold = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0') fail("value '" + value + "' is not a number (PyTorch raises std::invalid_argument from stod)");
      if (threshold <= 0.0) fail("garbage_collect_threshold too small, set it 0.0~1.0");
      if (threshold >= 1.0) fail("garbage_collect_threshold too big, set it 0.0~1.0");
      config_.garbage_collection_threshold = threshold;
    } else if (key_ == "expandable_segments") {
      config_.expandable_segments = parse_bool("expandable_segments");
    } else if (key_ == "release_lock_on_cudamalloc" || key_ == "release_lock_on_hipmalloc") {
      config_.release_lock_on_cudamalloc = parse_bool(key_);
    } else if (key_ == "pinned_use_cuda_host_register" || key_ == "pinned_use_hip_host_register") {
      config_.pinned_use_cuda_host_register = parse_bool(key_);
    } else if (key_ == "pinned_use_background_threads" && release_facts_.conf_pinned_use_background_threads) {
      config_.pinned_use_background_threads = parse_bool(key_);
    } else if (key_ == "pinned_num_register_threads") {
      expect(":");
      uint64_t threads = parse_unsigned(next_token("a value"));
      if (!std::has_single_bit(threads)) fail("Number of register threads has to be power of 2 ");
      if (threads > 128) fail("Number of register threads should be less than or equal to 128");
      config_.pinned_num_register_threads = threads;
    } else {
      throw InputError({"PYTORCH_CUDA_ALLOC_CONF", 0, 0, -1}, key_,
                       "Unrecognized CachingAllocator option: " + key_ + did_you_mean(key_, known_options()));
    }
  }

  uint64_t parse_megabytes_above_20(const std::string& option) {
    expect(":");
    uint64_t megabytes = parse_unsigned(next_token("a value"));
    bool too_small = release_facts_.conf_split_size_accepts_20 ? megabytes < 20 : megabytes <= 20;
    if (too_small)
      fail("CachingAllocator option " + option + " too small, must be " +
           (release_facts_.conf_split_size_accepts_20 ? ">= 20" : "> 20"));
    return megabytes << 20;
  }

  bool valid_division(uint64_t value, bool in_list) const {
    if (std::has_single_bit(value)) return true;
    return in_list && value == 0 && release_facts_.conf_roundup_accepts_zero;
  }

  void parse_roundup_divisions() {
    expect(":");
    auto& table = config_.roundup_power2_divisions;
    const std::string& first = next_token("a value");
    if (first != "[") {
      uint64_t divisions = parse_unsigned(first);
      if (!valid_division(divisions, false)) fail("For roundups, the divisions has to be power of 2 ");
      table.fill(divisions);
      return;
    }
    const char* const list_error = release_facts_.conf_roundup_accepts_zero
                                       ? "For roundups, the divisions has to be power of 2 or 0 to disable roundup "
                                       : "For roundups, the divisions has to be power of 2 ";
    bool first_key = true;
    size_t last_index = 0;
    while (true) {
      const std::string& interval = next_token("]");
      if (interval == "]") break;
      expect(":");
      uint64_t divisions = parse_unsigned(next_token("a value"));
      if (!valid_division(divisions, true)) fail(list_error);
      if (interval == ">") {
        // Through 2.8 the fill starts at the last key's own entry, overwriting it.
        size_t start = release_facts_.conf_roundup_fill_after_last_key ? last_index + 1 : last_index;
        for (size_t i = start; i < table.size(); ++i) table[i] = divisions;
      } else {
        uint64_t megabytes = parse_unsigned(interval);
        if (!std::has_single_bit(megabytes)) fail("For roundups, the intervals have to be power of 2 ");
        size_t index = static_cast<size_t>(63 - std::countl_zero(megabytes));
        if (index > table.size() - 1) index = table.size() - 1;
        if (first_key) {
          for (size_t i = 0; i < index; ++i) table[i] = divisions;
          first_key = false;
        }
        table[index] = divisions;
        last_index = index;
      }
      if (index_ + 1 >= tokens_.size()) fail("Error parsing roundup_power2_divisions value");
      if (tokens_[index_ + 1] != "]") expect(",");
    }
  }

  AllocatorConfig& config_;
  const AllocatorReleaseFacts& release_facts_;
  std::vector<std::string> tokens_;
  size_t index_ = 0;
  std::string key_;
};

}  // namespace

AllocatorConfig parse_alloc_conf(std::string_view text, const AllocatorConfig& base) {
  AllocatorConfig config = base;
  config.max_split_size = AllocatorConfig::kUnlimited;
  config.roundup_power2_divisions.fill(0);
  config.garbage_collection_threshold = 0.0;
  config.source_text = std::string(text);
  ConfParser(text, config).parse();
  return config;
}

}  // namespace oomcast::sim
