// Scenario: one training (or evaluation) job to predict: model, batch, precision,
// checkpointing, optimizer, loop facts, device and allocator. Loaded from YAML by
// scenario_loader; docs/scenario-format.md documents every key.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scenario/activation_offload_config.h"
#include "scenario/compile_config.h"
#include "scenario/cuda_graphs_config.h"
#include "scenario/device_throughput.h"
#include "scenario/job_config.h"
#include "scenario/parallel_config.h"
#include "sim/allocator_config.h"
#include "sim/device_model.h"

namespace oomcast::scenario {

struct GraphFile;  // a model given as a graph file (scenario/graph_file.h)

enum class Precision { Fp32, AmpBf16, AmpFp16, PureBf16 };
enum class AttentionImpl { Eager, SdpaMath, Flash, MemEfficient };
enum class CheckpointMode { None, Full, EveryN, Selective, Auto };
enum class OptimizerType { Sgd, Adam, AdamW, Adafactor, AdamW8bit, Muon, AnyPrecisionAdamW };
enum class OptimizerImpl { SingleTensor, Foreach, Fused };
// Mixture-of-experts routing planned: the busiest expert gets k times its share, or even.
enum class MoeImbalance { Worst, Balanced };

// A model description after resolution (preset name, model YAML or HF config.json).
// `dims` holds the family's dimensions by name; each family documents the names it reads
// (e.g. gpt2: layers, hidden, heads, vocab, max_positions; llama: + kv_heads, ffn_hidden).
struct ModelConfig {
  std::string name;                     // "gpt2", "llama-2-7b", ...
  std::string family;                   // gpt2 | llama | bert | vit | resnet | mlp
  std::map<std::string, int64_t> dims;
  std::map<std::string, std::string> options;  // family switches, e.g. tied_embeddings: "true"
  std::string source;                   // file it came from, for errors
  std::shared_ptr<const GraphFile> graph;  // family "graph": the layer graph read from a file
  // Qwen-MoE's mlp_only_layers: decoder layers with a dense MLP of ffn_hidden instead of experts.
  std::vector<int64_t> mlp_only_layers;
  // Keys of the source (config.json) that may change memory but are not modelled; shown
  // with the prediction.
  std::vector<std::string> warnings;
};

// One block's checkpointing as `checkpointing: auto` chose it (advisor/auto_checkpointing.h).
struct UnitCheckpoint {
  bool on = false;
  std::string choice;                           // "full", "attention", "activations": the option's name
  std::vector<std::string> recompute_ops;       // op kinds recomputed; empty: the whole block
};

struct CheckpointConfig {
  CheckpointMode mode = CheckpointMode::None;
  int64_t every_n = 1;                          // EveryN: checkpoint one block in every n
  std::vector<std::string> recompute_ops;       // Selective: op kinds recomputed in backward
  // Selective, the other way round (torchtitan's op-level policy): op kinds whose outputs are
  // saved, every other op of the block recomputed; with every_other_linear only the odd-numbered
  // linears of each block are saved (torchtitan counts aten.mm calls per checkpoint).
  std::vector<std::string> save_ops;
  bool every_other_linear = false;
  // torch.utils.checkpoint's use_reentrant: true (its default when not passed) runs the block
  // under no_grad and recomputes all of it; false (transformers 5.x, Lightning, every
  // selective policy) saves through saved-tensor hooks and stops recomputing early.
  bool reentrant = true;
  // Auto: the share of usable memory to leave free, and the choice per block once resolved
  // (empty until then: nothing is checkpointed).
  double margin_fraction = 0.05;
  std::vector<UnitCheckpoint> units;
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::AdamW;
  OptimizerImpl impl = OptimizerImpl::Foreach;
  double momentum = 0.0;                        // SGD; 0 = no momentum buffer
  bool amsgrad = false;
  // Optimizer step in backward (torchtune's optimizer_in_bwd, PyTorch's
  // register_post_accumulate_grad_hook tutorial): one optimizer per parameter, stepped in the
  // parameter's post-accumulate-grad hook, which then sets .grad = None.
  bool in_backward = false;
  // `compile: {scope: [..., optimizer]}`: optimizer.step runs compiled, its temporaries fused away.
  bool compiled_step = false;
  // torch.optim.Muon (torch >= 2.9, _muon.py): 2-D parameters only, Newton-Schulz in bf16; the
  // parameters named here and every non-2-D one are stepped by a torch.optim.AdamW beside it.
  bool nesterov = true;
  int64_t ns_steps = 5;
  std::vector<std::string> adamw_params = {"embed_tokens", "lm_head", "wte", "wpe", "embeddings"};
  // AnyPrecisionAdamW (torchdistx / llama-recipes policies/anyprecision_optimizer.py): the
  // moments and the Kahan compensation buffer in their own dtypes (bf16 by default).
  bool kahan_summation = false;
  bool momentum_fp32 = false;                   // momentum_dtype: bf16 unless fp32
  bool variance_fp32 = false;                   // variance_dtype
  bool compensation_fp32 = false;               // compensation_buffer_dtype
};

// The training loss over the logits (`loss:` section).
struct LossConfig {
  // torchtune's CEWithChunkedOutputLoss (num_output_chunks): the output projection and the
  // cross-entropy run per sequence chunk, each chunk's logits upcast to fp32 on its own.
  int64_t chunks = 1;
  // Liger's LigerFusedLinearCrossEntropyLoss: lm_head and the loss fused per chunk of tokens,
  // the gradients computed in forward; no logits are kept.
  bool fused_linear = false;
};

// Facts of the training loop that move the peak (../shared/docs/training-memory-model.md §10).
struct TrainingLoopConfig {
  bool zero_grad_set_to_none = true;
  bool zero_grad_before_forward = false;        // else after optimizer.step()
  std::vector<std::string> caller_held_outputs = {"loss"};  // kept alive until rebinding next iteration
  bool keep_losses_across_iterations = false;   // losses appended to a list without .item()
  // `out = model(x); loss = criterion(out, y)`: the loop rebinds `out` (freeing last step's)
  // as the model returns, before the loss runs; `loss` is rebound after it.
  bool loss_outside_model = false;
};

struct EvalConfig {
  bool enabled = false;
  int64_t batches = 1;                          // evaluation batches after each training iteration
  bool no_grad = true;                          // false: evaluation under grad mode (a leak pattern)
  bool accumulate_loss_without_item = false;    // eval losses summed as tensors (keeps graphs alive without no_grad)
};

struct DeviceConfig {
  std::string profile;                          // "a100-80gb", ..., "cpu", or "custom"
  sim::DeviceModel model;                       // total memory, context, other processes, fraction
  uint64_t cublas_workspace_bytes = 0;          // per workspace; 0 on cpu
  int64_t cublas_workspaces = 0;                // 2 for a process that runs backward (spec §14 C5)
  bool is_cpu = false;                          // no rounding, no workspace, no context
  std::string display_name;                     // "A100-80GB", for reports
  int compute_capability = 0;                   // 80 = sm_80; decides flash/bf16 support; 0 on cpu
  double host_link_gbps = 0.0;                  // effective host<->GPU bandwidth, GB/s (offload cost)
  double peak_tflops = 0.0;                     // dense 16-bit tensor-core peak (compute-time estimate)
  DeviceThroughput throughput;                  // peaks per dtype and bandwidths (step-time model)
  // Memory outside the allocator (scenario/outside_allocator.h); model.context_bytes is this
  // context plus NCCL's buffers.
  int cuda_version = 0;                         // 1204 = CUDA 12.4; 0 on cpu
  std::string module_loading;                   // "lazy" | "eager" (CUDA_MODULE_LOADING); "" on cpu
  uint64_t cuda_context_bytes = 0;              // the CUDA context alone
  std::string context_source;                   // the table row (with its citation) or scenario key it came from
};

struct Scenario {
  std::string source_path;
  ModelConfig model;
  int64_t batch_size = 1;
  int64_t seq_len = 0;                          // image size for vision models
  int64_t grad_accum_steps = 1;
  int64_t iterations = 3;
  Precision precision = Precision::Fp32;
  AttentionImpl attention = AttentionImpl::SdpaMath;
  double dropout = 0.0;
  MoeImbalance moe_imbalance = MoeImbalance::Worst;  // moe.imbalance (scenario/moe_config.cc)
  CheckpointConfig checkpointing;
  ActivationOffloadConfig activation_offloading;  // saved tensors to host (activation_offload_config.h)
  LossConfig loss;
  OptimizerConfig optimizer;
  TrainingLoopConfig loop;
  EvalConfig eval;
  DeviceConfig device;
  sim::AllocatorConfig allocator;
  ParallelConfig parallel;                      // data parallel: one rank of the job is planned
  JobConfig job;                                // job kind, trainable subset, weight format, loading (job_config.h)
  std::vector<CudaGraphConfig> cuda_graphs;     // captured graphs (cuda_graphs_config.h)
  CompileConfig compile;                        // torch.compile (compile_config.h)
};

}  // namespace oomcast::scenario
