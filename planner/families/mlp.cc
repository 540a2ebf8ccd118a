// A plain MLP: `layers` hidden Linear + ReLU layers and an output Linear, trained with
// cross-entropy. Small enough to work out its whole schedule by hand in tests.
#include <string>
#include <vector>

#include "planner/families/families.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

using scenario::ModelConfig;
using scenario::families::dim;
using scenario::families::option_enabled;

void build_mlp(GraphBuilder& g, const ModelConfig& model) {
  const int64_t input = dim(model, "input");
  const int64_t hidden = dim(model, "hidden");
  const int64_t layers = dim(model, "layers");
  const int64_t output = dim(model, "output");
  const bool bias = option_enabled(model, "bias", true);
  const int64_t batch = g.context().batch;

  std::vector<TensorId> weights, biases;
  std::vector<int64_t> widths{input};
  for (int64_t i = 0; i < layers; ++i) widths.push_back(hidden);
  widths.push_back(output);
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    std::string name = "layers." + std::to_string(i);
    weights.push_back(g.parameter(name + ".weight", {widths[i + 1], widths[i]}));
    biases.push_back(bias ? g.parameter(name + ".bias", {widths[i + 1]}) : kNoTensor);
  }

  TensorId x = g.input("inputs", static_cast<uint64_t>(batch * input), g.precision().parameter_dtype);
  TensorId targets = g.input("targets", static_cast<uint64_t>(batch), DType::Int64);
  for (size_t i = 0; i < weights.size(); ++i) {
    std::string name = "layers." + std::to_string(i);
    x = ops::linear(g, name, x, weights[i], biases[i], widths[i], widths[i + 1]);
    if (i + 1 < weights.size()) x = ops::relu(g, "relu." + std::to_string(i), x, /*in_place=*/false);
  }
  TensorId loss = ops::cross_entropy(g, "cross_entropy", x, targets, output);
  g.set_named_output("logits", x);
  g.set_loss(loss);
}

}  // namespace oomcast::planner::families
