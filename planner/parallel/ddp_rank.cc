// DistributedDataParallel: every rank holds the whole model, its .grad and the optimizer;
// the Reducer adds flat gradient buckets (bucket_cap_mb, a 1 MiB first bucket, parameters in
// reverse order, one run of buckets per dtype), allocated when DDP is constructed. With
// gradient_as_bucket_view the .grad tensors become views into the buckets, so autograd's
// gradient is copied in and freed. Only parameters with requires_grad are in the Reducer
// (DDP's _build_params_for_reducer filters them): a frozen parameter has no bucket space, no
// .grad and no optimizer state, but _sync_module_states still broadcasts it.
// Streams: everything is on the compute stream. ProcessGroupNCCL all-reduces each bucket in
// place on its own stream and record_streams it there (unless TORCH_NCCL_AVOID_RECORD_STREAMS),
// but a recorded block waits only when freed and the buckets live for the whole run
// (docs/distributed.md, Streams).
#include <algorithm>
#include <map>

#include "planner/optimizers.h"
#include "planner/parallel/parallel_rank.h"
#include "planner/precision.h"
#include "planner/trainable_policy.h"

namespace oomcast::planner {

using scenario::Scenario;

namespace {

// torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES: the first bucket is capped at 1 MiB so the
// first all-reduce starts early.
constexpr uint64_t kFirstBucketBytes = 1ull << 20;
// DDP's _sync_module_states broadcasts parameters in coalesced buckets of 250 MiB.
constexpr uint64_t kBroadcastBucketBytes = 250ull << 20;

class DdpRank : public ParallelRank {
 public:
  using ParallelRank::ParallelRank;

  void allocate_parameters() override {
    const PrecisionRules rules = job_precision_rules(scenario_);
    for (size_t p = 0; p < graph_.parameters.size(); ++p) {
      auto parameter = static_cast<int32_t>(p);
      uint32_t name = intern(param_name(parameter));
      writer_->alloc(name, param_numel(parameter) * dtype_bytes(param_dtype(parameter)), TensorCategory::Parameter);
      if (!trainable(parameter)) continue;
      optimized_.push_back(p);
      DType step_dtype = rules.fp32_master_weights ? DType::Float32 : param_dtype(parameter);
      optimizer_params_.push_back(
          OptimizerParameter{name, param_numel(parameter), step_dtype, graph_.parameter_shapes[p]});
    }
  }

  void construct_optimizer() override {
    uint64_t total = 0;
    for (size_t p = 0; p < graph_.parameters.size(); ++p) {
      total += param_numel(static_cast<int32_t>(p)) * dtype_bytes(param_dtype(static_cast<int32_t>(p)));
    }
    if (world() > 1) {
      uint32_t broadcast = writer_->alloc(intern("ddp.sync_module_states.broadcast_bucket"),
                                          std::min(total, kBroadcastBucketBytes), TensorCategory::Communication);
      writer_->free(broadcast);
    }
    allocate_buckets();
    optimizer_ = std::make_unique<OptimizerModel>(scenario_.optimizer, job_precision_rules(scenario_),
                                                  std::move(optimizer_params_), writer_);
    optimizer_->set_torch_version(scenario_.allocator.torch_version);
    optimizer_->construct();
    stepped_.assign(graph_.parameters.size(), 0);
  }

  void parameter_grad_ready(int32_t parameter) override {
    stepped_[static_cast<size_t>(parameter)] = 1;
    // The Reducer copies the gradient into its bucket; with bucket views .grad then points
    // into the bucket and autograd's tensor dies.
    if (scenario_.parallel.ddp.gradient_as_bucket_view) drop_grad(parameter);
  }

  void optimizer_step() override {
    std::vector<uint8_t> has_grad(optimized_.size());
    for (size_t i = 0; i < has_grad.size(); ++i) {
      const size_t p = optimized_[i];
      has_grad[i] = model_->grad_slot[p] >= 0 || stepped_[p] ? 1 : 0;
    }
    optimizer_->step(has_grad);
  }

  void zero_grad(bool set_to_none) override {
    if (set_to_none) std::fill(stepped_.begin(), stepped_.end(), 0);
  }

 private:
  bool trainable(int32_t parameter) const {
    return graph_.parameter_requires_grad(parameter);
  }

  // compute_bucket_assignment_by_size: the Reducer's parameters (those with requires_grad)
  // in gradient-ready (reverse) order fill one open bucket per dtype; a bucket closes once it
  // reaches its limit (1 MiB for a dtype's first, bucket_cap_mb after). Buckets are allocated
  // in the order of their first parameter.
  void allocate_buckets() {
    const auto cap = static_cast<uint64_t>(scenario_.parallel.ddp.bucket_cap_mb * 1024.0 * 1024.0);
    struct Open {
      uint64_t filled = 0;
      uint64_t limit = 0;
      size_t first = 0;
    };
    struct Closed {
      size_t first = 0;
      uint64_t bytes = 0;
    };
    std::map<DType, Open> open;
    std::vector<Closed> closed;
    size_t position = 0;
    for (size_t i = graph_.parameters.size(); i-- > 0; ++position) {
      auto parameter = static_cast<int32_t>(i);
      if (!trainable(parameter)) continue;
      auto [entry, created] = open.try_emplace(param_dtype(parameter));
      Open& bucket = entry->second;
      if (created) bucket.limit = std::min(cap, kFirstBucketBytes);
      if (bucket.filled == 0) bucket.first = position;
      bucket.filled += param_numel(parameter) * dtype_bytes(param_dtype(parameter));
      if (bucket.filled >= bucket.limit) {
        closed.push_back(Closed{bucket.first, bucket.filled});
        bucket.filled = 0;
        bucket.limit = std::max<uint64_t>(cap, 1);
      }
    }
    for (const auto& [dtype, bucket] : open) {
      if (bucket.filled > 0) closed.push_back(Closed{bucket.first, bucket.filled});
    }
    std::sort(closed.begin(), closed.end(), [](const Closed& a, const Closed& b) { return a.first < b.first; });
    for (size_t b = 0; b < closed.size(); ++b) {
      writer_->alloc(intern("ddp.bucket" + std::to_string(b)), closed[b].bytes, TensorCategory::Communication);
    }
  }

  std::vector<OptimizerParameter> optimizer_params_;
  std::vector<size_t> optimized_;  // the parameters the optimizer steps (requires_grad), in order
  std::unique_ptr<OptimizerModel> optimizer_;
  std::vector<uint8_t> stepped_;
};

}  // namespace

std::unique_ptr<ParallelRank> make_ddp_rank(const Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer,
                                            ModelState* model) {
  return std::make_unique<DdpRank>(scenario, graph, writer, model);
}

}  // namespace oomcast::planner
