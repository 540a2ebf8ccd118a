// The model-parallel keys of `parallel:`. Degrees and their checks follow torchtitan's
// ParallelDims._validate (torchtitan/distributed/parallel_dims.py: world = dp_replicate x
// dp_shard x cp x tp x pp; EP borrows all of cp and part of dp_shard) and the schedules of
// torch.distributed.pipelining (torch 2.13 schedules.py: Schedule1F1B needs at least as many
// microbatches as stages). Megatron-LM's argument names are accepted as spellings of the same
// degrees, so a Megatron config can be copied in.
#include "scenario/mesh_config_loader.h"

#include <numeric>
#include <string>

namespace oomcast::scenario {

namespace {

constexpr int64_t kMaxDegree = 1 << 20;

// The node of one degree under its two spellings (ours/torchtitan's and Megatron-LM's), the
// missing `key` when neither is given; both given is an error, so a config cannot say two things.
YamlNode degree_node(const YamlNode& node, const std::string& key, const std::string& megatron_key) {
  YamlNode ours = node.child(key);
  if (megatron_key.empty()) return ours;
  YamlNode theirs = node.child(megatron_key);
  if (!ours.is_missing() && !theirs.is_missing()) {
    theirs.fail("'" + theirs.path() + "' and '" + ours.path() + "' name the same degree: give one");
  }
  return ours.is_missing() ? theirs : ours;
}

int64_t degree_of(const YamlNode& given) { return given.is_missing() ? 1 : given.as_integer(1, kMaxDegree); }

int64_t model_dim(const Scenario& scenario, const char* name) {
  auto found = scenario.model.dims.find(name);
  return found == scenario.model.dims.end() ? 0 : found->second;
}

PipelineSchedule read_schedule(const YamlNode& node) {
  const std::string name = node.as_choice({"gpipe", "1f1b", "interleaved_1f1b", "zero_bubble"});
  if (name == "gpipe") return PipelineSchedule::GPipe;
  if (name == "interleaved_1f1b") return PipelineSchedule::Interleaved1F1B;
  if (name == "zero_bubble") return PipelineSchedule::ZeroBubble;
  return PipelineSchedule::OneForwardOneBackward;
}

// A model dimension the tensor-parallel degree must divide (heads, KV heads, the MLP's width).
void require_divisible(const YamlNode& where, const Scenario& scenario, const char* dim, int64_t degree,
                       const std::string& why) {
  const int64_t size = model_dim(scenario, dim);
  if (size > 0 && size % degree != 0) {
    where.fail("'" + where.path() + "' " + std::to_string(degree) + " does not divide the model's " + dim + " (" +
               std::to_string(size) + ")" + why);
  }
}

void check_pipeline(const YamlNode& node, const YamlNode& where, const Scenario& scenario, MeshConfig& mesh) {
  const int64_t stages = mesh.pipeline_parallel;
  const int64_t chunks = stages * mesh.pipeline_virtual_stages;
  const int64_t layers = model_dim(scenario, "layers");
  const YamlNode virtual_node = degree_node(node, "pipeline_virtual_stages", "virtual_pipeline_model_parallel_size");
  const bool interleaved = mesh.pipeline_schedule == PipelineSchedule::Interleaved1F1B;
  if (interleaved && mesh.pipeline_virtual_stages < 2) {
    (virtual_node.is_missing() ? node.child("pipeline_schedule") : virtual_node)
        .fail("'parallel.pipeline_schedule' interleaved_1f1b needs pipeline_virtual_stages of 2 or more (model "
              "chunks per rank)");
  }
  if (!interleaved && mesh.pipeline_schedule != PipelineSchedule::ZeroBubble && mesh.pipeline_virtual_stages > 1) {
    virtual_node.fail("'" + virtual_node.path() + "' needs pipeline_schedule interleaved_1f1b or zero_bubble");
  }
  if (layers > 0 && layers < chunks) {
    where.fail("'" + where.path() + "' " + std::to_string(stages) + (mesh.pipeline_virtual_stages > 1 ? " x " +
               std::to_string(mesh.pipeline_virtual_stages) + " virtual stages" : std::string(" stages")) +
               " is more than the model's " + std::to_string(layers) + " layers");
  }
  YamlNode given = node.child("pipeline_layers_per_stage");
  if (!given.is_missing()) {
    if (!given.is_sequence()) given.fail("'" + given.path() + "' must be a list of layer counts, one per stage");
    std::vector<YamlNode> items = given.items();
    if (static_cast<int64_t>(items.size()) != chunks) {
      given.fail("'" + given.path() + "' lists " + std::to_string(items.size()) + " stages; the pipeline has " +
                 std::to_string(chunks));
    }
    for (const YamlNode& item : items) mesh.layers_per_stage.push_back(item.as_integer(1, kMaxDegree));
    const int64_t total = std::accumulate(mesh.layers_per_stage.begin(), mesh.layers_per_stage.end(), int64_t{0});
    if (layers > 0 && total != layers) {
      given.fail("'" + given.path() + "' adds up to " + std::to_string(total) + " layers; the model has " +
                 std::to_string(layers));
    }
  }
  YamlNode planned = node.child("pipeline_planned_stage");
  if (!planned.is_missing()) mesh.planned_stage = planned.as_integer(0, stages - 1);
  YamlNode micro = node.child("pipeline_microbatches");
  if (!micro.is_missing()) mesh.pipeline_microbatches = micro.as_integer(1, kMaxDegree);
  if (mesh.pipeline_schedule != PipelineSchedule::GPipe && mesh.microbatches() < stages) {
    micro.fail("'" + micro.path() + "' " + std::to_string(mesh.microbatches()) + " is fewer than the " +
               std::to_string(stages) + " stages (" + pipeline_schedule_name(mesh.pipeline_schedule) +
               " needs one microbatch per stage at least)");
  }
  if (scenario.grad_accum_steps > 1) {
    where.fail("'" + where.path() + "' with grad_accum_steps " + std::to_string(scenario.grad_accum_steps) +
               ": the pipeline's microbatches are the accumulation; give pipeline_microbatches instead");
  }
}

}  // namespace

const char* pipeline_schedule_name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::GPipe: return "gpipe";
    case PipelineSchedule::OneForwardOneBackward: return "1f1b";
    case PipelineSchedule::Interleaved1F1B: return "interleaved_1f1b";
    case PipelineSchedule::ZeroBubble: return "zero_bubble";
  }
  return "?";
}

const std::vector<std::string>& mesh_keys() {
  static const std::vector<std::string> keys = {
      "tensor_parallel", "tensor_model_parallel_size", "sequence_parallel", "async_tensor_parallel", "vocab_parallel",
      "pipeline_parallel", "pipeline_model_parallel_size", "pipeline_schedule", "pipeline_microbatches",
      "pipeline_virtual_stages", "virtual_pipeline_model_parallel_size", "pipeline_layers_per_stage", "pipeline_planned_stage",
      "context_parallel", "context_parallel_size", "expert_parallel", "expert_model_parallel_size",
      "data_parallel_replicate"};
  return keys;
}

void read_mesh_keys(const YamlNode& node, Scenario& scenario) {
  MeshConfig& mesh = scenario.parallel.mesh;
  const YamlNode tp_node = degree_node(node, "tensor_parallel", "tensor_model_parallel_size");
  const YamlNode pp_node = degree_node(node, "pipeline_parallel", "pipeline_model_parallel_size");
  const YamlNode cp_node = degree_node(node, "context_parallel", "context_parallel_size");
  const YamlNode ep_node = degree_node(node, "expert_parallel", "expert_model_parallel_size");
  const YamlNode replicate_node = node.child("data_parallel_replicate");
  const YamlNode virtual_node = degree_node(node, "pipeline_virtual_stages", "virtual_pipeline_model_parallel_size");
  mesh.tensor_parallel = degree_of(tp_node);
  mesh.pipeline_parallel = degree_of(pp_node);
  mesh.context_parallel = degree_of(cp_node);
  mesh.expert_parallel = degree_of(ep_node);
  mesh.data_parallel_replicate = degree_of(replicate_node);
  mesh.pipeline_virtual_stages = degree_of(virtual_node);
  YamlNode schedule = node.child("pipeline_schedule");
  if (!schedule.is_missing()) mesh.pipeline_schedule = read_schedule(schedule);
  const YamlNode sp_node = node.child("sequence_parallel");
  const YamlNode async_node = node.child("async_tensor_parallel");
  mesh.sequence_parallel = node.bool_or("sequence_parallel", false);
  mesh.async_tensor_parallel = node.bool_or("async_tensor_parallel", false);
  mesh.vocab_parallel = node.bool_or("vocab_parallel", true);

  // Keys of a dimension left at 1 act on nothing: refuse them rather than ignore them.
  if (mesh.tensor_parallel == 1) {
    for (const YamlNode& flag : {sp_node, async_node}) {
      if (!flag.is_missing() && flag.as_bool()) flag.fail("'" + flag.path() + "' needs tensor_parallel above 1");
    }
  }
  if (mesh.pipeline_parallel == 1) {
    for (const char* key : {"pipeline_schedule", "pipeline_microbatches", "pipeline_layers_per_stage", "pipeline_planned_stage"}) {
      if (!node.child(key).is_missing()) node.child(key).fail("'" + node.child(key).path() + "' needs pipeline_parallel above 1");
    }
    if (!virtual_node.is_missing() && mesh.pipeline_virtual_stages > 1) {
      virtual_node.fail("'" + virtual_node.path() + "' needs pipeline_parallel above 1");
    }
  }
  if (!mesh.model_parallel() && mesh.data_parallel_replicate == 1) return;

  const ParallelConfig& parallel = scenario.parallel;
  YamlNode world = node.child("world_size");
  if (world.is_missing()) {
    node.fail("'parallel' needs 'world_size' (every rank of the job: data x context x tensor x pipeline parallel)");
  }
  if (parallel.engine == ParallelEngine::Fsdp || parallel.engine == ParallelEngine::DeepSpeed) {
    YamlNode first = !tp_node.is_missing() ? tp_node : !pp_node.is_missing() ? pp_node : !cp_node.is_missing() ? cp_node
                     : !ep_node.is_missing() ? ep_node : replicate_node;
    first.fail("'" + first.path() + "' composes with the fsdp2 or ddp engine (torchtitan's meshes); engine " +
               parallel_engine_name(parallel.engine) + " is not modelled with it");
  }
  if (mesh.data_parallel_replicate > 1 && parallel.engine != ParallelEngine::Fsdp2) {
    replicate_node.fail("'" + replicate_node.path() + "' (HSDP) needs engine fsdp2");
  }
  if (mesh.model_parallel() && scenario.model.family != "llama") {
    YamlNode first = !tp_node.is_missing() ? tp_node : !pp_node.is_missing() ? pp_node : !cp_node.is_missing() ? cp_node
                                                                                                            : ep_node;
    first.fail("'" + first.path() + "' is modelled for the llama family (Llama, Mistral, Qwen, Mixtral and the other "
               "rotary decoders); model " + scenario.model.name + " is family " + scenario.model.family);
  }
  const int64_t mesh_size = mesh.non_data_parallel() * mesh.data_parallel_replicate;
  if (parallel.world_size % mesh_size != 0) {
    world.fail("'parallel.world_size' " + std::to_string(parallel.world_size) + " is not divisible by the mesh: " +
              "data_parallel_replicate " + std::to_string(mesh.data_parallel_replicate) + " x context_parallel " +
              std::to_string(mesh.context_parallel) + " x tensor_parallel " + std::to_string(mesh.tensor_parallel) +
              " x pipeline_parallel " + std::to_string(mesh.pipeline_parallel) + " = " + std::to_string(mesh_size));
  }
  const int64_t dp_shard = parallel.world_size / mesh_size;
  if (mesh.tensor_parallel > 1) {
    require_divisible(tp_node, scenario, "heads", mesh.tensor_parallel, ": attention heads are split across ranks");
    require_divisible(tp_node, scenario, "kv_heads", mesh.tensor_parallel,
                      ": key/value heads are split across ranks (ColwiseParallel on k_proj and v_proj)");
    require_divisible(tp_node, scenario, "ffn_hidden", mesh.tensor_parallel, ": the MLP's width is split across ranks");
    if (model_dim(scenario, "experts") > 0) {
      require_divisible(tp_node, scenario, "expert_ffn_hidden", mesh.tensor_parallel,
                        ": each expert's width is split across ranks");
    }
    if (mesh.vocab_parallel) {
      require_divisible(tp_node, scenario, "vocab", mesh.tensor_parallel,
                        ": the embedding and output are split by vocabulary (set vocab_parallel: false to replicate them)");
    }
    if (mesh.sequence_parallel && scenario.seq_len > 0 && scenario.seq_len % mesh.tensor_parallel != 0) {
      sp_node.fail("'" + sp_node.path() + "' splits the sequence across " + std::to_string(mesh.tensor_parallel) +
                   " ranks; seq_len " + std::to_string(scenario.seq_len) + " is not divisible by it");
    }
  }
  if (mesh.context_parallel > 1 && scenario.attention != AttentionImpl::Flash &&
      scenario.attention != AttentionImpl::MemEfficient) {
    // torch's context parallel replaces scaled_dot_product_attention's flash and efficient
    // kernels with ring attention; eager or math attention stays whole on every rank.
    cp_node.fail("'" + cp_node.path() + "' needs attention: flash or mem_efficient (ring attention replaces those "
                 "SDPA kernels)");
  }
  if (mesh.context_parallel > 1 && scenario.seq_len > 0 &&
      scenario.seq_len % (2 * mesh.context_parallel * (mesh.sequence_parallel ? mesh.tensor_parallel : 1)) != 0) {
    // torchtitan's seq_len_divisor: load-balanced CP cuts the sequence into 2 x cp chunks.
    cp_node.fail("'" + cp_node.path() + "' " + std::to_string(mesh.context_parallel) + ": seq_len " +
                 std::to_string(scenario.seq_len) + " must be divisible by 2 x context_parallel" +
                 (mesh.sequence_parallel ? " x tensor_parallel" : ""));
  }
  if (mesh.pipeline_parallel > 1) check_pipeline(node, pp_node, scenario, mesh);
  if (mesh.expert_parallel > 1) {
    const int64_t experts = model_dim(scenario, "experts");
    if (experts == 0) ep_node.fail("'" + ep_node.path() + "' needs a mixture-of-experts model; " + scenario.model.name + " has no experts");
    if (experts % mesh.expert_parallel != 0) {
      ep_node.fail("'" + ep_node.path() + "' " + std::to_string(mesh.expert_parallel) + " does not divide the model's " +
                   std::to_string(experts) + " experts");
    }
    // torchtitan (ETP = TP): EP borrows all of cp and part of dp_shard.
    if (mesh.expert_parallel % mesh.context_parallel != 0 ||
        (dp_shard * mesh.context_parallel) % mesh.expert_parallel != 0) {
      ep_node.fail("'" + ep_node.path() + "' " + std::to_string(mesh.expert_parallel) +
                   " must be a multiple of context_parallel and divide data-parallel shards x context_parallel (" +
                   std::to_string(dp_shard * mesh.context_parallel) + ")");
    }
  }
}

}  // namespace oomcast::scenario
