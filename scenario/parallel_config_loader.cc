// The `parallel:` section reader. Key names are the engines' own: DDP's constructor
// arguments, FSDP's constructor arguments, fully_shard's arguments (FSDP2), DeepSpeed's JSON keys, so a user can copy them.
#include "scenario/parallel_config_loader.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "scenario/deepspeed_json_config.h"
#include "scenario/mesh_config_loader.h"
#include "scenario/outside_allocator_table.h"
#include "scenario/zero_keys.h"
#include "scenario/scenario_loader.h"
#include "scenario/size_limits.h"

namespace oomcast::scenario {

namespace {

constexpr int64_t kMaxWorld = 1 << 20;
constexpr int64_t kMaxElements = int64_t{1} << 50;

// A count such as 5e8 or 500000000, written as YAML.
int64_t read_count(const YamlNode& node) {
  double value = node.as_number(0, static_cast<double>(kMaxElements));
  if (std::floor(value) != value) node.fail("'" + node.path() + "' must be a whole number of elements");
  return static_cast<int64_t>(value);
}

FloatDtype read_float_dtype(const YamlNode& node) {
  std::string name = node.as_choice({"fp32", "bf16", "fp16", "float32", "bfloat16", "float16"});
  if (name == "bf16" || name == "bfloat16") return FloatDtype::BFloat16;
  if (name == "fp16" || name == "float16") return FloatDtype::Float16;
  return FloatDtype::Float32;
}

DdpConfig read_ddp(const YamlNode& node) {
  DdpConfig ddp;
  node.reject_unknown_keys({"bucket_cap_mb", "gradient_as_bucket_view"});
  ddp.bucket_cap_mb = node.number_or("bucket_cap_mb", ddp.bucket_cap_mb, 0.0, 1 << 20);
  if (ddp.bucket_cap_mb <= 0.0) node.child("bucket_cap_mb").fail("'parallel.ddp.bucket_cap_mb' must be above 0");
  ddp.gradient_as_bucket_view = node.bool_or("gradient_as_bucket_view", false);
  return ddp;
}

FsdpConfig read_fsdp(const YamlNode& node) {
  FsdpConfig fsdp;
  node.reject_unknown_keys({"sharding_strategy", "auto_wrap", "backward_prefetch", "forward_prefetch",
                            "limit_all_gathers", "mixed_precision", "cpu_offload", "use_orig_params", "no_sync"});
  std::string sharding = node.choice_or("sharding_strategy", "FULL_SHARD", {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"});
  fsdp.sharding_strategy = sharding == "FULL_SHARD"      ? FsdpSharding::FullShard
                           : sharding == "SHARD_GRAD_OP" ? FsdpSharding::ShardGradOp
                                                         : FsdpSharding::NoShard;
  fsdp.auto_wrap = node.choice_or("auto_wrap", "block", {"block", "none"}) == "block" ? FsdpAutoWrap::Block
                                                                                       : FsdpAutoWrap::None;
  std::string prefetch = node.choice_or("backward_prefetch", "BACKWARD_PRE", {"BACKWARD_PRE", "BACKWARD_POST", "none"});
  fsdp.backward_prefetch = prefetch == "BACKWARD_PRE"    ? FsdpBackwardPrefetch::BackwardPre
                           : prefetch == "BACKWARD_POST" ? FsdpBackwardPrefetch::BackwardPost
                                                         : FsdpBackwardPrefetch::None;
  fsdp.forward_prefetch = node.bool_or("forward_prefetch", false);
  fsdp.limit_all_gathers = node.bool_or("limit_all_gathers", true);
  fsdp.cpu_offload = node.bool_or("cpu_offload", false);
  fsdp.use_orig_params = node.bool_or("use_orig_params", false);
  fsdp.no_sync = node.bool_or("no_sync", false);
  YamlNode mixed = node.child("mixed_precision");
  if (!mixed.is_missing()) {
    mixed.reject_unknown_keys({"param_dtype", "reduce_dtype"});
    fsdp.mixed_precision = true;
    YamlNode param = mixed.child("param_dtype");
    if (!param.is_missing()) fsdp.param_dtype = read_float_dtype(param);
    YamlNode reduce = mixed.child("reduce_dtype");
    // MixedPrecision: reduce_dtype defaults to param_dtype.
    fsdp.reduce_dtype = reduce.is_missing() ? fsdp.param_dtype : read_float_dtype(reduce);
  }
  return fsdp;
}

// no_sync skips the gradient reduction of every micro-batch but the last; with one micro-batch
// there is nothing to skip, so the key would silently do nothing: refused at its line.
void refuse_no_sync_without_accumulation(const YamlNode& no_sync, const Scenario& scenario) {
  if (scenario.grad_accum_steps >= 2) return;
  no_sync.fail("'" + no_sync.path() + "' skips the gradient reduce-scatter of every micro-batch but the last, and "
               "with grad_accum_steps 1 there is only the last: set grad_accum_steps above 1 or drop no_sync");
}

// fully_shard's options (torch.distributed.fsdp.fully_shard, PyTorch 2.4+; docs/distributed.md#fsdp2).
Fsdp2Config read_fsdp2(const YamlNode& node, std::vector<std::string>& warnings) {
  Fsdp2Config fsdp2;
  node.reject_unknown_keys({"reshard_after_forward", "mixed_precision", "offload_policy", "no_sync"});
  fsdp2.no_sync = node.bool_or("no_sync", false);
  YamlNode reshard = node.child("reshard_after_forward");
  if (!reshard.is_missing()) {
    const std::string text = reshard.is_scalar() ? reshard.as_string() : std::string();
    if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
      reshard.fail("'" + reshard.path() + "' " + text + " (reshard to a smaller mesh after forward) is not modelled: "
                   "write true (reshard to the shards) or false (keep unsharded until backward)");
    }
    fsdp2.reshard_after_forward = reshard.as_bool();
  }
  // CPUOffloadPolicy(pin_memory=True): pageable host memory is not modelled apart.
  fsdp2.cpu_offload = node.choice_or("offload_policy", "none", {"none", "cpu"}) == "cpu";
  YamlNode mixed = node.child("mixed_precision");
  if (!mixed.is_missing()) {
    mixed.reject_unknown_keys({"param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs"});
    fsdp2.mixed_precision = true;
    YamlNode param = mixed.child("param_dtype");
    if (!param.is_missing()) fsdp2.param_dtype = read_float_dtype(param);
    YamlNode reduce = mixed.child("reduce_dtype");
    // MixedPrecisionPolicy: reduce_dtype None reduces in the gradients' dtype, i.e. param_dtype.
    fsdp2.reduce_dtype = reduce.is_missing() ? fsdp2.param_dtype : read_float_dtype(reduce);
    YamlNode output = mixed.child("output_dtype");
    if (!output.is_missing()) {
      read_float_dtype(output);
      warnings.push_back("parallel.fsdp2.mixed_precision.output_dtype: the cast of each group's forward outputs is "
                         "not modelled (outputs keep the compute dtype)");
    }
    mixed.bool_or("cast_forward_inputs", true);  // casts the floating inputs only: the batch, not modelled
  }
  return fsdp2;
}

ZeroOffloadConfig read_offload(const YamlNode& node) {
  ZeroOffloadConfig offload;
  if (node.is_missing()) return offload;
  node.reject_unknown_keys({"device", "pin_memory"});
  std::string device = node.choice_or("device", "none", {"none", "cpu", "nvme"});
  if (device == "nvme") node.child("device").fail("nvme offload is not modelled (use cpu or none)");
  offload.device = device == "cpu" ? OffloadDevice::Cpu : OffloadDevice::None;
  offload.pin_memory = node.bool_or("pin_memory", false);
  return offload;
}

HalfPrecision read_yaml_half(const YamlNode& node, HalfPrecision when_on) {
  if (node.is_missing()) return HalfPrecision::Unset;
  node.reject_unknown_keys({"enabled"});
  return node.bool_or("enabled", false) ? when_on : HalfPrecision::Disabled;
}

// The YAML form of a DeepSpeed config: the same keys as its JSON.
DeepSpeedJson read_yaml_deepspeed(const YamlNode& node, int64_t hidden) {
  DeepSpeedJson out;
  node.reject_unknown_keys({"zero_optimization", "bf16", "fp16"});
  HalfPrecision bf16 = read_yaml_half(node.child("bf16"), HalfPrecision::Bf16);
  HalfPrecision fp16 = read_yaml_half(node.child("fp16"), HalfPrecision::Fp16);
  if (bf16 == HalfPrecision::Bf16 && fp16 == HalfPrecision::Fp16) node.child("fp16").fail("bf16 and fp16 cannot both be enabled");
  out.half = bf16 == HalfPrecision::Bf16 || fp16 == HalfPrecision::Fp16 ? (bf16 == HalfPrecision::Bf16 ? bf16 : fp16)
             : bf16 == HalfPrecision::Disabled || fp16 == HalfPrecision::Disabled ? HalfPrecision::Disabled
                                                                                 : HalfPrecision::Unset;
  YamlNode zero = node.child("zero_optimization");
  std::vector<std::string> allowed = {"stage", "offload_optimizer", "offload_param"};
  for (const auto& entry : zero_keys::kCounts) allowed.push_back(entry.name);
  for (const auto& entry : zero_keys::kFlags) allowed.push_back(entry.name);
  zero.reject_unknown_keys(allowed);
  out.zero.stage = static_cast<int>(zero.integer_or("stage", 0, 0, 3));
  for (const auto& entry : zero_keys::kCounts) {
    YamlNode value = zero.child(entry.name);
    if (value.is_missing()) continue;
    out.zero.*entry.member = value.is_scalar() && value.as_string() == "auto"
                                 ? zero_keys::auto_value(entry.name, hidden, out.zero.*entry.member)
                                 : read_count(value);
  }
  for (const auto& entry : zero_keys::kFlags) {
    YamlNode value = zero.child(entry.name);
    if (value.is_missing()) continue;
    out.zero.*entry.member = value.as_bool();
    if (std::string_view(entry.name) == "overlap_comm") out.overlap_comm_given = true;
  }
  out.zero.offload_optimizer = read_offload(zero.child("offload_optimizer"));
  out.zero.offload_param = read_offload(zero.child("offload_param"));
  if (!out.overlap_comm_given) out.zero.overlap_comm = out.zero.stage == 3;  // DeepSpeed's dynamic default
  return out;
}

// DeepSpeed's bf16/fp16 (or FSDP's 16-bit param_dtype) means 16-bit parameters with fp32
// masters: the scenario's pure_bf16. Unset precision follows; a contradicting one is an error.
void require_half_parameters(const YamlNode& root, Scenario& scenario, const std::string& why) {
  YamlNode precision = root.child("precision");
  if (precision.is_missing()) {
    scenario.precision = Precision::PureBf16;
  } else if (scenario.precision != Precision::PureBf16) {
    precision.fail(std::string("'precision' ") + precision_name(scenario.precision) + " contradicts " + why +
                   " (16-bit parameters with fp32 master weights): write pure_bf16, or leave 'precision' out");
  }
}

// DeepSpeed refuses to start when train_batch_size is not micro batch x accumulation x
// data-parallel world size (deepspeed/runtime/config.py, DeepSpeedConfig._batch_assertion:
// "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu *
// gradient_acc_step * world_size"). Only a DeepSpeed JSON has the key; the error names it there.
void check_train_batch_size(int64_t train_batch_size, const Scenario& scenario, const std::string& source) {
  const int64_t micro_times_accum = saturating_product(scenario.batch_size, scenario.grad_accum_steps);
  const int64_t expected = saturating_product(micro_times_accum, scenario.parallel.world_size);
  if (train_batch_size == expected) return;
  const std::string message =
      "train_batch_size " + std::to_string(train_batch_size) + " in " + source + " is not micro batch " +
      std::to_string(scenario.batch_size) + " x grad_accum_steps " + std::to_string(scenario.grad_accum_steps) +
      " x world_size " + std::to_string(scenario.parallel.world_size) + " = " + std::to_string(expected) +
      " (DeepSpeed refuses such a config): fix one of them, or leave train_batch_size out";
  throw InputError(SourceLocation{source}, "train_batch_size", message);
}

void reconcile_deepspeed(const YamlNode& root, const YamlNode& where, const DeepSpeedJson& ds, Scenario& scenario,
                         const std::string& source) {
  YamlNode precision = root.child("precision");
  if (ds.half == HalfPrecision::Unset && !ds.half_auto.empty()) {
    // The HF Trainer fills "auto" from its --bf16 / --fp16 flags; the scenario's precision
    // stands for those flags here, and the note says which way it went.
    std::string sections;
    for (const auto& name : ds.half_auto) sections += (sections.empty() ? "" : " and ") + name + ".enabled";
    bool half = scenario.precision == Precision::PureBf16;
    scenario.parallel.warnings.push_back(
        sections + " is \"auto\" in " + source + ": resolved from the scenario's precision " +
        precision_name(scenario.precision) + (precision.is_missing() ? " (the default)" : "") + " as the HF Trainer "
        "resolves it from --bf16/--fp16: " + (half ? "16-bit parameters with fp32 masters" : "fp32, no 16-bit") +
        (half ? "" : "; write precision: pure_bf16 for a job run with --bf16 or --fp16"));
  }
  if (ds.half == HalfPrecision::Bf16 || ds.half == HalfPrecision::Fp16) {
    require_half_parameters(root, scenario, std::string(ds.half == HalfPrecision::Bf16 ? "bf16" : "fp16") + " enabled in " + source);
    if (ds.half == HalfPrecision::Fp16) {
      scenario.parallel.warnings.push_back("fp16 is planned with bf16's byte sizes (the same); the loss scaler's few "
                                           "scalars are not modelled");
    }
  } else if (ds.half == HalfPrecision::Disabled && scenario.precision == Precision::PureBf16) {
    precision.fail("'precision' pure_bf16 contradicts bf16/fp16 disabled in " + source);
  }
  if (scenario.precision == Precision::AmpBf16 || scenario.precision == Precision::AmpFp16) {
    (precision.is_missing() ? where : precision)
        .fail(std::string("'precision' ") + precision_name(scenario.precision) +
              " (torch.autocast) is not how DeepSpeed runs mixed precision: enable bf16/fp16 in the DeepSpeed config "
              "(precision pure_bf16) or use fp32");
  }
  if (ds.micro_batch && *ds.micro_batch != scenario.batch_size) {
    root.child("batch_size").fail("'batch_size' " + std::to_string(scenario.batch_size) +
                                  " differs from train_micro_batch_size_per_gpu " + std::to_string(*ds.micro_batch) +
                                  " in " + source);
  }
  if (ds.grad_accum) {
    YamlNode accum = root.child("grad_accum_steps");
    if (accum.is_missing()) {
      scenario.grad_accum_steps = *ds.grad_accum;
    } else if (*ds.grad_accum != scenario.grad_accum_steps) {
      accum.fail("'grad_accum_steps' " + std::to_string(scenario.grad_accum_steps) +
                 " differs from gradient_accumulation_steps " + std::to_string(*ds.grad_accum) + " in " + source);
    }
  }
  const ZeroConfig& zero = ds.zero;
  if (zero.offload_param.device != OffloadDevice::None && zero.stage != 3) {
    where.fail("offload_param needs ZeRO stage 3 (DeepSpeed rejects it at stage " + std::to_string(zero.stage) + ")");
  }
  if (zero.offload_optimizer.device != OffloadDevice::None && zero.stage == 0) {
    where.fail("offload_optimizer needs ZeRO stage 1, 2 or 3");
  }
}

int64_t model_hidden(const Scenario& scenario) {
  auto found = scenario.model.dims.find("hidden");
  return found == scenario.model.dims.end() ? 0 : found->second;
}

// NCCL communicators a rank holds: the data-parallel one (with an engine), and one per
// model-parallel mesh dimension in use, each with its own channel buffers.
uint64_t communicators(const ParallelConfig& parallel) {
  const MeshConfig& mesh = parallel.mesh;
  uint64_t count = parallel.enabled() ? 1 : 0;
  for (int64_t degree : {mesh.tensor_parallel, mesh.pipeline_parallel, mesh.context_parallel, mesh.expert_parallel}) {
    if (degree > 1) ++count;
  }
  return count;
}

}  // namespace

uint64_t default_nccl_buffer_bytes(int64_t world_size) {
  if (world_size <= 1) return 0;
  // One communicator: channels x ring peers x (Simple + LL128 + LL buffers), sizes and
  // sources in scenario/outside_allocator.yaml (264 MiB with 16 channels). Observed per-process
  // NCCL usage is "hundreds of MB" (../shared/docs/training-memory-model.md §8); set nccl_buffer_mib to a
  // measured figure (nvidia-smi minus memory_reserved minus the context) when you have one.
  return outside_allocator_table().nccl.per_communicator_bytes();
}

void read_parallel_section(const YamlNode& root, const std::string& base_dir, Scenario& scenario) {
  YamlNode node = root.child("parallel");
  if (node.is_missing()) return;
  std::vector<std::string> allowed = {"world_size", "gpus_per_node", "engine", "nccl_buffer_mib", "ddp", "fsdp",
                                     "fsdp2", "deepspeed", "deepspeed_config"};
  allowed.insert(allowed.end(), mesh_keys().begin(), mesh_keys().end());
  node.reject_unknown_keys(allowed);
  ParallelConfig& parallel = scenario.parallel;
  std::vector<std::string> sections;
  for (const char* key : {"ddp", "fsdp", "fsdp2", "deepspeed", "deepspeed_config"}) {
    if (!node.child(key).is_missing()) sections.push_back(key);
  }
  if (sections.size() > 1) node.child(sections[1]).fail("'parallel' takes one engine section; also given: " + sections[0]);
  std::string implied = sections.empty() ? "none" : sections[0] == "deepspeed_config" ? "deepspeed" : sections[0];
  std::string engine = node.choice_or("engine", implied, {"none", "ddp", "fsdp", "fsdp2", "deepspeed"});
  if (!sections.empty() && engine != implied) {
    node.child("engine").fail("'parallel.engine' " + engine + " does not match the '" + sections[0] + "' section");
  }
  parallel.engine = engine == "ddp" ? ParallelEngine::Ddp
                    : engine == "fsdp" ? ParallelEngine::Fsdp
                    : engine == "fsdp2" ? ParallelEngine::Fsdp2
                    : engine == "deepspeed" ? ParallelEngine::DeepSpeed
                                            : ParallelEngine::None;
  YamlNode world = node.child("world_size");
  if (!world.is_missing()) parallel.world_size = world.as_integer(1, kMaxWorld);

  if (parallel.engine == ParallelEngine::Ddp) parallel.ddp = read_ddp(node.child("ddp"));
  if (parallel.engine == ParallelEngine::Fsdp) {
    parallel.fsdp = read_fsdp(node.child("fsdp"));
    if (parallel.fsdp.no_sync) refuse_no_sync_without_accumulation(node.child("fsdp").child("no_sync"), scenario);
    if (parallel.fsdp.mixed_precision && parallel.fsdp.param_dtype != FloatDtype::Float32) {
      require_half_parameters(root, scenario, "fsdp.mixed_precision.param_dtype");
    }
  }
  if (parallel.engine == ParallelEngine::Fsdp2) {
    parallel.fsdp2 = read_fsdp2(node.child("fsdp2"), parallel.warnings);
    if (parallel.fsdp2.no_sync) refuse_no_sync_without_accumulation(node.child("fsdp2").child("no_sync"), scenario);
    if (parallel.fsdp2.mixed_precision && parallel.fsdp2.param_dtype != FloatDtype::Float32) {
      require_half_parameters(root, scenario, "fsdp2.mixed_precision.param_dtype");
    }
  }
  if (parallel.engine == ParallelEngine::DeepSpeed) {
    DeepSpeedJson ds;
    std::string source = "parallel.deepspeed";
    YamlNode where = node.child("deepspeed");
    if (!node.child("deepspeed_config").is_missing()) {
      where = node.child("deepspeed_config");
      std::filesystem::path path = where.as_string();
      if (path.is_relative()) path = std::filesystem::path(base_dir) / path;
      parallel.deepspeed.config_file = where.as_string();
      source = path.string();
      ds = read_deepspeed_json(source, model_hidden(scenario));
    } else {
      ds = read_yaml_deepspeed(where, model_hidden(scenario));
    }
    if (world.is_missing() && ds.train_batch_size) {
      // train_batch_size = micro batch x accumulation x world size.
      int64_t per_rank = ds.micro_batch.value_or(scenario.batch_size) * ds.grad_accum.value_or(scenario.grad_accum_steps);
      if (*ds.train_batch_size % per_rank != 0) {
        node.fail("train_batch_size " + std::to_string(*ds.train_batch_size) + " in " + source +
                  " is not a multiple of micro batch x accumulation steps (" + std::to_string(per_rank) + ")");
      }
      parallel.world_size = *ds.train_batch_size / per_rank;
      if (parallel.world_size > kMaxWorld) {
        node.fail("train_batch_size " + std::to_string(*ds.train_batch_size) + " in " + source + " implies world_size " +
                  std::to_string(parallel.world_size) + ", over the limit of " + std::to_string(kMaxWorld));
      }
    } else if (world.is_missing()) {
      node.fail("'parallel' needs 'world_size' (or train_batch_size in the DeepSpeed config)");
    }
    parallel.deepspeed.zero_optimization = ds.zero;
    parallel.warnings.insert(parallel.warnings.end(), ds.warnings.begin(), ds.warnings.end());
    reconcile_deepspeed(root, where, ds, scenario, source);
    if (!world.is_missing() && ds.train_batch_size) check_train_batch_size(*ds.train_batch_size, scenario, source);
  } else if (world.is_missing() && parallel.engine != ParallelEngine::None) {
    node.fail("'parallel' needs 'world_size' (ranks in the data-parallel group)");
  }
  read_mesh_keys(node, scenario);
  parallel.gpus_per_node = node.integer_or("gpus_per_node", std::min<int64_t>(parallel.world_size, 8), 1, kMaxWorld);
  if (parallel.gpus_per_node > parallel.world_size) {
    node.child("gpus_per_node").fail("'parallel.gpus_per_node' exceeds world_size");
  }
  YamlNode nccl = node.child("nccl_buffer_mib");
  parallel.nccl_buffer_bytes = nccl.is_missing()
                                   ? default_nccl_buffer_bytes(parallel.world_size) * communicators(parallel)
                                   : static_cast<uint64_t>(std::llround(nccl.as_number(0, 1 << 20) * 1024.0 * 1024.0));
  // NCCL's buffers are this process's memory outside the caching allocator, like the context.
  if (!scenario.device.is_cpu) scenario.device.model.context_bytes += parallel.nccl_buffer_bytes;
}

}  // namespace oomcast::scenario
