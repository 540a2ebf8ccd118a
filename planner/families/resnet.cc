// ResNet as torchvision lays it out: 7x7 conv, batch norm (running stats buffers), in-place
// ReLU, max pool, four stages of basic blocks (18/34) or bottlenecks (50/101/152) with
// 1x1 downsample projections, adaptive average pool and the fc classifier.
#include <string>
#include <vector>

#include "base/input_error.h"
#include "planner/families/families.h"
#include "planner/ops/op_catalogue.h"

namespace oomcast::planner::families {

using scenario::ModelConfig;
using scenario::families::dim;

namespace {

struct BatchNormParams {
  TensorId weight, bias, running_mean, running_var;
};

struct ConvBn {
  TensorId weight;
  BatchNormParams bn;
  ops::ConvShape shape;
};

struct ResBlock {
  std::vector<ConvBn> convs;   // 2 (basic) or 3 (bottleneck)
  bool has_downsample = false;
  ConvBn downsample;
};

// Registers a BatchNorm2d: weight, bias (parameters), running_mean, running_var and
// num_batches_tracked (buffers, in that order).
BatchNormParams batch_norm_params(GraphBuilder& g, const std::string& name, int64_t channels) {
  BatchNormParams bn;
  bn.weight = g.parameter(name + ".weight", {channels});
  bn.bias = g.parameter(name + ".bias", {channels});
  // model.to(dtype) converts float buffers too; num_batches_tracked stays int64.
  DType stats = g.precision().parameter_dtype;
  bn.running_mean = g.buffer(name + ".running_mean", static_cast<uint64_t>(channels), stats);
  bn.running_var = g.buffer(name + ".running_var", static_cast<uint64_t>(channels), stats);
  g.buffer(name + ".num_batches_tracked", 1, DType::Int64);
  return bn;
}

ConvBn conv_bn(GraphBuilder& g, const std::string& conv_name, const std::string& bn_name, int64_t in, int64_t out,
               int64_t kernel, int64_t stride, int64_t padding) {
  ConvBn result;
  result.shape = ops::ConvShape{in, out, kernel, stride, padding};
  result.weight = g.parameter(conv_name + ".weight", {out, in, kernel, kernel});
  result.bn = batch_norm_params(g, bn_name, out);
  return result;
}

TensorId run_conv_bn(GraphBuilder& g, const ConvBn& layer, const std::string& conv_name, const std::string& bn_name,
                     TensorId x, int64_t* height, int64_t* width) {
  TensorId y = ops::conv2d(g, conv_name, x, layer.weight, kNoTensor, layer.shape, height, width);
  return ops::batch_norm(g, bn_name, y, layer.bn.weight, layer.bn.bias, layer.bn.running_mean, layer.bn.running_var,
                         layer.shape.out_channels);
}

}  // namespace

void build_resnet(GraphBuilder& g, const ModelConfig& model) {
  const int64_t depth = dim(model, "depth");
  const int64_t classes = dim(model, "num_classes");
  const int64_t channels = dim(model, "channels");
  std::vector<int64_t> stage_blocks;
  bool bottleneck = false;
  switch (depth) {
    case 18: stage_blocks = {2, 2, 2, 2}; break;
    case 34: stage_blocks = {3, 4, 6, 3}; break;
    case 50: stage_blocks = {3, 4, 6, 3}; bottleneck = true; break;
    case 101: stage_blocks = {3, 4, 23, 3}; bottleneck = true; break;
    case 152: stage_blocks = {3, 8, 36, 3}; bottleneck = true; break;
    default:
      throw InputError(SourceLocation{model.source, 0, 0, -1}, "depth",
                       "resnet depth must be 18, 34, 50, 101 or 152, got " + std::to_string(depth));
  }
  const int64_t expansion = bottleneck ? 4 : 1;
  const int64_t batch = g.context().batch;
  const int64_t image = g.context().seq_len;

  ConvBn stem = conv_bn(g, "conv1", "bn1", channels, 64, 7, 2, 3);
  std::vector<std::vector<ResBlock>> stages(4);
  int64_t inplanes = 64;
  for (int stage = 0; stage < 4; ++stage) {
    int64_t planes = 64 << stage;
    for (int64_t i = 0; i < stage_blocks[static_cast<size_t>(stage)]; ++i) {
      std::string prefix = "layer" + std::to_string(stage + 1) + "." + std::to_string(i) + ".";
      int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      ResBlock block;
      if (bottleneck) {
        block.convs.push_back(conv_bn(g, prefix + "conv1", prefix + "bn1", inplanes, planes, 1, 1, 0));
        block.convs.push_back(conv_bn(g, prefix + "conv2", prefix + "bn2", planes, planes, 3, stride, 1));
        block.convs.push_back(conv_bn(g, prefix + "conv3", prefix + "bn3", planes, planes * expansion, 1, 1, 0));
      } else {
        block.convs.push_back(conv_bn(g, prefix + "conv1", prefix + "bn1", inplanes, planes, 3, stride, 1));
        block.convs.push_back(conv_bn(g, prefix + "conv2", prefix + "bn2", planes, planes, 3, 1, 1));
      }
      if (stride != 1 || inplanes != planes * expansion) {
        block.has_downsample = true;
        block.downsample =
            conv_bn(g, prefix + "downsample.0", prefix + "downsample.1", inplanes, planes * expansion, 1, stride, 0);
      }
      inplanes = planes * expansion;
      stages[static_cast<size_t>(stage)].push_back(std::move(block));
    }
  }
  TensorId fc_w = g.parameter("fc.weight", {classes, 512 * expansion});
  TensorId fc_b = g.parameter("fc.bias", {classes});

  DType image_dtype = g.precision().parameter_dtype;
  TensorId images = g.input("images", static_cast<uint64_t>(batch * channels * image * image), image_dtype);
  TensorId labels = g.input("labels", static_cast<uint64_t>(batch), DType::Int64);

  int64_t height = image, width = image;
  TensorId x = run_conv_bn(g, stem, "conv1", "bn1", images, &height, &width);
  x = ops::relu(g, "relu", x, /*in_place=*/true);
  x = ops::max_pool2d(g, "maxpool", x, 64, &height, &width);
  for (size_t stage = 0; stage < stages.size(); ++stage) {
    for (size_t i = 0; i < stages[stage].size(); ++i) {
      const ResBlock& block = stages[stage][i];
      g.push_module("layer" + std::to_string(stage + 1) + "." + std::to_string(i));
      g.begin_unit();
      g.begin_scope();
      g.hold(x);  // identity = x
      int64_t block_height = height, block_width = width;
      TensorId out = x;
      for (size_t c = 0; c < block.convs.size(); ++c) {
        std::string n = std::to_string(c + 1);
        out = run_conv_bn(g, block.convs[c], "conv" + n, "bn" + n, out, &block_height, &block_width);
        if (c + 1 < block.convs.size()) out = ops::relu(g, "relu" + n, out, true);
      }
      TensorId identity = x;
      if (block.has_downsample) {
        int64_t h = height, w = width;
        identity = run_conv_bn(g, block.downsample, "downsample.0", "downsample.1", x, &h, &w);
      }
      out = ops::add(g, "add_identity", out, identity, /*in_place=*/true);  // out += identity
      x = ops::relu(g, "relu", out, true);
      g.end_scope();
      g.end_unit();
      g.pop_module();
      height = block_height;
      width = block_width;
    }
  }
  x = ops::adaptive_avg_pool2d(g, "avgpool", x, 512 * expansion);
  x = ops::view(g, "flatten", x, g.tensor(x).numel);
  TensorId logits = ops::linear(g, "fc", x, fc_w, fc_b, 512 * expansion, classes);
  TensorId loss = ops::cross_entropy(g, "cross_entropy", logits, labels, classes);
  g.set_named_output("logits", logits);
  g.set_loss(loss);
}

}  // namespace oomcast::planner::families
