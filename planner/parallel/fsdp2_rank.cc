// FSDP2 (torch.distributed.fsdp.fully_shard, PyTorch 2.4+), one FSDPParamGroup per
// fully_shard call: one per decoder/encoder block and the root (the parameters outside any
// block). Each parameter is sharded on dim 0 (planner/parallel/fsdp2_shards.h) and keeps its
// dtype (fp32 under MixedPrecisionPolicy, which casts only what it gathers). What a group does,
// as _fully_shard/_fsdp_param_group.py and _fsdp_collectives.py run it (docs/distributed.md#fsdp2):
// - unshard, on the all-gather copy-in stream: with a param_dtype other than the shards', the
//   shards are first cast into one flat param_dtype buffer (_get_param_all_gather_inputs'
//   foreach-copy path), then the all-gather output, world_size x the group's shard elements in
//   param_dtype, is allocated; the all-gather input is a view of this rank's slice of it, the
//   collective runs in place on the all-gather stream (it allocates nothing there).
// - wait_for_unshard, on the compute stream: each parameter's unsharded tensor (world_size x
//   its padded shard) is allocated and filled by split_with_sizes_copy from the output. In
//   forward the output is kept (comm_ctx.all_gather_state) until the next group's copy-out,
//   so at most two are alive, and the root's post-forward frees the last; in backward it is
//   freed right after the copy-out.
// - reshard frees the unsharded tensors: after each block's forward with
//   reshard_after_forward (the root never reshards after forward), and in post_backward.
// - pre_backward re-gathers a resharded block and prefetches the block before it in backward
//   order (_backward_prefetch, one group ahead).
// - post_backward, when the block's inputs get their gradient (after its first op's backward):
//   reshard, free the previous group's reduce-scatter input (after the compute stream waits on
//   its event), allocate this group's reduce-scatter input (world_size x the trainable padded
//   shards, reduce_dtype) on the compute stream, copy the unsharded grads in (chunk_cat) and free
//   them, then on the reduce-scatter stream allocate the output (the trainable shards in
//   reduce_dtype); the sharded .grad is a view of that output, or of its cast to the shards'
//   dtype when reduce_dtype differs; a second micro-batch adds into the existing .grad and
//   frees the new one. The last input is freed by the root's final callback.
// With offload_policy cpu (CPUOffloadPolicy) the shards, the sharded grads and the optimizer
// step live on the host: each parameter's shard is copied to the device on the copy-in
// stream (FSDPParam.all_gather_inputs: .to(device), then the cast to param_dtype) before the
// all-gather output is allocated, and those copies are dropped after the copy-in; each
// reduce-scatter output (and its cast) is copied to the host and freed.
// no_sync (parallel.fsdp2.no_sync: set_requires_gradient_sync(False) on every micro-batch but
// the last; torch 2.13 _fully_shard/_fsdp_param_group.py post_backward, `if not self.reduce_grads`):
// the group reshards and each parameter keeps its unsharded .grad; where reduce_dtype differs from
// the gradient's dtype the grad is upcast into unsharded_accumulated_grad and the low-precision one
// dropped (_fsdp_param.py to_accumulated_grad_if_needed), later grads added into it and dropped
// (accumulate_unsharded_grad_if_needed, at the start of each post_backward). The synced backward
// copies the accumulated grad into the reduce-scatter input and frees it.
// FSDP2 frees by waiting on CUDA events (stream waits, never record_stream) and makes no CPU
// synchronization on this path, so every free takes effect where the CPU issues it and the
// trace needs no sync events. By the end of backward the GPU is taken to have caught up.
#include <algorithm>

#include "base/input_error.h"

#include "planner/optimizers.h"
#include "planner/parallel/fsdp2_shards.h"
#include "planner/parallel/fsdp2_streams.h"
#include "planner/parallel/parallel_rank.h"
#include "planner/precision.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

using scenario::Fsdp2Config;
using scenario::Scenario;
using scenario::float_dtype_bytes;

namespace {

class Fsdp2Rank : public ParallelRank {
 public:
  Fsdp2Rank(const Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer, ModelState* model)
      : ParallelRank(scenario, graph, writer, model),
        config_(scenario.parallel.fsdp2),
        groups_(unit_groups(graph, uses_, true)),
        shards_(fsdp2_shards(graph, groups_, world())) {
    const PrecisionRules rules = job_precision_rules(scenario);
    const uint64_t param_bytes = dtype_bytes(rules.parameter_dtype);
    storage_bytes_ = config_.mixed_precision ? 4 : param_bytes;
    gathered_bytes_ = config_.mixed_precision ? float_dtype_bytes(config_.param_dtype) : param_bytes;
    reduce_bytes_ = config_.mixed_precision ? float_dtype_bytes(config_.reduce_dtype) : gathered_bytes_;
    const size_t count = groups_.params.size();
    unsharded_.resize(count);
    pending_gather_.assign(count, -1);
    grad_.assign(count, -1);
    reduced_.assign(count, 0);
    accumulated_.assign(graph.parameters.size(), -1);
    if (config_.no_sync && scenario.grad_accum_steps < 2) {
      throw InputError(SourceLocation{}, "parallel.fsdp2.no_sync",
                       "parallel.fsdp2.no_sync: set_requires_gradient_sync(False) skips the reduce-scatter of every micro-batch but the "
                       "last, and with grad_accum_steps 1 there is only the last: set grad_accum_steps above 1 or "
                       "drop no_sync");
    }
    starts_at_.assign(graph.ops.size(), -1);
    ends_at_.assign(graph.ops.size(), -1);
    for (size_t g = 0; g < count; ++g) {
      if (groups_.first_op[g] >= 0) starts_at_[static_cast<size_t>(groups_.first_op[g])] = static_cast<int32_t>(g);
      if (groups_.last_op[g] >= 0) ends_at_[static_cast<size_t>(groups_.last_op[g])] = static_cast<int32_t>(g);
    }
  }

  void allocate_parameters() override {
    // fully_shard replaces each parameter by its padded dim-0 shard (_sharded_param_data).
    for (size_t g = 0; g < groups_.params.size(); ++g) {
      for (size_t i = 0; i < groups_.params[g].size(); ++i) {
        const uint64_t shard = shards_.param_shard[g][i];
        if (shard == 0 || config_.cpu_offload) continue;  // CPUOffloadPolicy: the shard is on the host
        writer_->alloc(intern(param_name(groups_.params[g][i]) + ".fsdp2_shard"), shard * storage_bytes_,
                       TensorCategory::Parameter);
      }
    }
  }

  void construct_optimizer() override {
    if (config_.cpu_offload) return;  // the optimizer steps the host shards
    // job_precision_rules: training.master_weights false steps the bf16 shard in place with
    // bf16 moments (torch.optim states are zeros_like(param)), as torchtune's bf16 recipes do.
    PrecisionRules rules = job_precision_rules(scenario_);
    if (config_.mixed_precision) rules.fp32_master_weights = false;  // the fp32 shard is the master
    const DType dtype = storage_bytes_ == 4 || rules.fp32_master_weights ? DType::Float32 : rules.parameter_dtype;
    std::vector<OptimizerParameter> params;
    for (size_t g = 0; g < groups_.params.size(); ++g) {
      for (size_t i = 0; i < groups_.params[g].size(); ++i) {
        const int32_t parameter = groups_.params[g][i];
        if (!graph_.parameter_requires_grad(parameter)) continue;
        // The optimizer sees the DTensor's local shard: rank 0's full first chunk.
        params.push_back(OptimizerParameter{intern(param_name(parameter)), shards_.param_shard[g][i], dtype,
                                            fsdp2_shard_shape(graph_, parameter, world())});
        stepped_group_.push_back(g);
      }
    }
    optimizer_ = std::make_unique<OptimizerModel>(scenario_.optimizer, rules, std::move(params), writer_);
    optimizer_->construct();
  }

  void begin_forward(bool training) override {
    training_ = training;
    backward_ = false;
    pre_forward(static_cast<size_t>(groups_.root));
    if (training) return;
    // Evaluation runs without per-op hooks: hold the largest group as the working set.
    size_t largest = 0;
    for (size_t g = 0; g < groups_.numel.size(); ++g) {
      if (groups_.numel[g] > groups_.numel[largest]) largest = g;
    }
    pre_forward(largest);
  }

  void before_forward_op(uint32_t op) override {
    const int32_t g = starts_at_[op];
    if (g >= 0) pre_forward(static_cast<size_t>(g));
  }

  void after_forward_op(uint32_t op) override {
    const int32_t g = ends_at_[op];
    if (g < 0 || g == groups_.root) return;
    if (!training_ || config_.reshard_after_forward) reshard(static_cast<size_t>(g));
  }

  void end_forward() override {
    // The root's post-forward frees the last deferred all-gather output.
    free_slot(all_gather_state_);
    if (training_) return;
    for (size_t g = 0; g < unsharded_.size(); ++g) reshard(g);
  }

  void begin_backward(bool last_micro_batch) override {
    backward_ = true;
    reduce_grads_ = last_micro_batch || !config_.no_sync;
    std::fill(reduced_.begin(), reduced_.end(), 0);
    // The root's pre-backward hook (on the loss) runs first: its parameters are still
    // unsharded; it prefetches the last block.
    pre_backward(static_cast<size_t>(groups_.root));
  }

  void before_backward_op(uint32_t op, bool) override {
    const int32_t g = ends_at_[op];
    if (g >= 0) pre_backward(static_cast<size_t>(g));
  }

  void after_backward_op(uint32_t op) override {
    const int32_t g = starts_at_[op];
    if (g >= 0 && g != groups_.root) post_backward(static_cast<size_t>(g));
  }

  void end_backward(bool) override {
    // _root_post_backward_final_callback: the groups whose post-backward did not run (the
    // root), then the last reduce-scatter input is freed once the compute stream waits on it.
    for (size_t g = 0; g < groups_.params.size(); ++g) post_backward(g);
    for (size_t g = 0; g < pending_gather_.size(); ++g) free_slot(pending_gather_[g]);
    free_slot(reduce_scatter_state_);
    writer_->sync_device();
  }

  void optimizer_step() override {
    if (!optimizer_) return;
    std::vector<uint8_t> has_grad(stepped_group_.size());
    for (size_t i = 0; i < has_grad.size(); ++i) has_grad[i] = grad_[stepped_group_[i]] >= 0 ? 1 : 0;
    optimizer_->step(has_grad);
  }

  void zero_grad(bool set_to_none) override {
    if (!set_to_none) return;
    for (int64_t& slot : grad_) free_slot(slot);
  }

 private:
  std::string group_label(size_t g) const {
    return static_cast<int32_t>(g) == groups_.root ? std::string("root") : "block" + std::to_string(g);
  }

  void free_slot(int64_t& slot) {
    if (slot >= 0) writer_->free(static_cast<uint32_t>(slot));
    slot = -1;
  }

  bool is_unsharded(size_t g) const { return !unsharded_[g].empty(); }

  void pre_forward(size_t g) {
    unshard(g);
    wait_for_unshard(g);
  }

  void pre_backward(size_t g) {
    if (reduced_[g]) return;
    unshard(g);  // a no-op when prefetched or never resharded
    wait_for_unshard(g);
    // _backward_prefetch: the group before this one in forward order (the root is last in
    // that order, so it prefetches the last block; block 0 prefetches nothing).
    const auto root = static_cast<size_t>(groups_.root);
    const size_t previous = g == root ? root - 1 : g - 1;
    if (g != 0 && previous < root && !reduced_[previous]) unshard(previous);
  }

  // foreach_all_gather: allocations on the copy-in stream; the collective is in place.
  void unshard(size_t g) {
    if (is_unsharded(g) || pending_gather_[g] >= 0 || shards_.group_shard[g] == 0) return;
    const sim::StreamId caller = writer_->stream();
    writer_->set_stream(kFsdp2AllGatherCopyInStream);
    std::vector<int64_t> inputs;  // what is copied into this rank's slice of the output
    if (config_.cpu_offload) {
      for (size_t i = 0; i < groups_.params[g].size(); ++i) {
        const uint64_t shard = shards_.param_shard[g][i];
        if (shard == 0) continue;
        const std::string& name = param_name(groups_.params[g][i]);
        int64_t on_device = writer_->alloc(intern(name + ".fsdp2_shard_h2d"), shard * storage_bytes_, TensorCategory::Temporary);
        if (gathered_bytes_ != storage_bytes_) {
          const int64_t cast = writer_->alloc(intern(name + ".fsdp2_shard_cast"), shard * gathered_bytes_,
                                              TensorCategory::Temporary);
          free_slot(on_device);
          on_device = cast;
        }
        inputs.push_back(on_device);
      }
    } else if (gathered_bytes_ != storage_bytes_) {
      inputs.push_back(writer_->alloc(intern("fsdp2." + group_label(g) + ".all_gather_input_cast"),
                                      shards_.group_shard[g] * gathered_bytes_, TensorCategory::Temporary));
    }
    pending_gather_[g] = writer_->alloc(intern("fsdp2." + group_label(g) + ".all_gather_output"),
                                        world() * shards_.group_shard[g] * gathered_bytes_,
                                        TensorCategory::Communication);
    for (int64_t& input : inputs) free_slot(input);
    writer_->set_stream(caller);
  }

  // foreach_all_gather_copy_out on the compute stream.
  void wait_for_unshard(size_t g) {
    if (pending_gather_[g] < 0) return;
    const bool forward = !backward_;
    if (forward) free_slot(all_gather_state_);  // the previous group's output, its copy-out done
    for (size_t i = 0; i < groups_.params[g].size(); ++i) {
      const uint64_t shard = shards_.param_shard[g][i];
      if (shard == 0) continue;
      unsharded_[g].push_back(writer_->alloc(intern(param_name(groups_.params[g][i]) + ".fsdp2_unsharded"),
                                             world() * shard * gathered_bytes_, TensorCategory::Communication));
    }
    if (forward) {
      all_gather_state_ = pending_gather_[g];
      pending_gather_[g] = -1;
    } else {
      free_slot(pending_gather_[g]);
    }
  }

  void reshard(size_t g) {
    for (uint32_t slot : unsharded_[g]) writer_->free(slot);
    unsharded_[g].clear();
  }

  void post_backward(size_t g) {
    if (reduced_[g]) return;
    reduced_[g] = 1;
    for (int32_t parameter : groups_.params[g]) {  // accumulate_unsharded_grad_if_needed
      if (accumulated_[static_cast<size_t>(parameter)] >= 0 && model_->grad_slot[static_cast<size_t>(parameter)] >= 0) {
        drop_grad(parameter);
      }
    }
    if (!reduce_grads_) {
      reshard(g);
      if (reduce_bytes_ == gathered_bytes_) return;  // autograd keeps accumulating into .grad
      for (int32_t parameter : groups_.params[g]) {  // to_accumulated_grad_if_needed
        if (model_->grad_slot[static_cast<size_t>(parameter)] < 0) continue;
        accumulated_[static_cast<size_t>(parameter)] =
            writer_->alloc(intern(param_name(parameter) + ".unsharded_accumulated_grad"),
                           param_numel(parameter) * reduce_bytes_, TensorCategory::Gradient);
        drop_grad(parameter);
      }
      return;
    }
    bool any_grad = false;
    for (int32_t parameter : groups_.params[g]) {
      any_grad = any_grad || model_->grad_slot[static_cast<size_t>(parameter)] >= 0 ||
                 accumulated_[static_cast<size_t>(parameter)] >= 0;
    }
    reshard(g);
    if (!any_grad) return;
    free_slot(reduce_scatter_state_);
    const uint64_t shard = shards_.group_trainable_shard[g];
    reduce_scatter_state_ = writer_->alloc(intern("fsdp2." + group_label(g) + ".reduce_scatter_input"),
                                           world() * shard * reduce_bytes_, TensorCategory::Communication);
    for (int32_t parameter : groups_.params[g]) {  // after the copy-in
      drop_grad(parameter);
      free_slot(accumulated_[static_cast<size_t>(parameter)]);
    }
    const sim::StreamId caller = writer_->stream();
    writer_->set_stream(kFsdp2ReduceScatterStream);
    // With CPUOffloadPolicy the .grad is on the host: what the device holds is copied out and freed.
    const bool accumulates = grad_[g] >= 0 || config_.cpu_offload;
    const bool cast = reduce_bytes_ != storage_bytes_;
    const bool output_is_grad = !accumulates && !cast;
    int64_t output = writer_->alloc(intern("fsdp2." + group_label(g) + (output_is_grad ? ".sharded_grad" : ".reduce_scatter_output")),
                                    shard * reduce_bytes_,
                                    output_is_grad ? TensorCategory::Gradient : TensorCategory::Communication);
    if (output_is_grad) {
      grad_[g] = output;
    } else {
      int64_t in_storage_dtype = -1;
      if (cast) {
        in_storage_dtype = writer_->alloc(intern("fsdp2." + group_label(g) + (accumulates ? ".reduce_scatter_output_cast" : ".sharded_grad")),
                                          shard * storage_bytes_,
                                          accumulates ? TensorCategory::Temporary : TensorCategory::Gradient);
        free_slot(output);
      }
      if (accumulates) {
        free_slot(in_storage_dtype >= 0 ? in_storage_dtype : output);  // added into the .grad, or copied to the host
      } else {
        grad_[g] = in_storage_dtype;
      }
    }
    writer_->set_stream(caller);
  }

  const Fsdp2Config& config_;
  UnitGroups groups_;
  Fsdp2Shards shards_;
  uint64_t storage_bytes_ = 4;
  uint64_t gathered_bytes_ = 4;
  uint64_t reduce_bytes_ = 4;
  bool training_ = true;
  bool backward_ = false;
  bool reduce_grads_ = true;                      // false in a backward with set_requires_gradient_sync(False)
  std::vector<int64_t> accumulated_;              // per parameter: its unsharded_accumulated_grad
  std::vector<std::vector<uint32_t>> unsharded_;  // per group: the unsharded parameters' slots
  std::vector<int64_t> pending_gather_;           // per group: an all-gather output not yet copied out
  int64_t all_gather_state_ = -1;                 // forward: the last copied-out output, freed by the next copy-out
  int64_t reduce_scatter_state_ = -1;             // the last reduce-scatter input, freed by the next post-backward
  std::vector<int64_t> grad_;                     // per group: the flat sharded .grad
  std::vector<uint8_t> reduced_;
  std::vector<int32_t> starts_at_;
  std::vector<int32_t> ends_at_;
  std::vector<size_t> stepped_group_;  // per optimizer parameter: the group whose .grad it reads
  std::unique_ptr<OptimizerModel> optimizer_;
};

}  // namespace

std::unique_ptr<ParallelRank> make_fsdp2_rank(const Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer,
                                              ModelState* model) {
  return std::make_unique<Fsdp2Rank>(scenario, graph, writer, model);
}

}  // namespace oomcast::planner
