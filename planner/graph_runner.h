// GraphRunner: plays one LayerGraph's forward and backward into the schedule. It keeps the
// reference counts that decide when storage dies (Python references until last use, saved
// tensors until their node's backward, views on their base), the gradient buffers
// (fan-in added in place), .grad stealing/accumulation, checkpoint recomputation and the
// cuBLAS workspaces.
#pragma once

#include <functional>

#include <cstdint>
#include <string>
#include <vector>

#include "planner/checkpointing.h"
#include "planner/layer_graph.h"
// The runner calls out through RunnerHooks (an interface it owns the shape of) so that the
// data-parallel engines in parallel/ join the forward and backward without the runner knowing them.
#include "planner/parallel/runner_hooks.h"
#include "planner/schedule_writer.h"

namespace oomcast::planner {

// What outlives one forward/backward: the parameters' .grad and the cuBLAS workspaces.
struct ModelState {
  std::vector<int64_t> grad_slot;          // per parameter: the .grad allocation, -1 if None
  bool gpu_workspaces = false;             // allocate cuBLAS workspaces at first GEMMs
  uint64_t workspace_bytes = 0;
  int64_t workspace_count = 0;
  int64_t workspaces_created = 0;
  bool forward_workspace = false;          // the forward thread's handle has one
  bool backward_workspace = false;         // the autograd thread's handle has one
  RunnerHooks* hooks = nullptr;            // a data-parallel engine's module and grad hooks
};

class GraphRunner {
 public:
  // `caller_held`: named outputs ("loss", "logits") the training loop keeps after the step.
  // `order` is compute_execution_order(graph); `checkpoints` was planned on the same order.
  GraphRunner(const LayerGraph& graph, ExecutionOrder order, const CheckpointPlan& checkpoints, ModelState* model,
              ScheduleWriter* writer, const std::vector<std::string>& caller_held);

  const LayerGraph& graph() const { return graph_; }
  const ExecutionOrder& order() const { return order_; }

  void forward();
  // The same, calling `model_returned` right after the op that makes the "logits" output (the
  // model's return when the caller computes the loss itself), or at the end without one.
  void forward(const std::function<void()>& model_returned);
  // Requires: forward() ran with grad mode on.
  void backward();
  // A pipeline stage before the last: the gradient of its output arrives in a receive buffer
  // the stage keeps (torch.distributed.pipelining), so backward allocates no ones_like(loss).
  void set_output_grad_received(bool received) { output_grad_received_ = received; }
  // A pipeline stage after the first: the gradient of its received input is sent back, and the
  // send keeps it past backward. finish_step hands it over as "input_grad".
  void set_input_grad_sent(bool sent) { input_grad_sent_ = sent; }
  // After backward (or forward alone): hands the storages of the caller-held outputs to the
  // caller (their slots) and frees whatever else the runner still references.
  std::vector<std::pair<std::string, uint32_t>> finish_step();
  // Hands every live activation (a graph nobody runs backward on) to the caller.
  std::vector<uint32_t> take_all_live();
  // After a forward-only step: finish_step's held outputs, then take_all_live's activations,
  // as one list of slots the caller now owns.
  std::vector<uint32_t> take_step_outputs();
  // The caller (a KV cache) keeps `tensor` beyond this forward: the runner stops owning its
  // storage, which the caller frees. A view keeps its whole base (the same slot for every view
  // of one storage). Returns the storage's slot, or UINT32_MAX when it is not a live activation.
  uint32_t keep_storage(TensorId tensor);

 private:
  struct GradBuffer {
    uint32_t slot;
    uint32_t refs;
    bool sent = false;  // a received input's gradient, sent back (set_input_grad_sent)
  };

  void acquire(TensorId tensor);
  void release(TensorId tensor);
  void alloc_output(TensorId tensor, bool reuse_live);
  void run_transients(const std::vector<Transient>& transients, bool after_outputs, std::vector<uint32_t>* slots);
  // Frees the transients among `slots` (run_transients' before-output ones, in order) that die
  // before the outputs are made.
  void free_early_transients(const std::vector<Transient>& transients, std::vector<uint32_t>* slots);
  void maybe_workspace(bool backward_thread);
  void run_forward_op(uint32_t op_index, int32_t position);
  void recompute_unit(size_t unit);
  void free_unit_rng_state(size_t unit);
  void end_unit_backward(size_t unit);
  void run_backward_node(uint32_t op_index);
  void run_backward_program(uint32_t op_index);
  void deliver_input_grads(const std::vector<std::pair<TensorId, int32_t>>& produced);
  void release_saved(uint32_t op_index);
  int32_t new_grad(TensorId tensor, TensorCategory category);
  void release_grad(int32_t grad);
  void deliver_parameter_grad(int32_t parameter, int32_t grad);
  void finalize_parameter(int32_t parameter);
  uint32_t grad_name(TensorId tensor);
  uint32_t name(uint32_t graph_name) { return writer_->graph_name(graph_.names, &name_cache_, graph_name); }
  bool is_tracked(TensorId tensor) const;
  // Saved tensor `index` of op `op_index` is copied to host memory (activation offloading).
  bool offloaded(uint32_t op_index, size_t index) const {
    return !checkpoints_.saved_offloaded.empty() && checkpoints_.saved_offloaded[op_index][index];
  }

  const LayerGraph& graph_;
  ExecutionOrder order_;
  const CheckpointPlan& checkpoints_;
  ModelState* model_;
  ScheduleWriter* writer_;
  std::vector<uint32_t> name_cache_;
  std::vector<uint32_t> grad_name_cache_;

  std::vector<std::vector<TensorId>> release_at_;   // per position: program references that end there
  std::vector<uint8_t> held_;                       // per tensor: kept by the caller past its last use
  std::vector<uint32_t> rng_state_slots_;           // checkpoint ctx.fwd_cpu_state of this forward
  std::vector<int64_t> unit_rng_state_slot_;        // per unit: a non-reentrant frame's state, -1 if none
  std::vector<std::vector<TensorId>> unit_held_outputs_;  // per unit: reentrant recomputed outputs
  std::vector<uint8_t> dropped_;                    // per tensor: an output the caller dropped as forward returned
  std::vector<uint8_t> caller_keeps_;               // per tensor: still kept after the step
  std::vector<int32_t> parameter_uses_;             // per parameter: backward nodes delivering to it
  // Per tensor: a leaf activation that requires grad (enable_input_require_grads' embedding
  // output). Its AccumulateGrad node keeps it, and then its .grad, as long as the graph.
  std::vector<uint8_t> graph_leaf_;
  std::vector<TensorId> leaves_held_;               // this forward's graph-held leaves
  std::vector<uint32_t> leaf_grad_slots_;           // their .grad after backward
  std::vector<std::vector<TensorId>> unit_external_kept_;
  std::vector<int32_t> internal_kept_unit_;         // per tensor: unit whose SAC cache keeps it, -1
  std::vector<std::vector<TensorId>> unit_internal_kept_;

  // Per-run state.
  std::vector<uint32_t> slot_;                      // per storage tensor
  std::vector<uint8_t> kept_by_caller_;             // per storage: keep_storage() took it
  std::vector<uint32_t> refs_;
  std::vector<std::vector<uint8_t>> saved_acquired_; // per op, parallel to OpNode::saved
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> dropped_savers_;  // per storage: (op, saved index)
  std::vector<uint8_t> unit_recomputed_;
  std::vector<GradBuffer> grads_;
  std::vector<int32_t> grad_of_;                    // per tensor: index into grads_, -1
  std::vector<int32_t> parameter_buffer_;           // per parameter: pending fan-in buffer, -1
  std::vector<int32_t> parameter_pending_;
  bool grad_mode_run_ = false;
  // Scratch reused across ops (no allocation per op on the hot path).
  std::vector<uint32_t> transient_slots_;
  std::vector<uint32_t> unpacked_slots_;            // a backward node's offloaded tensors brought back
  std::vector<uint8_t> recompute_ref_;              // per tensor: holds a recompute program reference
  std::vector<std::pair<TensorId, int32_t>> produced_;
  bool output_grad_received_ = false;  // set_output_grad_received
  bool input_grad_sent_ = false;       // set_input_grad_sent
  std::vector<uint32_t> sent_grad_slots_;  // the received inputs' gradients, sent back
};

}  // namespace oomcast::planner
