// Model families: each expands a ModelConfig's few dimensions into parameters, buffers,
// inputs and the forward pass (ops from the catalogue) in a GraphBuilder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/ops/graph_builder.h"
#include "scenario/model_families.h"
#include "scenario/scenario.h"

namespace oomcast::planner::families {

// Writes the model's parameters, buffers, inputs, forward and loss into `builder`.
void build_forward(GraphBuilder& builder, const scenario::ModelConfig& model);

// The least work a graph file asks for, counted from its statements before anything is built
// (graph_file_builder.cc): its op statements, each at least one op of the graph, and its
// parameter declarations, repeats multiplied out. {0, 0} for a model that is not a graph file
// (a family's size is bounded by its dimensions' limits).
struct LeastWork {
  int64_t ops = 0;
  int64_t parameters = 0;
};
LeastWork least_graph_file_work(const scenario::ModelConfig& model, const BuildContext& context);

// The model's parameter count (tied weights counted once), as
// sum(p.numel() for p in model.parameters()) would report it: the family expanded at batch 1.
uint64_t parameter_count(const scenario::ModelConfig& model);

void build_gpt2(GraphBuilder& builder, const scenario::ModelConfig& model);
void build_llama(GraphBuilder& builder, const scenario::ModelConfig& model);
void build_bert(GraphBuilder& builder, const scenario::ModelConfig& model);
void build_vit(GraphBuilder& builder, const scenario::ModelConfig& model);
void build_resnet(GraphBuilder& builder, const scenario::ModelConfig& model);
void build_mlp(GraphBuilder& builder, const scenario::ModelConfig& model);
void build_gpt_neox(GraphBuilder& builder, const scenario::ModelConfig& model);
void build_transformer_encoder(GraphBuilder& builder, const scenario::ModelConfig& model);
// A model given as a graph file (docs/graph-format.md; graph_file_builder.cc).
void build_graph(GraphBuilder& builder, const scenario::ModelConfig& model);

}  // namespace oomcast::planner::families
