// FullyShardedDataParallel (FSDP1), one flat parameter per wrapped
// unit (../shared/docs/training-memory-model.md §7.4): the rank keeps its shard of each unit; a unit is
// all-gathered (in MixedPrecision.param_dtype) before its forward and again before its
// backward, with forward/backward prefetch of the neighbouring unit; FULL_SHARD frees it
// after forward, SHARD_GRAD_OP keeps it until its backward is done. After a unit's backward
// its unsharded gradient is reduce-scattered (in reduce_dtype) into the sharded .grad. The
// root unit (parameters outside any block) is not resharded after forward.
// Streams, as FSDP1 runs them: the all-gather and its buffers are on the unshard stream; the
// reshard frees the unsharded parameter after record_stream on the compute stream (it may
// still be read there), and with limit_all_gathers the CPU waits on the free event of the
// unit two reshards back before the next all-gather (the trace's `sync 0` there). The
// reduce-scatter's cast and output are on the post-backward stream, and the autograd gradient
// it consumes is record_stream'd there before it is dropped. By the end of each backward the
// GPU is taken to have caught up (a device sync): the trace knows no GPU timing.
// Frozen parameters: a unit whose parameters are all frozen is gathered as usual but has no
// gradient, no reduce-scatter and no optimizer state. With use_orig_params=False a unit must
// not mix frozen and trainable parameters (PyTorch refuses to flatten them); with
// use_orig_params=True it may, and then its flat gradient and sharded .grad still cover the
// whole unit (the frozen parts are zeros, as PyTorch's docs warn: gradient memory as if
// nothing were frozen), while the optimizer steps only the trainable pieces of this rank's
// slice (planner/parallel/fsdp_rank_shards.h).
// no_sync (parallel.fsdp.no_sync): the micro-batches before the last run under model.no_sync(),
// where the post-backward hook reshards the unit and returns before the reduce-scatter
// (torch 2.13 distributed/fsdp/_runtime_utils.py _post_backward_hook: `_post_backward_reshard`
// then `if not state._sync_gradients: return`), so each unit's unsharded gradient (the padded
// flat_param.grad, in the gathered dtype) stays on the device and the next backward accumulates
// into it (_flat_param.py prepare_gradient_for_backward: "Expects `.grad` to be the unsharded
// gradient in `no_sync()`"); the last micro-batch reduce-scatters the sum.
#include <algorithm>
#include <deque>

#include "base/input_error.h"

#include "planner/optimizers.h"
#include "planner/parallel/comm_streams.h"
#include "planner/parallel/fsdp_rank_shards.h"
#include "planner/parallel/parallel_rank.h"
#include "planner/precision.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

using scenario::FsdpAutoWrap;
using scenario::FsdpBackwardPrefetch;
using scenario::FsdpConfig;
using scenario::FsdpSharding;
using scenario::Scenario;
using scenario::float_dtype_bytes;

namespace {

class FsdpRank : public ParallelRank {
 public:
  FsdpRank(const Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer, ModelState* model)
      : ParallelRank(scenario, graph, writer, model),
        fsdp_(scenario.parallel.fsdp),
        groups_(unit_groups(graph, uses_, fsdp_.auto_wrap == FsdpAutoWrap::Block)) {
    const PrecisionRules rules = job_precision_rules(scenario);
    const uint64_t param_bytes = dtype_bytes(rules.parameter_dtype);
    storage_bytes_ = fsdp_.mixed_precision ? 4 : param_bytes;
    gathered_bytes_ = fsdp_.mixed_precision ? float_dtype_bytes(fsdp_.param_dtype) : param_bytes;
    reduce_bytes_ = fsdp_.mixed_precision ? float_dtype_bytes(fsdp_.reduce_dtype) : gathered_bytes_;
    sharded_ = fsdp_.sharding_strategy != FsdpSharding::NoShard;
    gathers_ = sharded_ || fsdp_.mixed_precision;
    const size_t count = groups_.params.size();
    gathered_.assign(count, -1);
    grad_shard_.assign(count, -1);
    ready_.assign(count, 0);
    reduced_.assign(count, 0);
    starts_at_.assign(graph.ops.size(), -1);
    ends_at_.assign(graph.ops.size(), -1);
    shards_ = fsdp_rank_shards(graph, groups_, world(), sharded_);
    trainable_count_.assign(count, 0);
    for (size_t g = 0; g < count; ++g) {
      for (int32_t parameter : groups_.params[g]) {
        if (graph.parameter_requires_grad(parameter)) ++trainable_count_[g];
      }
      if (!fsdp_.use_orig_params && trainable_count_[g] > 0 && trainable_count_[g] < groups_.params[g].size()) {
        refuse_mixed_unit(g);
      }
    }
    if (fsdp_.no_sync && scenario.grad_accum_steps < 2) {
      throw InputError(SourceLocation{}, "parallel.fsdp.no_sync",
                       "parallel.fsdp.no_sync: no_sync() skips the reduce-scatter of every micro-batch but the last, and with "
                       "grad_accum_steps 1 there is only the last: set grad_accum_steps above 1 or drop no_sync");
    }
    for (size_t g = 0; g < count; ++g) {
      if (groups_.first_op[g] >= 0) starts_at_[static_cast<size_t>(groups_.first_op[g])] = static_cast<int32_t>(g);
      if (groups_.last_op[g] >= 0) ends_at_[static_cast<size_t>(groups_.last_op[g])] = static_cast<int32_t>(g);
    }
  }

  void allocate_parameters() override {
    for (size_t g = 0; g < groups_.params.size(); ++g) {
      names_.push_back(intern("fsdp." + group_label(g) + ".flat_param"));
      if (groups_.numel[g] == 0 || fsdp_.cpu_offload) continue;  // CPUOffload: the shard lives on the host
      writer_->alloc(names_.back(), held(g) * storage_bytes_, TensorCategory::Parameter);
    }
  }

  void construct_optimizer() override {
    if (fsdp_.cpu_offload) return;  // the optimizer steps the CPU shards
    // job_precision_rules: training.master_weights false steps the bf16 shard in place with
    // bf16 moments (torch.optim states are zeros_like(param)), as torchtune's bf16 recipes do.
    PrecisionRules rules = job_precision_rules(scenario_);
    if (fsdp_.mixed_precision) rules.fp32_master_weights = false;  // the fp32 shard is the master
    std::vector<OptimizerParameter> params;
    const DType dtype = storage_bytes_ == 4 || rules.fp32_master_weights ? DType::Float32 : rules.parameter_dtype;
    for (size_t g = 0; g < groups_.params.size(); ++g) {
      if (!shards_.group_trainable[g]) continue;  // a frozen flat parameter never has a .grad
      if (!fsdp_.use_orig_params) {
        params.push_back(OptimizerParameter{names_[g], held(g), dtype, {static_cast<int64_t>(held(g))}});
        stepped_group_.push_back(g);
        continue;
      }
      // The original parameters are flat views into the shard; those with no elements in
      // this rank's slice, and the frozen ones, get no .grad and so no state.
      for (const ShardPiece& piece : shards_.trainable_pieces[g]) {
        params.push_back(OptimizerParameter{intern(param_name(piece.parameter)), piece.numel, dtype,
                                            {static_cast<int64_t>(piece.numel)}});
        stepped_group_.push_back(g);
      }
    }
    optimizer_ = std::make_unique<OptimizerModel>(scenario_.optimizer, rules, std::move(params), writer_);
    optimizer_->construct();
  }

  void begin_forward(bool training) override {
    training_ = training;
    gather(static_cast<size_t>(groups_.root));
    if (training) return;
    // Evaluation runs without per-op hooks: hold the largest unit as the working set.
    size_t largest = 0;
    for (size_t g = 0; g < groups_.numel.size(); ++g) {
      if (groups_.numel[g] > groups_.numel[largest]) largest = g;
    }
    gather(largest);
  }

  void before_forward_op(uint32_t op) override {
    int32_t g = starts_at_[op];
    if (g < 0) return;
    gather(static_cast<size_t>(g));
    if (fsdp_.forward_prefetch && g + 1 < groups_.root) gather(static_cast<size_t>(g + 1));
  }

  void after_forward_op(uint32_t op) override {
    int32_t g = ends_at_[op];
    if (g < 0) return;
    if (!training_ || fsdp_.sharding_strategy == FsdpSharding::FullShard) reshard(static_cast<size_t>(g));
  }

  void end_forward() override {
    if (training_) return;
    for (size_t g = 0; g < gathered_.size(); ++g) reshard(g);
  }

  void begin_backward(bool last_micro_batch) override {
    sync_gradients_ = last_micro_batch || !fsdp_.no_sync;
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(reduced_.begin(), reduced_.end(), 0);
  }

  void before_backward_op(uint32_t op, bool) override {
    int32_t g = ends_at_[op];
    if (g < 0) return;
    gather(static_cast<size_t>(g));  // the pre-backward hook re-gathers a resharded unit
    if (fsdp_.backward_prefetch == FsdpBackwardPrefetch::BackwardPre && g > 0) gather(static_cast<size_t>(g - 1));
  }

  void after_backward_op(uint32_t op) override {
    int32_t g = starts_at_[op];
    if (g < 0) return;
    // BACKWARD_POST prefetches the next unit once this one's gradients are computed, before
    // this unit is resharded.
    if (fsdp_.backward_prefetch == FsdpBackwardPrefetch::BackwardPost && g > 0) gather(static_cast<size_t>(g - 1));
  }

  void parameter_grad_ready(int32_t parameter) override {
    auto g = static_cast<size_t>(groups_.group_of_param[static_cast<size_t>(parameter)]);
    if (++ready_[g] == trainable_count_[g] && static_cast<int32_t>(g) != groups_.root) post_backward(g);
  }

  void end_backward(bool /*last_micro_batch*/) override {
    for (size_t g = 0; g < groups_.params.size(); ++g) post_backward(g);
    for (size_t g = 0; g < gathered_.size(); ++g) reshard(g);
    writer_->sync_device();
    free_events_.clear();
  }

  void optimizer_step() override {
    if (!optimizer_) return;
    std::vector<uint8_t> has_grad(stepped_group_.size());
    for (size_t i = 0; i < has_grad.size(); ++i) has_grad[i] = grad_shard_[stepped_group_[i]] >= 0 ? 1 : 0;
    optimizer_->step(has_grad);
  }

  void zero_grad(bool set_to_none) override {
    if (!set_to_none) return;
    for (int64_t& slot : grad_shard_) {
      if (slot >= 0) writer_->free(static_cast<uint32_t>(slot));
      slot = -1;
    }
  }

 private:
  std::string group_label(size_t g) const {
    return static_cast<int32_t>(g) == groups_.root ? std::string("root") : "unit" + std::to_string(g);
  }
  // Elements this rank holds of group g: its shard of the flat parameter padded to a
  // multiple of the world size, or all of it with NO_SHARD.
  uint64_t held(size_t g) const { return sharded_ ? (groups_.numel[g] + world() - 1) / world() : groups_.numel[g]; }
  uint64_t padded(size_t g) const { return sharded_ ? held(g) * world() : groups_.numel[g]; }

  [[noreturn]] void refuse_mixed_unit(size_t g) const {
    std::string frozen, trainable;
    for (int32_t parameter : groups_.params[g]) {
      const bool grad = graph_.parameter_requires_grad(parameter);
      std::string& example = grad ? trainable : frozen;
      if (example.empty()) example = param_name(parameter);
    }
    throw InputError(SourceLocation{}, "parallel.fsdp.use_orig_params",
                     "FSDP unit '" + group_label(g) + "' mixes frozen (" + frozen + ") and trainable (" + trainable +
                         ") parameters, which FSDP refuses to flatten with use_orig_params=False (\"Must flatten "
                         "tensors with uniform requires_grad\"): set parallel.fsdp.use_orig_params: true, or "
                         "freeze or train whole units");
  }

  void gather(size_t g) {
    if (!gathers_ || gathered_[g] >= 0 || groups_.numel[g] == 0) return;
    // _RateLimiter: at most two all-gathers in flight; the CPU waits on the oldest free event.
    if (fsdp_.limit_all_gathers && free_events_.size() >= 2) {
      free_events_.pop_front();
      writer_->sync(kComputeStream);
    }
    const sim::StreamId caller = writer_->stream();
    writer_->set_stream(kFsdpUnshardStream);
    uint32_t staging = UINT32_MAX;
    if (fsdp_.cpu_offload) {
      staging = writer_->alloc(intern("fsdp." + group_label(g) + ".shard_h2d"), held(g) * storage_bytes_,
                               TensorCategory::Temporary);
    }
    uint32_t low_precision_shard = UINT32_MAX;
    if (fsdp_.mixed_precision && gathered_bytes_ != storage_bytes_) {
      // _mp_shard: the local shard cast to param_dtype before the all-gather.
      low_precision_shard = writer_->alloc(intern("fsdp." + group_label(g) + ".mp_shard"), held(g) * gathered_bytes_,
                                           TensorCategory::Temporary);
    }
    gathered_[g] = writer_->alloc(intern("fsdp." + group_label(g) + ".unsharded_flat_param"), padded(g) * gathered_bytes_,
                                  TensorCategory::Communication);
    if (low_precision_shard != UINT32_MAX) writer_->free(low_precision_shard);
    if (staging != UINT32_MAX) writer_->free(staging);
    writer_->set_stream(caller);
  }

  void reshard(size_t g) {
    if (gathered_[g] < 0) return;
    const auto unsharded = static_cast<uint32_t>(gathered_[g]);
    if (sharded_) writer_->record_stream(unsharded, kComputeStream);  // "do not free until the compute stream is done"
    writer_->free(unsharded);
    gathered_[g] = -1;
    free_events_.push_back(g);
  }

  // The post-backward hook: reduce-scatter the unit's unsharded gradient into the sharded
  // .grad (accumulating across micro-batches), then reshard the unit.
  void post_backward(size_t g) {
    if (reduced_[g]) return;
    reduced_[g] = 1;
    if (!sync_gradients_) {  // no_sync(): the unsharded gradient stays for the next micro-batch
      if (static_cast<int32_t>(g) != groups_.root) reshard(g);
      return;
    }
    bool any_grad = false;
    for (int32_t parameter : groups_.params[g]) any_grad = any_grad || model_->grad_slot[static_cast<size_t>(parameter)] >= 0;
    if (any_grad) {
      const sim::StreamId caller = writer_->stream();
      writer_->set_stream(kFsdpPostBackwardStream);
      uint32_t cast = UINT32_MAX;
      if (reduce_bytes_ != gathered_bytes_) {
        cast = writer_->alloc(intern("fsdp." + group_label(g) + ".unsharded_grad_reduce_dtype"), padded(g) * reduce_bytes_,
                              TensorCategory::Temporary);
      }
      const bool becomes_grad = grad_shard_[g] < 0 && reduce_bytes_ == storage_bytes_ && !fsdp_.cpu_offload;
      uint32_t output = writer_->alloc(intern("fsdp." + group_label(g) + (becomes_grad ? ".grad_shard" : ".reduce_scatter_output")),
                                       held(g) * reduce_bytes_,
                                       becomes_grad ? TensorCategory::Gradient : TensorCategory::Communication);
      for (int32_t parameter : groups_.params[g]) {
        const int64_t grad = model_->grad_slot[static_cast<size_t>(parameter)];
        if (grad >= 0) writer_->record_stream(static_cast<uint32_t>(grad), kFsdpPostBackwardStream);
        drop_grad(parameter);
      }
      if (cast != UINT32_MAX) writer_->free(cast);
      if (becomes_grad) {
        grad_shard_[g] = output;
      } else {
        if (grad_shard_[g] < 0 && !fsdp_.cpu_offload) {
          grad_shard_[g] = writer_->alloc(intern("fsdp." + group_label(g) + ".grad_shard"), held(g) * storage_bytes_,
                                          TensorCategory::Gradient);
        }
        writer_->free(output);  // added into the existing shard, or copied to the host
      }
      writer_->set_stream(caller);
    }
    if (static_cast<int32_t>(g) != groups_.root) reshard(g);
  }

  const FsdpConfig& fsdp_;
  UnitGroups groups_;
  uint64_t storage_bytes_ = 4;
  uint64_t gathered_bytes_ = 4;
  uint64_t reduce_bytes_ = 4;
  bool sharded_ = true;
  bool gathers_ = true;
  bool training_ = true;
  bool sync_gradients_ = true;  // false in a backward under no_sync()
  std::vector<uint32_t> names_;
  std::vector<int64_t> gathered_;
  std::vector<int64_t> grad_shard_;
  std::vector<size_t> ready_;
  std::vector<uint8_t> reduced_;
  std::vector<int32_t> starts_at_;
  std::vector<int32_t> ends_at_;
  std::deque<size_t> free_events_;  // reshards whose free event the rate limiter may wait on
  FsdpRankShards shards_;
  std::vector<size_t> trainable_count_;  // per group: parameters with requires_grad
  std::vector<size_t> stepped_group_;    // per optimizer parameter: the group whose .grad it reads
  std::unique_ptr<OptimizerModel> optimizer_;
};

}  // namespace

std::unique_ptr<ParallelRank> make_fsdp_rank(const Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer,
                                             ModelState* model) {
  return std::make_unique<FsdpRank>(scenario, graph, writer, model);
}

}  // namespace oomcast::planner
