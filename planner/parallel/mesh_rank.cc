// A rank of a tensor/pipeline/context/expert-parallel job: the stage it runs, its schedule,
// the scenario it runs and the buffers the mesh adds to its graph. Facts, with their sources:
// - TP (torch 2.13 torch/distributed/tensor/parallel/style.py; torchtitan's Llama plan,
//   torchtitan/models/llama3/infra/parallelize.py): q/k/v and gate/up are ColwiseParallel
//   (out features split), o_proj and down_proj RowwiseParallel (in features split), norms
//   replicated; the embedding RowwiseParallel and the output ColwiseParallel split the
//   vocabulary, with loss_parallel keeping the logits split. A row-parallel output is a
//   partial sum; redistributing it to Replicate runs the functional all_reduce, which writes a
//   new tensor (torch/distributed/_functional_collectives.py), so the partial and the sum
//   are briefly both alive. A column-parallel input's gradient is partial the same way.
// - SP (torchtitan: SequenceParallel on the norms, Shard(1) between blocks): the norms'
//   and residuals' activations hold seq/TP rows; the all-gathered block input is full size.
//   The all-gather along the sequence (torch 2.13 _functional_collectives.py,
//   all_gather_single) gathers along dim 0 and, for more than one sequence per rank, cats the
//   chunks along dim 1 (_maybe_view_chunk_cat views them for one): while it runs the rank's
//   sequence shard, the dim-0 buffer and the gathered input are alive together.
// - CP (torch 2.13 torch/distributed/tensor/experimental/_context_parallel/_attention.py):
//   the default rotate method ALL_GATHER gathers every rank's K/V once per attention
//   (_AllGatherRotater), beside the local contiguous K/V; backward also rotates dK/dV.
// - EP (torchtitan/distributed/expert_parallel.py): tokens are dispatched to the ranks that
//   hold their experts and combined back with all-to-alls, a send and a receive buffer each.
#include "planner/parallel/mesh_rank.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "scenario/model_families.h"

namespace oomcast::planner {

using scenario::MeshConfig;
using scenario::ModelConfig;
using scenario::OpKind;
using scenario::PipelineSchedule;
using scenario::Scenario;

namespace {

// A head's width (its default is hidden / heads).
int64_t head_size(const ModelConfig& model) { return scenario::families::dim(model, "head_dim"); }

// The scenario's sequence length, or the model's default.
int64_t sequence_length(const Scenario& s) {
  return s.seq_len > 0 ? s.seq_len : scenario::families::default_sequence_length(s.model);
}

int64_t dim_or(const ModelConfig& model, const char* name, int64_t fallback) {
  auto found = model.dims.find(name);
  return found == model.dims.end() ? fallback : found->second;
}

void divide_dim(ModelConfig& model, const char* name, int64_t degree) {
  auto found = model.dims.find(name);
  if (found != model.dims.end() && degree > 1) found->second /= degree;
}

int64_t warmup_forwards(const MeshConfig& mesh, int64_t stage) {
  const int64_t stages = mesh.pipeline_parallel;
  const int64_t micro = mesh.microbatches();
  if (mesh.pipeline_schedule == PipelineSchedule::GPipe) return micro;
  double held = static_cast<double>(stages - stage);
  if (mesh.pipeline_schedule == PipelineSchedule::Interleaved1F1B) {
    held += static_cast<double>(stages - 1) / static_cast<double>(mesh.pipeline_virtual_stages);
  }
  return std::min<int64_t>(micro, static_cast<int64_t>(std::ceil(held - 1e-9)));
}

enum class TensorParallelStyle { None, Colwise, Rowwise };

bool ends_with(const std::string& text, const char* suffix) {
  const std::string tail(suffix);
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// torchtitan's Llama plan by module name: q/k/v and gate/up ColwiseParallel, o_proj and
// down_proj RowwiseParallel. Routed experts are left out (their tokens come by all-to-all).
TensorParallelStyle tensor_parallel_style(const LayerGraph& graph, const OpNode& op) {
  if (op.kind != OpKind::Linear || op.inputs.empty() || op.outputs.empty()) return TensorParallelStyle::None;
  const std::string& name = graph.names[op.name];
  if (name.find("experts.") != std::string::npos) return TensorParallelStyle::None;
  for (const char* row : {"o_proj", "down_proj"}) {
    if (ends_with(name, row)) return TensorParallelStyle::Rowwise;
  }
  for (const char* column : {"q_proj", "k_proj", "v_proj", "qkv_proj", "gate_proj", "up_proj", "gate_up_proj"}) {
    if (ends_with(name, column)) return TensorParallelStyle::Colwise;
  }
  return TensorParallelStyle::None;
}

// An op of a module that runs on the all-gathered sequence under SP (the attention, the MLP
// or the MoE block between their PrepareModuleInput and their row-parallel output).
bool inside_gathered_module(const std::string& name) {
  for (const char* module : {".self_attn.", ".mlp.", ".block_sparse_moe.", ".feed_forward."}) {
    if (name.find(module) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::vector<int64_t> chunk_layers(const MeshConfig& mesh, int64_t layers) {
  if (!mesh.layers_per_stage.empty()) return mesh.layers_per_stage;
  const int64_t chunks = mesh.pipeline_parallel * mesh.pipeline_virtual_stages;
  std::vector<int64_t> out(static_cast<size_t>(chunks), layers / chunks);
  for (int64_t i = 0; i < layers % chunks; ++i) ++out[static_cast<size_t>(i)];
  return out;
}

std::vector<PipelineStep> pipeline_steps(const MeshConfig& mesh, int64_t stage) {
  const int64_t micro = mesh.pipeline_parallel > 1 ? mesh.microbatches() : 1;
  std::vector<PipelineStep> steps;
  const int64_t warmup = mesh.pipeline_parallel > 1 ? warmup_forwards(mesh, stage) : 1;
  int64_t forwards = 0;
  int64_t backwards = 0;
  for (; forwards < warmup; ++forwards) steps.push_back({true, forwards});
  while (backwards < micro) {
    steps.push_back({false, backwards++});
    if (forwards < micro) steps.push_back({true, forwards++});
  }
  return steps;
}

MeshRank mesh_rank(const Scenario& scenario, int64_t stage) {
  MeshRank rank;
  rank.mesh = scenario.parallel.mesh;
  rank.stage = stage;
  const int64_t layers = dim_or(scenario.model, "layers", 0);
  const std::vector<int64_t> chunks = chunk_layers(rank.mesh, layers);
  // Rank `stage` holds chunks stage, stage + stages, ... (the interleaved placement).
  for (size_t chunk = static_cast<size_t>(stage); chunk < chunks.size();
       chunk += static_cast<size_t>(rank.mesh.pipeline_parallel)) {
    rank.layers += chunks[chunk];
  }
  rank.steps = pipeline_steps(rank.mesh, stage);
  int64_t live = 0;
  for (const PipelineStep& step : rank.steps) {
    live += step.forward ? 1 : -1;
    rank.in_flight = std::max(rank.in_flight, live);
  }
  const int64_t seq = sequence_length(scenario);
  rank.tokens = static_cast<uint64_t>(scenario.batch_size * (seq / rank.mesh.context_parallel));
  rank.batch = scenario.batch_size;
  rank.hidden = dim_or(scenario.model, "hidden", 0);
  return rank;
}

Scenario rank_scenario(const Scenario& scenario, const MeshRank& rank) {
  Scenario out = scenario;
  const MeshConfig& mesh = rank.mesh;
  ModelConfig& model = out.model;
  const int64_t tp = mesh.tensor_parallel;
  // Each head keeps its size: pin head_dim before the head counts are divided (its default is
  // hidden / heads).
  if (tp > 1) model.dims["head_dim"] = head_size(scenario.model);
  for (const char* name : {"heads", "kv_heads", "ffn_hidden", "expert_ffn_hidden", "shared_expert_ffn"}) {
    divide_dim(model, name, tp);
  }
  if (mesh.vocab_parallel) divide_dim(model, "vocab", tp);
  // The MoE block keeps the whole router and registers experts / EP of the experts
  // (planner/families/expert_parallel_moe.h).
  if (mesh.expert_parallel > 1) model.dims["expert_parallel"] = mesh.expert_parallel;
  if (mesh.pipeline_parallel > 1) {
    model.dims["layers"] = rank.layers;
    model.options["pipeline_first_stage"] = rank.first_stage() ? "true" : "false";
    model.options["pipeline_last_stage"] = rank.last_stage() ? "true" : "false";
  }
  if (mesh.context_parallel > 1) {
    out.seq_len = sequence_length(scenario) / mesh.context_parallel;
  }
  out.parallel.world_size = scenario.parallel.data_parallel_shard();
  out.parallel.gpus_per_node = std::min(out.parallel.gpus_per_node, out.parallel.world_size);
  out.parallel.mesh = MeshConfig{};
  if (mesh.pipeline_parallel > 1) out.grad_accum_steps = mesh.microbatches();
  return out;
}

void apply_mesh_to_graph(LayerGraph& graph, const MeshRank& rank) {
  const MeshConfig& mesh = rank.mesh;
  const uint64_t rows = rank.tokens * static_cast<uint64_t>(rank.hidden);  // one [batch, seq, hidden] tensor
  auto name = [&](const std::string& text) {
    graph.names.push_back(text);
    return static_cast<uint32_t>(graph.names.size() - 1);
  };
  // Which tensors a Linear reads: under SP those are the all-gathered (full) block inputs.
  std::vector<uint8_t> read_by_linear(graph.tensors.size(), 0);
  for (const OpNode& op : graph.ops) {
    if (op.kind != OpKind::Linear || op.inputs.empty()) continue;
    read_by_linear[graph.tensors[op.inputs[0]].storage] = 1;
  }
  const bool split_sequence = mesh.tensor_parallel > 1 && mesh.sequence_parallel;
  // Experts of one module each (transformers 4) are dispatched in the graph itself; the
  // stacked experts of transformers 5 get the dispatch and combine as an estimate at the top-k.
  bool dispatched_in_graph = false;
  for (const OpNode& op : graph.ops) dispatched_in_graph = dispatched_in_graph || ends_with(graph.names[op.name], "ep.dispatch_all_to_all");
  const uint64_t tp = static_cast<uint64_t>(mesh.tensor_parallel);
  std::vector<uint8_t> split(graph.tensors.size(), 0);
  std::vector<uint8_t> gathered(graph.tensors.size(), 0);  // per storage: its all-gather planned
  for (OpNode& op : graph.ops) {
    const TensorParallelStyle style = tensor_parallel_style(graph, op);
    if (mesh.tensor_parallel > 1 && style == TensorParallelStyle::Rowwise) {
      // The partial sum, then the all-reduce's (or under SP the reduce-scatter's) result.
      const TensorDesc& out = graph.tensors[op.outputs[0]];
      if (split_sequence) {
        op.forward_transients.push_back({name("tp.partial_sum"), out.bytes(), false});
        split[op.outputs[0]] = 1;
      } else {
        op.forward_transients.push_back({name("tp.all_reduce"), out.bytes(), true});
      }
    }
    if (split_sequence && op.kind == OpKind::Linear && !op.inputs.empty() &&
        (style == TensorParallelStyle::Colwise || ends_with(graph.names[op.name], "lm_head")) &&
        !gathered[graph.tensors[op.inputs[0]].storage]) {
      // The first reader of a gathered block input (q_proj, gate_proj, the output projection):
      // the shard and, beside the gathered result, the dim-0 buffer cat copies from.
      const TensorDesc& in = graph.tensors[op.inputs[0]];
      gathered[in.storage] = 1;
      const uint64_t buffer = rank.batch > 1 ? in.bytes() : 0;
      op.forward_transients.push_back({name("sp.all_gather"), in.bytes() / tp + buffer, false});
    }
    if (mesh.tensor_parallel > 1 && style == TensorParallelStyle::Colwise) {
      // The input's gradient is partial and all-reduced (reduce-scattered under SP).
      const TensorDesc& in = graph.tensors[op.inputs[0]];
      op.backward_transients.push_back({name("tp.grad_all_reduce"), in.bytes(), true});
      if (mesh.async_tensor_parallel) {
        // Async TP decomposes the all-gather + matmul into per-rank chunks over symmetric
        // memory: a workspace the size of the gathered input (estimate).
        op.forward_transients.push_back({name("async_tp.workspace"), in.bytes(), false});
      }
    }
    if (mesh.tensor_parallel > 1 && mesh.vocab_parallel && op.kind == OpKind::Embedding && !op.outputs.empty()) {
      // RowwiseParallel embedding: masked ids (int64, two [batch, seq]) and the partial output.
      const TensorDesc& out = graph.tensors[op.outputs[0]];
      op.forward_transients.push_back({name("tp.embedding_mask"), rank.tokens * 8 * 2, false});
      op.forward_transients.push_back({name("tp.all_reduce"), out.bytes(), true});
    }
    if (mesh.context_parallel > 1 && op.kind == OpKind::Attention && op.inputs.size() >= 3) {
      const uint64_t kv = graph.tensors[op.inputs[1]].bytes() + graph.tensors[op.inputs[2]].bytes();
      const auto cp = static_cast<uint64_t>(mesh.context_parallel);
      op.forward_transients.push_back({name("cp.gathered_kv"), kv * (1 + cp), false});
      op.backward_transients.push_back({name("cp.gathered_kv_and_grads"), kv * (3 + cp), false});
    }
    if (mesh.expert_parallel > 1 && !dispatched_in_graph && op.kind == OpKind::TopK && !op.inputs.empty()) {
      // Dispatch and combine: tokens x top_k rows of hidden, sent and received.
      const uint64_t routed = graph.tensors[op.outputs.empty() ? op.inputs[0] : op.outputs[0]].numel;
      const uint64_t bytes = routed * static_cast<uint64_t>(rank.hidden) *
                             dtype_bytes(graph.parameters.empty() ? DType::Float32
                                                                  : graph.tensors[graph.parameters[0]].dtype);
      op.forward_transients.push_back({name("ep.all_to_all"), 2 * bytes, true});
      op.backward_transients.push_back({name("ep.all_to_all"), 2 * bytes, true});
    }
    // Inside the attention and the MLP every tensor is the gathered sequence's (heads or
    // width / TP): a tensor there the size of a hidden state (the scores of heads / TP x seq)
    // is not one.
    if (split_sequence && op.kind != OpKind::Linear && op.kind != OpKind::Attention &&
        !inside_gathered_module(graph.names[op.name])) {
      for (TensorId output : op.outputs) {
        const TensorDesc& desc = graph.tensors[output];
        if (desc.numel == rows && desc.role == TensorRole::Activation && !read_by_linear[desc.storage]) split[output] = 1;
      }
    }
  }
  if (!split_sequence) return;
  for (TensorId input : graph.inputs) {
    if (graph.tensors[input].numel == rows) split[input] = 1;  // a later stage's received hidden states
  }
  for (size_t id = 0; id < graph.tensors.size(); ++id) {
    TensorDesc& desc = graph.tensors[id];
    // Views follow their storage: a split storage splits its same-sized views.
    if ((split[id] || split[desc.storage]) && desc.numel == rows) desc.numel = rows / tp;
  }
}

int64_t global_batch_samples(const Scenario& scenario) {
  const MeshConfig& mesh = scenario.parallel.mesh;
  const int64_t accumulated = mesh.pipeline_parallel > 1 ? mesh.microbatches() : scenario.grad_accum_steps;
  // data-parallel shards x replicas: the world over the model-parallel degrees.
  const int64_t replicas = std::max<int64_t>(1, scenario.parallel.world_size / mesh.non_data_parallel());
  return scenario.batch_size * accumulated * replicas;
}

std::string describe_mesh(const Scenario& scenario) {
  const MeshConfig& mesh = scenario.parallel.mesh;
  std::vector<std::string> parts;
  if (mesh.pipeline_parallel > 1) {
    std::string text = fmt::format("PP {} stages x {} microbatches, {}", mesh.pipeline_parallel, mesh.microbatches(),
                                   pipeline_schedule_name(mesh.pipeline_schedule));
    if (mesh.pipeline_virtual_stages > 1) text += fmt::format(" ({} virtual stages)", mesh.pipeline_virtual_stages);
    parts.push_back(text);
  }
  if (mesh.tensor_parallel > 1) {
    parts.push_back(fmt::format("TP {}{}{}{}", mesh.tensor_parallel, mesh.sequence_parallel ? " + sequence parallel" : "",
                                mesh.async_tensor_parallel ? " + async TP" : "",
                                mesh.vocab_parallel ? ", vocab-parallel embedding and loss" : ", replicated embedding"));
  }
  if (mesh.context_parallel > 1) parts.push_back(fmt::format("CP {}", mesh.context_parallel));
  if (mesh.expert_parallel > 1) parts.push_back(fmt::format("EP {}", mesh.expert_parallel));
  if (mesh.data_parallel_replicate > 1) parts.push_back(fmt::format("HSDP {} replicas", mesh.data_parallel_replicate));
  parts.push_back(fmt::format("data-parallel shards {}", scenario.parallel.data_parallel_shard()));
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : "; ") + part;
  return text;
}

}  // namespace oomcast::planner
