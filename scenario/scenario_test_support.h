// Helpers shared by the tests of every layer from scenario/ up: the error an action throws,
// scenarios and models built in code.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "base/input_error.h"
#include "scenario/model_catalog.h"
#include "scenario/scenario.h"

namespace oomcast::scenario::testing {

// What `action` throws as an InputError, or "no error".
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

// A CPU scenario (no workspaces) for `model_name` with the given precision and attention.
inline Scenario cpu_scenario(const std::string& model_name, int64_t batch, int64_t seq_len,
                             Precision precision = Precision::Fp32, AttentionImpl attention = AttentionImpl::SdpaMath) {
  Scenario scenario;
  scenario.model = resolve_model(model_name, "");
  scenario.batch_size = batch;
  scenario.seq_len = seq_len;
  scenario.precision = precision;
  scenario.attention = attention;
  scenario.iterations = 2;
  scenario.device.is_cpu = true;
  scenario.device.profile = "cpu";
  return scenario;
}

inline ModelConfig inline_model(const std::string& family, std::map<std::string, int64_t> dims,
                                std::map<std::string, std::string> options = {}) {
  ModelConfig model;
  model.name = family + "-test";
  model.family = family;
  model.dims = std::move(dims);
  model.options = std::move(options);
  return model;
}

}  // namespace oomcast::scenario::testing
