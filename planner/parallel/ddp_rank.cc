// DistributedDataParallel: every rank holds the whole model, its .grad and the optimizer;
// the Reducer adds flat gradient buckets (bucket_cap_mb, a 1 MiB first bucket, parameters in
// reverse order), allocated when DDP is constructed. With gradient_as_bucket_view the .grad
// tensors become views into the buckets, so autograd's gradient is copied in and freed.
#include <algorithm>

#include "planner/optimizers.h"
#include "planner/parallel/parallel_rank.h"
#include "planner/precision.h"

namespace oomcast::planner {

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
    const PrecisionRules rules = precision_rules(scenario_.precision);
    for (size_t p = 0; p < graph_.parameters.size(); ++p) {
      auto parameter = static_cast<int32_t>(p);
      uint32_t name = intern(param_name(parameter));
      writer_->alloc(name, param_numel(parameter) * dtype_bytes(param_dtype(parameter)), TensorCategory::Parameter);
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
    optimizer_ = std::make_unique<OptimizerModel>(scenario_.optimizer, precision_rules(scenario_.precision),
                                                  std::move(optimizer_params_), writer_);
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
    std::vector<uint8_t> has_grad(graph_.parameters.size());
    for (size_t p = 0; p < has_grad.size(); ++p) has_grad[p] = model_->grad_slot[p] >= 0 || stepped_[p] ? 1 : 0;
    optimizer_->step(has_grad);
  }

  void zero_grad(bool set_to_none) override {
    if (set_to_none) std::fill(stepped_.begin(), stepped_.end(), 0);
  }

 private:
  void allocate_buckets() {
    const auto cap = static_cast<uint64_t>(scenario_.parallel.ddp.bucket_cap_mb * 1024.0 * 1024.0);
    uint64_t limit = std::min(cap, kFirstBucketBytes);
    uint64_t filled = 0;
    int bucket = 0;
    auto flush = [&] {
      if (filled == 0) return;
      writer_->alloc(intern("ddp.bucket" + std::to_string(bucket++)), filled, TensorCategory::Communication);
      filled = 0;
      limit = std::max<uint64_t>(cap, 1);
    };
    for (size_t i = graph_.parameters.size(); i-- > 0;) {
      auto parameter = static_cast<int32_t>(i);
      filled += param_numel(parameter) * dtype_bytes(param_dtype(parameter));
      if (filled >= limit) flush();
    }
    flush();
  }

  std::vector<OptimizerParameter> optimizer_params_;
  std::unique_ptr<OptimizerModel> optimizer_;
  std::vector<uint8_t> stepped_;
};

}  // namespace

std::unique_ptr<ParallelRank> make_ddp_rank(const Scenario& scenario, const LayerGraph& graph, ScheduleWriter* writer,
                                            ModelState* model) {
  return std::make_unique<DdpRank>(scenario, graph, writer, model);
}

}  // namespace oomcast::planner
