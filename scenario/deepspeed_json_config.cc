// DeepSpeed JSON config -> DeepSpeedJson. nlohmann::json has no source positions, so an
// error's line is found by searching the text for the key's quoted name after its parent's.
#include "scenario/deepspeed_json_config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/bounded_file.h"
#include "base/input_error.h"
#include "scenario/size_limits.h"
#include "scenario/zero_keys.h"

namespace oomcast::scenario {

namespace {

using Json = nlohmann::json;

class JsonConfigReader {
 public:
  JsonConfigReader(std::string path, std::string text) : path_(std::move(path)), text_(std::move(text)) {}

  [[noreturn]] void fail(const std::vector<std::string>& keys, const std::string& message) const {
    std::string dotted;
    for (const auto& key : keys) dotted += (dotted.empty() ? "" : ".") + key;
    throw InputError(SourceLocation{path_, line_of(keys), 0, -1}, dotted, "'" + dotted + "' " + message);
  }

  // "auto" -> nullopt; numbers (5e8 included) -> count.
  std::optional<int64_t> count(const Json& value, const std::vector<std::string>& keys,
                               int64_t limit = int64_t{1} << 62) const {
    if (value.is_string() && value.get<std::string>() == "auto") return std::nullopt;
    if (!value.is_number()) fail(keys, "must be a number or \"auto\"");
    double number = value.get<double>();
    if (number < 0 || number > 9.2e18 || std::floor(number) != number) fail(keys, "must be a whole number >= 0");
    if (number > static_cast<double>(limit)) {
      fail(keys, std::to_string(static_cast<int64_t>(number)) + " exceeds the limit of " + std::to_string(limit));
    }
    return static_cast<int64_t>(number);
  }

  std::optional<bool> flag(const Json& value, const std::vector<std::string>& keys) const {
    if (value.is_string() && value.get<std::string>() == "auto") return std::nullopt;
    if (!value.is_boolean()) fail(keys, "must be true, false or \"auto\"");
    return value.get<bool>();
  }

 private:
  int64_t line_of(const std::vector<std::string>& keys) const {
    size_t at = 0;
    for (const auto& key : keys) {
      size_t found = text_.find("\"" + key + "\"", at);
      if (found == std::string::npos) break;
      at = found;
    }
    return 1 + std::count(text_.begin(), text_.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  }

  std::string path_;
  std::string text_;
};

std::string list(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& key : keys) text += (text.empty() ? "" : ", ") + key;
  return text;
}

void read_offload(const JsonConfigReader& reader, const Json& section, const std::string& name, ZeroOffloadConfig& out,
                  std::vector<std::string>& unmodelled) {
  if (section.is_null()) return;
  if (!section.is_object()) reader.fail({"zero_optimization", name}, "must be an object");
  for (const auto& [key, value] : section.items()) {
    if (key == "device") {
      std::string device = value.is_string() ? value.get<std::string>() : "";
      if (device == "none") out.device = OffloadDevice::None;
      else if (device == "cpu") out.device = OffloadDevice::Cpu;
      else if (device == "nvme") reader.fail({"zero_optimization", name, key}, "nvme offload is not modelled (use cpu or none)");
      else reader.fail({"zero_optimization", name, key}, "must be \"none\" or \"cpu\"");
    } else if (key == "pin_memory") {
      out.pin_memory = reader.flag(value, {"zero_optimization", name, key}).value_or(false);
    } else {
      unmodelled.push_back("zero_optimization." + name + "." + key);
    }
  }
}

void read_zero(const JsonConfigReader& reader, const Json& zero, int64_t hidden, DeepSpeedJson& out,
               std::vector<std::string>& unmodelled) {
  if (!zero.is_object()) reader.fail({"zero_optimization"}, "must be an object");
  for (const auto& [key, value] : zero.items()) {
    const std::vector<std::string> keys = {"zero_optimization", key};
    if (key == "stage") {
      std::optional<int64_t> stage = reader.count(value, keys);
      if (!stage || *stage > 3) reader.fail(keys, "must be 0, 1, 2 or 3");
      out.zero.stage = static_cast<int>(*stage);
      continue;
    }
    if (key == "offload_optimizer") {
      read_offload(reader, value, key, out.zero.offload_optimizer, unmodelled);
      continue;
    }
    if (key == "offload_param") {
      read_offload(reader, value, key, out.zero.offload_param, unmodelled);
      continue;
    }
    bool known = false;
    for (const auto& entry : zero_keys::kCounts) {
      if (key != entry.name) continue;
      known = true;
      std::optional<int64_t> number = reader.count(value, keys);
      out.zero.*entry.member = number ? *number : zero_keys::auto_value(entry.name, hidden, out.zero.*entry.member);
    }
    for (const auto& entry : zero_keys::kFlags) {
      if (key != entry.name) continue;
      known = true;
      std::optional<bool> flag = reader.flag(value, keys);
      if (flag) out.zero.*entry.member = *flag;
      if (std::string_view(entry.name) == "overlap_comm") out.overlap_comm_given = flag.has_value();
    }
    if (!known) unmodelled.push_back("zero_optimization." + key);
  }
}

HalfPrecision read_half(const JsonConfigReader& reader, const Json& section, const char* name, HalfPrecision when_on,
                        std::vector<std::string>& unmodelled, std::vector<std::string>& half_auto) {
  if (!section.is_object()) reader.fail({name}, "must be an object");
  HalfPrecision result = HalfPrecision::Unset;
  for (const auto& [key, value] : section.items()) {
    if (key == "enabled") {
      std::optional<bool> enabled = reader.flag(value, {name, key});
      if (enabled) result = *enabled ? when_on : HalfPrecision::Disabled;
      if (!enabled) half_auto.push_back(name);
    } else {
      unmodelled.push_back(std::string(name) + "." + key);  // loss scaling knobs: a few scalars
    }
  }
  return result;
}

}  // namespace

DeepSpeedJson read_deepspeed_json(const std::string& path, int64_t hidden) {
  std::string text = read_text_file(path, "deepspeed_config", "DeepSpeed config");
  Json config;
  try {
    config = Json::parse(text);
  } catch (const Json::parse_error& error) {
    throw InputError(SourceLocation{path, 0, 0, -1}, "deepspeed_config", std::string("not valid JSON: ") + error.what());
  }
  JsonConfigReader reader(path, text);
  if (!config.is_object()) reader.fail({}, "a DeepSpeed config must be a JSON object");
  DeepSpeedJson out;
  std::vector<std::string> unmodelled;
  HalfPrecision bf16 = HalfPrecision::Unset;
  HalfPrecision fp16 = HalfPrecision::Unset;
  for (const auto& [key, value] : config.items()) {
    if (key == "zero_optimization") {
      read_zero(reader, value, hidden, out, unmodelled);
    } else if (key == "bf16") {
      bf16 = read_half(reader, value, "bf16", HalfPrecision::Bf16, unmodelled, out.half_auto);
    } else if (key == "fp16") {
      fp16 = read_half(reader, value, "fp16", HalfPrecision::Fp16, unmodelled, out.half_auto);
    } else if (key == "train_micro_batch_size_per_gpu") {
      out.micro_batch = reader.count(value, {key}, kMaxBatchSize);
    } else if (key == "gradient_accumulation_steps") {
      out.grad_accum = reader.count(value, {key}, kMaxGradAccumSteps);
    } else if (key == "train_batch_size") {
      out.train_batch_size = reader.count(value, {key}, kMaxTrainBatchSize);
    } else {
      unmodelled.push_back(key);
    }
  }
  if (bf16 == HalfPrecision::Bf16 && fp16 == HalfPrecision::Fp16) reader.fail({"fp16"}, "and bf16 cannot both be enabled");
  if (bf16 == HalfPrecision::Bf16 || fp16 == HalfPrecision::Fp16) {
    out.half = bf16 == HalfPrecision::Bf16 ? HalfPrecision::Bf16 : HalfPrecision::Fp16;
  } else if (bf16 == HalfPrecision::Disabled || fp16 == HalfPrecision::Disabled) {
    out.half = HalfPrecision::Disabled;
  }
  for (const auto* count : {&out.micro_batch, &out.grad_accum, &out.train_batch_size}) {
    if (*count && **count == 0) reader.fail({}, "batch sizes must be at least 1");
  }
  if (!out.overlap_comm_given) out.zero.overlap_comm = out.zero.stage == 3;  // DeepSpeed's dynamic default
  if (!unmodelled.empty()) {
    out.warnings.push_back(path + ": DeepSpeed keys not modelled (no effect on the prediction): " + list(unmodelled));
  }
  return out;
}

}  // namespace oomcast::scenario
