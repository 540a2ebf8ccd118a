// DeepSpeed ZeRO stages 0-3 (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py):
// - 16-bit parameters flattened into one buffer (stages 0-2) or partitioned per parameter
//   (stage 3; parameters under stage3_param_persistence_threshold stay whole);
// - an fp32 master partition and the optimizer moments, created eagerly at initialize (a
//   zero fp32 grad and one optimizer.step());
// - stage 1/2: ipg buffers of reduce_bucket_size 16-bit elements per backward (two with
//   overlap_comm); stage 2 copies each grad into the bucket as it is produced and keeps this
//   rank's reduced partition in a contiguous buffer; stage 1 keeps whole grads until the
//   accumulation boundary;
// - stage 3: each module's parameters are all-gathered before it runs, with prefetch of
//   stage3_prefetch_bucket_size elements (bounded by stage3_max_live_parameters), and
//   released after it unless reused within stage3_max_reuse_distance elements of the trace;
//   grads go through a persistent ipg bucket into a 16-bit grad partition buffer;
// - the step casts the grad partition (per sub_group_size tile at stage 3) to fp32.
// offload_optimizer moves masters, moments and fp32 grads to the host; offload_param moves
// the parameter partition there.
// Frozen parameters (requires_grad false): DeepSpeed builds its flat groups, masters, moments
// and gradient partitions from the trainable parameters only (stage_1_and_2.py keeps
// requires_grad params in bit16_groups, stage3.py _get_trainable_parameter_groups); a frozen
// parameter stays its own 16-bit tensor at stages 0-2, and at stage 3 it is still
// partitioned (its own partition tensor), gathered and released like every other one.
// Reductions at stages 1-2 (DeepSpeedZeroOptimizer): grads go through the ipg bucket, which
// is reduced when the next grad would not fit (reduce_independent_p_g_buckets_and_remove_grads)
// and at the end of backward (the epilogue). Stage 2 does so in every backward; stage 1 only
// with overlap_comm, and then only in the backward of the accumulation boundary
// (process_gradients runs the reduction for `partition_gradients or overlap_comm`, and
// reduce_ready_partitions_and_remove_grads skips stage 1 away from the boundary); without
// overlap_comm stage 1 reduces in reduce_gradients() after the boundary's backward. A bucket's
// reduction (average_tensor with reduce_scatter, DeepSpeed's default, and its default
// use_multi_rank_bucket_allreduce) flattens the bucket's grad slices into one new tensor
// (allreduce_bucket), all-reduces it and copies this rank's slices back, so each reduction
// allocates a bucket-sized temporary. With contiguous_gradients this rank's grads are then
// copied into grads_in_partition (copy_grads_in_partition, at stage 1 too: reduce_ipg_grads'
// "zero stage 1" branch), and the autograd grad was freed when it was copied into the bucket.
// Streams, with overlap_comm (DeepSpeed's default at stage 3): stage 3 all-gathers each
// parameter on the coordinator's all-gather stream; at stages 1-2 the reduction, its flat
// temporary and the grad partition (grads_in_partition, or the averaged pieces without
// contiguous_gradients) are on the reduction stream (average_tensor and reduce_ipg_grads run
// under `stream(self.reduction_stream)`). Blocks allocated there are reused only by requests
// on that stream, so they keep memory of their own instead of reusing the compute stream's
// free blocks (comm_streams.h). The ipg buffers are made on the compute stream at the start of
// each backward (setup_buckets, from the first grad hook), as DeepSpeed does.
// record_stream, as DeepSpeed >= 0.19 calls it (PR #7965, allreduce_and_copy*): the slices
// copied back from the reduction (views of the ipg buffer, or the grads themselves without
// contiguous_gradients) are record_stream'd on the reduction stream; the flat temporary is too,
// but it was allocated there, which the allocator ignores. The epilogue synchronises the device
// (get_accelerator().synchronize() with overlap_comm) before it releases the ipg buffers, so the
// events their frees record on the then idle reduction stream complete at once (the trace's
// sync after the frees).
// At stage 3 with overlap_comm: free_param (partition_parameters.py) record_streams the gathered
// parameter on the current (compute) stream before it drops it, so its block, on the
// all-gather stream, returns only once the compute stream has caught up; and
// __add_grad_to_ipg_bucket record_streams each autograd grad on reduce_and_partition_stream
// as it copies it into the ipg bucket there, after that stream waited on the compute stream.
// The trace knows no GPU timing, so the events complete where the CPU waits: with more than
// max_param_reduce_events (2) bucket reductions in flight, __reduce_and_partition_ipg_grads
// synchronises the oldest one's event (taken as a sync of the reduction stream and, as that
// stream had waited on it, of the compute stream: up to two buckets earlier than the real
// event), and the epilogue synchronises reduce_and_partition_stream at the end of backward.
// In forward and backward the parameter coordinator's fetch_sub_module waits on an event per
// gathered parameter and synchronises the oldest when more than __max_ongoing_fetch_events (2)
// are outstanding; those events are on the all-gather stream, which the compute stream waits
// on before every module, and the compute stream is taken to keep pace with it, so that wait
// also completes the compute stream's recorded frees (without that assumption nothing in
// forward would, and the released parameters would pile up until backward).
#include <algorithm>

#include "planner/parallel/comm_streams.h"
#include "planner/parallel/parallel_rank.h"
#include "planner/precision.h"

namespace oomcast::planner {

using scenario::OffloadDevice;
using scenario::Scenario;
using scenario::ZeroConfig;

namespace {

// DeepSpeedZeroOptimizer_Stage3.max_param_reduce_events.
constexpr uint32_t kMaxParamReduceEvents = 2;
// PartitionedParameterCoordinator.__max_ongoing_fetch_events.
constexpr uint32_t kMaxOngoingFetchEvents = 2;

class DeepSpeedRank : public ParallelRank {
 public:
  DeepSpeedRank(const Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer, ModelState* model)
      : ParallelRank(scenario, graph, writer, model), zero_(scenario.parallel.deepspeed.zero_optimization) {
    stage_ = zero_.stage;
    param_bytes_ = dtype_bytes(precision_rules(scenario.precision).parameter_dtype);
    for (size_t p = 0; p < graph.parameters.size(); ++p) {
      if (trainable(static_cast<int32_t>(p))) trainable_total_ += param_numel(static_cast<int32_t>(p));
    }
    partition_ = (trainable_total_ + world() - 1) / world();
    offload_optimizer_ = stage_ >= 1 && zero_.offload_optimizer.device == OffloadDevice::Cpu;
    offload_param_ = stage_ == 3 && zero_.offload_param.device == OffloadDevice::Cpu;
    persistent_.assign(graph.parameters.size(), 0);
    gathered_.assign(graph.parameters.size(), -1);
    if (stage_ == 3) build_trace();
  }

  void allocate_parameters() override {
    if (stage_ < 3) {
      for (size_t p = 0; p < graph_.parameters.size(); ++p) {
        auto parameter = static_cast<int32_t>(p);
        if (trainable(parameter)) continue;
        writer_->alloc(intern(param_name(parameter)), param_numel(parameter) * param_bytes_, TensorCategory::Parameter);
      }
      if (trainable_total_ > 0) {
        writer_->alloc(intern("deepspeed.bit16_groups_flat"), trainable_total_ * param_bytes_, TensorCategory::Parameter);
      }
      return;
    }
    uint64_t partitioned = 0;
    for (size_t p = 0; p < graph_.parameters.size(); ++p) {
      auto parameter = static_cast<int32_t>(p);
      uint64_t numel = param_numel(parameter);
      const uint64_t piece = (numel + world() - 1) / world();
      if (trainable(parameter)) partitioned += piece;
      if (numel < static_cast<uint64_t>(zero_.stage3_param_persistence_threshold)) {
        persistent_[p] = 1;  // ds_persist: kept whole on every rank
        writer_->alloc(intern(param_name(parameter)), numel * param_bytes_, TensorCategory::Parameter);
      } else if (!trainable(parameter) && !offload_param_ && piece > 0) {
        // Outside the optimizer's groups: the ds_tensor zero.Init made stays on its own.
        writer_->alloc(intern("ds_tensor:" + param_name(parameter)), piece * param_bytes_, TensorCategory::Parameter);
      }
    }
    if (!offload_param_ && partitioned > 0) {
      writer_->alloc(intern("deepspeed.fp16_partitioned_groups_flat"), partitioned * param_bytes_,
                     TensorCategory::Parameter);
    }
  }

  void construct_optimizer() override {
    const uint64_t elements = optimizer_elements();
    const bool masters = stage_ >= 1 || param_bytes_ != 4;
    // With offload_optimizer, masters, moments and fp32 grads are host memory.
    if (masters && !offload_optimizer_) {
      writer_->alloc(intern("deepspeed.fp32_partition"), elements * 4, TensorCategory::OptimizerState);
    }
    if (stage_ >= 1 && !offload_optimizer_) {
      // initialize_optimizer_states(): a zero fp32 grad, one step to create the moments.
      uint32_t zero_grad = writer_->alloc(intern("deepspeed.fp32_partition.grad"), elements * 4, TensorCategory::Temporary);
      allocate_moments(elements);
      writer_->free(zero_grad);
    }
    if (stage_ == 3) {
      if (zero_.contiguous_gradients) {
        writer_->alloc(intern("deepspeed.ipg_bucket_flat_buffer"),
                       static_cast<uint64_t>(zero_.reduce_bucket_size) * param_bytes_, TensorCategory::Communication);
      }
      if (!offload_optimizer_) {
        grad_partition_ = writer_->alloc(intern("deepspeed.grad_partitions_flat_buffer"), partition_ * param_bytes_,
                                         TensorCategory::Gradient);
      }
    }
  }

  void begin_forward(bool training) override {
    training_ = training;
    if (stage_ != 3 || training || uses_.ops_with_params.empty()) return;
    // Evaluation runs without per-op hooks: hold the largest module as the working set.
    uint32_t largest = uses_.ops_with_params.front();
    uint64_t largest_numel = 0;
    for (uint32_t op : uses_.ops_with_params) {
      uint64_t numel = 0;
      for (int32_t parameter : uses_.params_of_op[op]) numel += param_numel(parameter);
      if (numel > largest_numel) {
        largest_numel = numel;
        largest = op;
      }
    }
    fetch(uses_.params_of_op[largest]);
  }

  void before_forward_op(uint32_t op) override {
    if (stage_ != 3 || uses_.params_of_op[op].empty()) return;
    fetch(uses_.params_of_op[op]);
    wait_for_fetch(uses_.params_of_op[op]);
    if (training_) prefetch(forward_position_[op] + 1);
  }

  void after_forward_op(uint32_t op) override {
    if (stage_ != 3 || uses_.params_of_op[op].empty()) return;
    release(op, training_ ? forward_position_[op] : -1);
  }

  void end_forward() override {
    if (stage_ == 3 && !training_) release_all();
  }

  void begin_backward(bool last_micro_batch) override {
    reduces_in_hooks_ = stage_ == 2 || (stage_ == 1 && zero_.overlap_comm && last_micro_batch);
    ipg_index_ = 0;
    if (stage_ >= 1 && stage_ <= 2 && zero_.contiguous_gradients) {
      const uint64_t bytes = static_cast<uint64_t>(zero_.reduce_bucket_size) * param_bytes_;
      ipg_buffers_.push_back(writer_->alloc(intern("deepspeed.ipg_buffer0"), bytes, TensorCategory::Communication));
      if (zero_.overlap_comm) {
        ipg_buffers_.push_back(writer_->alloc(intern("deepspeed.ipg_buffer1"), bytes, TensorCategory::Communication));
      }
    }
    bucket_fill_ = 0;
  }

  void before_backward_op(uint32_t op, bool recomputes_unit) override {
    if (stage_ != 3) return;
    if (recomputes_unit && graph_.ops[op].unit >= 0) {
      // The checkpointed block re-runs its forward: its modules' parameters are fetched again.
      for (uint32_t other : uses_.ops_with_params) {
        if (graph_.ops[other].unit == graph_.ops[op].unit) fetch(uses_.params_of_op[other]);
      }
    }
    if (uses_.params_of_op[op].empty()) return;
    fetch(uses_.params_of_op[op]);
    wait_for_fetch(uses_.params_of_op[op]);
    prefetch(backward_position_[op] + 1);
  }

  void after_backward_op(uint32_t op) override {
    if (stage_ != 3 || uses_.params_of_op[op].empty()) return;
    release(op, backward_position_[op]);
  }

  void parameter_grad_ready(int32_t parameter) override {
    if (stage_ == 3) {
      stage3_grad_ready(parameter);
      return;
    }
    if (!reduces_in_hooks_) return;  // stages 0 and 1 keep the whole .grad until the boundary
    const uint64_t numel = param_numel(parameter);
    if (bucket_fill_ + numel > static_cast<uint64_t>(zero_.reduce_bucket_size)) flush_bucket();
    bucket_fill_ += numel;
    if (zero_.contiguous_gradients) {
      drop_grad(parameter);  // copied into the ipg buffer; .grad is now a view of it
    } else {
      pending_.push_back(parameter);
    }
  }

  void end_backward(bool last_micro_batch) override {
    if (reduces_in_hooks_) flush_bucket();
    const bool overlapped = zero_.overlap_comm && stage_ >= 1 && stage_ <= 2;
    if (overlapped) writer_->sync_device();  // the epilogue's get_accelerator().synchronize()
    for (uint32_t slot : ipg_buffers_) writer_->free(slot);
    ipg_buffers_.clear();
    reduces_in_hooks_ = false;
    if (stage_ == 3) {
      reduce_stage3_bucket();  // the epilogue reduces what is left in the bucket
      if (zero_.overlap_comm) {
        // reduce_and_partition_stream.synchronize(); that stream waited on the compute stream
        // for the last grad, so the compute stream has caught up too.
        writer_->sync(kDeepSpeedReduceAndPartitionStream);
        writer_->sync(kComputeStream);
      }
      reductions_in_flight_ = 0;
      release_all();
    }
    if (last_micro_batch && stage_ == 1) {
      // reduce_gradients() at the accumulation boundary: this rank keeps its partition.
      if (!offload_optimizer_ && grad_partition_ < 0) {
        grad_partition_ = writer_->alloc(intern("deepspeed.averaged_gradients"), partition_ * param_bytes_,
                                         TensorCategory::Gradient);
      }
      for (size_t p = 0; p < graph_.parameters.size(); ++p) drop_grad(static_cast<int32_t>(p));
    }
    // The reduction stream is idle after the synchronize, so the events that the frees of its
    // recorded blocks (ipg buffers, stage 1's whole grads) record complete at once.
    if (overlapped) writer_->sync(kDeepSpeedReductionStream);
    if (!last_micro_batch) return;
    if (stage_ == 0) {
      // allreduce_gradients(): flattened copies of reduce_bucket_size elements at a time.
      uint64_t chunk =
          std::min<uint64_t>(trainable_total_, static_cast<uint64_t>(std::max<int64_t>(1, zero_.reduce_bucket_size)));
      if (world() > 1 && chunk > 0) {
        uint32_t flat = writer_->alloc(intern("deepspeed.allreduce_bucket"), chunk * param_bytes_, TensorCategory::Communication);
        writer_->free(flat);
      }
    }
  }

  void optimizer_step() override {
    if (offload_optimizer_) {
      // The norm of the offloaded grads is read on the host (stage3.py
      // complete_grad_norm_calculation_for_cpu_offload: float() and .cpu() of device tensors;
      // stage_1_and_2.py: .item()), a wait on the compute stream. Then DeepSpeedCPUAdam steps
      // on the host. (Only frees recorded with overlap_comm wait for it.)
      if (zero_.overlap_comm) writer_->sync(kComputeStream);
      return;
    }
    const uint64_t elements = optimizer_elements();
    if (stage_ == 0 && !moments_created_) allocate_moments(elements);
    uint64_t tile = stage_ == 3 ? std::min<uint64_t>(elements, static_cast<uint64_t>(std::max<int64_t>(1, zero_.sub_group_size)))
                                : elements;
    if (stage_ >= 1 || param_bytes_ != 4) {
      uint32_t fp32_grad = writer_->alloc(intern("deepspeed.single_grad_partition_fp32"), tile * 4, TensorCategory::Temporary);
      writer_->free(fp32_grad);
    }
    if (stage_ == 1 && grad_partition_ >= 0) {
      writer_->free(static_cast<uint32_t>(grad_partition_));
      grad_partition_ = -1;
    }
    for (uint32_t slot : partition_pieces_) writer_->free(slot);
    partition_pieces_.clear();
  }

 private:
  uint64_t optimizer_elements() const { return stage_ == 0 ? trainable_total_ : partition_; }
  bool trainable(int32_t parameter) const {
    return graph_.parameter_requires_grad(parameter);
  }

  void allocate_moments(uint64_t elements) {
    moments_created_ = true;
    uint64_t moments = optimizer_moment_bytes(scenario_.optimizer);
    if (moments == 0) return;
    if (moments % 4 != 0) {
      writer_->alloc(intern("deepspeed.optimizer_state"), elements * moments, TensorCategory::OptimizerState);
      return;
    }
    const char* names[] = {"deepspeed.exp_avg", "deepspeed.exp_avg_sq", "deepspeed.max_exp_avg_sq"};
    for (uint64_t i = 0; i < moments / 4; ++i) {
      writer_->alloc(intern(names[std::min<uint64_t>(i, 2)]), elements * 4, TensorCategory::OptimizerState);
    }
  }

  // Stages 1-2: the bucket is reduced (on the reduction stream with overlap_comm) and this
  // rank's slice lands in its grad partition.
  void flush_bucket() {
    if (bucket_fill_ == 0 && pending_.empty()) return;
    const sim::StreamId caller = writer_->stream();
    const sim::StreamId stream = zero_.overlap_comm ? kDeepSpeedReductionStream : caller;
    writer_->set_stream(stream);
    // allreduce_bucket's flat copy, freed before the next. Slices are gathered until they pass
    // reduce_bucket_size, so only a parameter larger than the bucket (reduced alone) is
    // flattened in pieces, each at most a bucket plus one partition-sized slice.
    const uint64_t piece = static_cast<uint64_t>(std::max<int64_t>(1, zero_.reduce_bucket_size)) + std::max<uint64_t>(partition_, 1);
    for (uint64_t left = bucket_fill_; left > 0;) {
      const uint64_t numel = std::min(left, bucket_fill_ <= piece ? left : piece);
      writer_->free(writer_->alloc(intern("deepspeed.allreduce_bucket_flat"), numel * param_bytes_,
                                   TensorCategory::Communication));
      left -= numel;
    }
    // buf.record_stream(reduction_stream) on the slices copied back.
    if (zero_.overlap_comm) {
      if (zero_.contiguous_gradients && ipg_index_ < ipg_buffers_.size()) {
        writer_->record_stream(ipg_buffers_[ipg_index_], stream);
      }
      for (int32_t parameter : pending_) {
        const int64_t grad = model_->grad_slot[static_cast<size_t>(parameter)];
        if (grad >= 0) writer_->record_stream(static_cast<uint32_t>(grad), stream);
      }
    }
    if (!offload_optimizer_) {
      if (zero_.contiguous_gradients) {
        if (grad_partition_ < 0) {
          grad_partition_ = writer_->alloc(intern("deepspeed.grads_in_partition"), partition_ * param_bytes_,
                                           TensorCategory::Gradient);
        }
      } else if (stage_ == 2) {
        uint64_t piece = (bucket_fill_ + world() - 1) / world();
        partition_pieces_.push_back(
            writer_->alloc(intern("deepspeed.averaged_gradients"), piece * param_bytes_, TensorCategory::Gradient));
      }
    }
    writer_->set_stream(caller);
    // Stage 1 keeps whole grads until the boundary's end; stage 2 drops the reduced ones.
    if (stage_ == 2) {
      for (int32_t parameter : pending_) drop_grad(parameter);
    }
    pending_.clear();
    bucket_fill_ = 0;
    if (zero_.overlap_comm && ipg_buffers_.size() > 1) ipg_index_ = 1 - ipg_index_;  // double buffering
  }

  // Stage 3 trace: modules with parameters in forward order, then in backward order.
  void build_trace() {
    const auto& forward = uses_.ops_with_params;
    forward_position_.assign(graph_.ops.size(), -1);
    backward_position_.assign(graph_.ops.size(), -1);
    trace_ = forward;
    for (size_t i = 0; i < forward.size(); ++i) forward_position_[forward[i]] = static_cast<int32_t>(i);
    for (size_t i = forward.size(); i-- > 0;) {
      backward_position_[forward[i]] = static_cast<int32_t>(trace_.size());
      trace_.push_back(forward[i]);
    }
  }

  void gather(int32_t parameter) {
    auto p = static_cast<size_t>(parameter);
    if (persistent_[p] || gathered_[p] >= 0) return;
    const sim::StreamId caller = writer_->stream();
    if (zero_.overlap_comm) writer_->set_stream(kDeepSpeedAllgatherStream);
    gathered_[p] = writer_->alloc(intern("allgather:" + param_name(parameter)), param_numel(parameter) * param_bytes_,
                                  TensorCategory::Communication);
    writer_->set_stream(caller);
    live_numel_ += param_numel(parameter);
  }

  void fetch(const std::vector<int32_t>& params) {
    for (int32_t parameter : params) gather(parameter);
  }

  // fetch_sub_module's wait: one event on the all-gather stream per gathered parameter waited
  // on; with more than __max_ongoing_fetch_events outstanding the CPU synchronises the oldest.
  // The compute stream waits on the all-gather stream before every module, and is taken to
  // keep pace with it (the trace has no GPU timing), so that is a sync of both streams: every
  // free recorded so far completes, up to two events earlier than the real one would.
  void wait_for_fetch(const std::vector<int32_t>& params) {
    if (!zero_.overlap_comm) return;
    for (int32_t parameter : params) {
      if (!persistent_[static_cast<size_t>(parameter)] && gathered_[static_cast<size_t>(parameter)] >= 0) ++fetches_in_flight_;
    }
    if (fetches_in_flight_ <= kMaxOngoingFetchEvents) return;
    fetches_in_flight_ = kMaxOngoingFetchEvents;
    writer_->sync(kDeepSpeedAllgatherStream);
    writer_->sync(kComputeStream);
  }

  // The coordinator fetches ahead along the trace up to stage3_prefetch_bucket_size
  // elements, never past stage3_max_live_parameters available.
  void prefetch(int32_t from) {
    if (from < 0) return;
    uint64_t fetching = 0;
    const auto bucket = static_cast<uint64_t>(zero_.stage3_prefetch_bucket_size);
    const auto max_live = static_cast<uint64_t>(zero_.stage3_max_live_parameters);
    for (size_t t = static_cast<size_t>(from); t < trace_.size() && fetching < bucket; ++t) {
      for (int32_t parameter : uses_.params_of_op[trace_[t]]) {
        auto p = static_cast<size_t>(parameter);
        if (persistent_[p] || gathered_[p] >= 0) continue;
        if (live_numel_ + param_numel(parameter) > max_live) return;
        fetching += param_numel(parameter);
        gather(parameter);
      }
    }
  }

  // release_sub_module(): a parameter stays gathered if the modules after `position` in the
  // trace use it again before stage3_max_reuse_distance elements have been traversed.
  // position -1 (evaluation) releases unconditionally.
  void release(uint32_t op, int32_t position) {
    for (int32_t parameter : uses_.params_of_op[op]) {
      auto p = static_cast<size_t>(parameter);
      if (persistent_[p] || gathered_[p] < 0) continue;
      if (position >= 0 && reused_soon(parameter, static_cast<size_t>(position) + 1)) continue;
      free_gathered(static_cast<uint32_t>(gathered_[p]));
      gathered_[p] = -1;
      live_numel_ -= param_numel(parameter);
    }
  }

  // free_param(): "don't free the parameter while it is still being used for computation".
  void free_gathered(uint32_t slot) {
    if (zero_.overlap_comm) writer_->record_stream(slot, kComputeStream);
    writer_->free(slot);
  }

  // Stage 3's ipg bucket: reduced when the next grad would not fit (and it holds something);
  // the grad is copied into the bucket (and freed) if it fits, else reduced from .grad.
  void stage3_grad_ready(int32_t parameter) {
    const uint64_t numel = param_numel(parameter);
    const auto bucket = static_cast<uint64_t>(std::max<int64_t>(1, zero_.reduce_bucket_size));
    if (bucket_fill_ > 0 && bucket_fill_ + numel > bucket) reduce_stage3_bucket();
    const int64_t grad = model_->grad_slot[static_cast<size_t>(parameter)];
    if (zero_.overlap_comm && grad >= 0) writer_->record_stream(static_cast<uint32_t>(grad), kDeepSpeedReduceAndPartitionStream);
    drop_grad(parameter);  // copied into the ipg bucket, reduce-scattered into the partition
    bucket_fill_ += numel;
  }

  void reduce_stage3_bucket() {
    bucket_fill_ = 0;
    if (!zero_.overlap_comm) return;
    // More than max_param_reduce_events in flight: the CPU waits on the oldest reduction.
    if (++reductions_in_flight_ > kMaxParamReduceEvents) {
      reductions_in_flight_ = kMaxParamReduceEvents;
      writer_->sync(kDeepSpeedReduceAndPartitionStream);
      writer_->sync(kComputeStream);
    }
  }

  bool reused_soon(int32_t parameter, size_t from) const {
    uint64_t traversed = 0;
    const auto limit = static_cast<uint64_t>(zero_.stage3_max_reuse_distance);
    for (size_t t = from; t < trace_.size(); ++t) {
      if (traversed >= limit) return false;
      for (int32_t other : uses_.params_of_op[trace_[t]]) {
        if (other == parameter) return true;
        traversed += param_numel(other);
      }
    }
    return false;
  }

  void release_all() {
    for (size_t p = 0; p < gathered_.size(); ++p) {
      if (gathered_[p] < 0) continue;
      free_gathered(static_cast<uint32_t>(gathered_[p]));
      gathered_[p] = -1;
    }
    live_numel_ = 0;
  }

  const ZeroConfig& zero_;
  int stage_ = 0;
  uint64_t param_bytes_ = 2;
  uint64_t trainable_total_ = 0;  // elements with requires_grad: what the optimizer's groups hold
  uint64_t partition_ = 0;        // this rank's partition of them
  bool offload_optimizer_ = false;
  bool offload_param_ = false;
  bool training_ = true;
  bool moments_created_ = false;
  std::vector<uint8_t> persistent_;
  std::vector<int64_t> gathered_;
  uint64_t live_numel_ = 0;
  std::vector<uint32_t> trace_;
  std::vector<int32_t> forward_position_;
  std::vector<int32_t> backward_position_;
  std::vector<uint32_t> ipg_buffers_;
  size_t ipg_index_ = 0;          // the ipg buffer the bucket fills (two alternate with overlap_comm)
  bool reduces_in_hooks_ = false;  // this backward reduces grads through the ipg bucket
  uint32_t reductions_in_flight_ = 0;
  uint32_t fetches_in_flight_ = 0;  // stage 3 fetch events the CPU has not waited on  // stage 3 bucket reductions whose events the CPU has not waited on
  uint64_t bucket_fill_ = 0;
  std::vector<int32_t> pending_;
  std::vector<uint32_t> partition_pieces_;
  int64_t grad_partition_ = -1;
};

}  // namespace

std::unique_ptr<ParallelRank> make_deepspeed_rank(const Scenario& scenario, const LayerGraph& graph,
                                                  ScheduleWriter* writer, ModelState* model) {
  return std::make_unique<DeepSpeedRank>(scenario, graph, writer, model);
}

}  // namespace oomcast::planner
