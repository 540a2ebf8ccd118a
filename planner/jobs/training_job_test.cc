// Tests for plan_steps(): schedule invariants across families and settings, a whole MLP step
// worked out by hand, optimizer state, .grad lifetimes, caller-held outputs, checkpointing
// and evaluation leaks.
#include <catch2/catch.hpp>

#include "base/input_error.h"
#include "planner/planner_test_support.h"

using namespace oomcast::planner;
using oomcast::scenario::AttentionImpl;
using oomcast::scenario::CheckpointMode;
using oomcast::scenario::OptimizerImpl;
using oomcast::scenario::OptimizerType;
using oomcast::scenario::Precision;
using oomcast::scenario::Scenario;
using oomcast::planner::testing::check_schedule;
using oomcast::scenario::testing::cpu_scenario;
using oomcast::scenario::testing::inline_model;

namespace {

// Linear(4 -> 8) + ReLU + Linear(8 -> 3), fp32, batch 2, plain SGD, one iteration.
Scenario tiny_mlp_scenario() {
  Scenario scenario;
  scenario.model = inline_model("mlp", {{"input", 4}, {"hidden", 8}, {"layers", 1}, {"output", 3}});
  scenario.batch_size = 2;
  scenario.iterations = 1;
  scenario.optimizer.type = OptimizerType::Sgd;
  scenario.device.is_cpu = true;
  return scenario;
}

uint64_t live_at(const testing::ScheduleCheck& check, const std::string& mark) {
  auto found = check.live_at_mark.find(mark);
  REQUIRE(found != check.live_at_mark.end());
  return found->second;
}

void require_valid(const PlannedTrace& planned) {
  testing::ScheduleCheck check = check_schedule(planned);
  INFO(check.error);
  REQUIRE(check.ok);
}

}  // namespace

TEST_CASE("a two-layer MLP step allocates exactly the bytes worked out by hand", "[planner][schedule]") {
  // Parameters: w0 [8,4] 128 B, b0 [8] 32 B, w1 [3,8] 96 B, b1 [3] 12 B = 268 B.
  // Forward: inputs [2,4] fp32 32 B + targets [2] int64 16 B; h0 [2,8] 64 B; relu out 64 B
  // (h0 dies: relu saves its result, not its input); logits [2,3] 24 B; log_softmax 24 B;
  // loss 4 B and total_weight 4 B. Forward high-water: 268 + 48 + 64 + 64 = 444 B. The
  // logits die as the forward returns (not caller-held; log_softmax saves its result).
  // Live when backward starts: 268 + 48 + 64 + 24 + 4 + 4 = 412 B.
  // Backward: grad(loss) 4 -> 416; nll grad 24 -> 440; drop grad(loss) -> 436 and
  // total_weight -> 432; log_softmax grad 24 -> 456; drop nll grad -> 432 and log-probs -> 408;
  // linear 1: grad b1 12 -> 420, grad relu-out 64 -> 484, grad w1 96 -> 580; drop logits grad
  // -> 556; relu backward: grad h0 64 -> 620; drop relu-out grad and relu out -> 492;
  // linear 0: grad b0 32 -> 524, grad w0 128 -> 652 (the peak; inputs need no grad); drop
  // grad h0 -> 588 = params 268 + grads 268 + inputs 48 + loss 4. zero_grad(set_to_none)
  // frees the grads -> 320.
  PlannedTrace planned = plan_steps(tiny_mlp_scenario());
  testing::ScheduleCheck check = check_schedule(planned);
  REQUIRE(check.ok);
  CHECK(live_at(check, "iter0/forward") == 268);
  CHECK(live_at(check, "iter0/backward") == 412);
  CHECK(live_at(check, "iter0/optimizer") == 588);
  CHECK(check.peak_bytes == 652);
  CHECK(check.final_bytes == 320);
  CHECK(planned.parameter_count == 67);
}

TEST_CASE("every free in a schedule matches a live allocation, for every family", "[planner][schedule]") {
  struct Case {
    const char* model;
    int64_t batch, seq;
  };
  for (const Case& c : {Case{"gpt2-tiny", 2, 32}, Case{"llama-tiny", 2, 32}, Case{"resnet-18", 2, 64},
                        Case{"mlp", 4, 1}}) {
    for (Precision precision : {Precision::Fp32, Precision::AmpBf16, Precision::AmpFp16, Precision::PureBf16}) {
      for (AttentionImpl attention : {AttentionImpl::Eager, AttentionImpl::SdpaMath, AttentionImpl::MemEfficient}) {
        Scenario scenario = cpu_scenario(c.model, c.batch, c.seq, precision, attention);
        scenario.dropout = 0.1;
        INFO(c.model << " precision " << static_cast<int>(precision) << " attention " << static_cast<int>(attention));
        require_valid(plan_steps(scenario));
      }
    }
  }
}

TEST_CASE("bert and vit schedules are valid with dropout and flash attention", "[planner][schedule]") {
  Scenario bert = cpu_scenario("bert-base", 2, 64, Precision::AmpBf16, AttentionImpl::Flash);
  bert.model.dims["layers"] = 2;
  bert.dropout = 0.1;
  require_valid(plan_steps(bert));
  Scenario vit = cpu_scenario("vit-b-16", 2, 224, Precision::AmpBf16, AttentionImpl::Flash);
  vit.model.dims["layers"] = 2;
  vit.dropout = 0.1;
  require_valid(plan_steps(vit));
}

TEST_CASE("the CPU flash kernel plans an fp32 step, which CUDA's flash kernel refuses", "[planner][schedule]") {
  Scenario scenario = cpu_scenario("gpt2-tiny", 2, 32, Precision::Fp32, AttentionImpl::Flash);
  require_valid(plan_steps(scenario));
  scenario.device.is_cpu = false;
  scenario.device.profile = "a100-80gb";
  scenario.device.compute_capability = 80;
  CHECK_THROWS_AS(plan_steps(scenario), oomcast::InputError);
}

TEST_CASE("at the end only parameters, buffers, grads, optimizer state and caller-held tensors live",
          "[planner][schedule]") {
  Scenario scenario = cpu_scenario("gpt2-tiny", 2, 32, Precision::AmpBf16, AttentionImpl::Eager);
  scenario.dropout = 0.1;
  scenario.loop.caller_held_outputs = {"loss", "logits"};
  testing::ScheduleCheck check = check_schedule(plan_steps(scenario));
  REQUIRE(check.ok);
  // gpt2-tiny: 124,672 params -> 498,688 B fp32; AdamW m + v = 997,376 B; two fp32 eager
  // causal-mask buffers 128*128*4 = 65,536 B each; idx + targets int64 2*32*8 = 512 B each;
  // caller-held logits bf16 [64, 256] = 32,768 B and the fp32 loss 4 B. Grads were set to None.
  CHECK(check.live_at_end_by_category.at("parameter") == 498688);
  CHECK(check.live_at_end_by_category.at("optimizer_state") == 997376);
  CHECK(check.live_at_end_by_category.at("buffer") == 131072);
  CHECK(check.live_at_end_by_category.at("input") == 1024);
  CHECK(check.live_at_end_by_category.at("activation") == 32768 + 4);
  CHECK(check.live_at_end_by_category.count("gradient") == 0);
  CHECK(check.live_at_end_by_category.count("temporary") == 0);
}

TEST_CASE("zero_grad without set_to_none keeps every .grad allocated", "[planner][schedule]") {
  Scenario scenario = cpu_scenario("gpt2-tiny", 2, 32);
  scenario.loop.zero_grad_set_to_none = false;
  testing::ScheduleCheck check = check_schedule(plan_steps(scenario));
  REQUIRE(check.ok);
  CHECK(check.live_at_end_by_category.at("gradient") == 124672ull * 4);
}

TEST_CASE("AdamW state is created lazily at the first step", "[planner][optimizer]") {
  Scenario scenario = tiny_mlp_scenario();
  scenario.optimizer.type = OptimizerType::AdamW;
  scenario.optimizer.impl = OptimizerImpl::Fused;
  scenario.iterations = 2;
  testing::ScheduleCheck check = check_schedule(plan_steps(scenario));
  REQUIRE(check.ok);
  // Before the first step: nothing. After it: exp_avg + exp_avg_sq = 2 * 268 B plus one 4-byte
  // device `step` per parameter for fused (4 tensors): 536 + 16 = 552 B more than plain SGD.
  CHECK(live_at(check, "iter0/forward") == 268);
  CHECK(live_at(check, "iter0/zero_grad") == 588 + 552);
  CHECK(live_at(check, "iter1/forward") == 320 + 552);
}

TEST_CASE("foreach AdamW holds one sqrt temporary per parameter during the step", "[planner][optimizer]") {
  Scenario scenario = tiny_mlp_scenario();
  scenario.optimizer.type = OptimizerType::AdamW;
  scenario.optimizer.impl = OptimizerImpl::Foreach;
  scenario.model.dims["hidden"] = 4096;  // batch 2: tiny activations, so the step is the peak
  PlannedTrace planned = plan_steps(scenario);
  testing::ScheduleCheck check = check_schedule(planned);
  REQUIRE(check.ok);
  // Params: 4*4096+4096 + 4096*3+3 = 20,480 + 12,291 = 32,771 elements = 131,084 B.
  // At the step: params + grads + m + v + sqrt list = 5 * 131,084 = 655,420, plus inputs
  // (2*4*4 + 2*8 = 48) and the caller-held loss 4: 655,472 B.
  CHECK(check.peak_bytes == 655472);
}

TEST_CASE("a compiled foreach AdamW step makes no parameter-sized temporaries", "[planner][optimizer][compile]") {
  Scenario scenario = tiny_mlp_scenario();
  scenario.optimizer.type = OptimizerType::AdamW;
  scenario.optimizer.impl = OptimizerImpl::Foreach;
  scenario.optimizer.compiled_step = true;
  scenario.model.dims["hidden"] = 4096;
  testing::ScheduleCheck check = check_schedule(plan_steps(scenario));
  REQUIRE(check.ok);
  // The eager step's 655,472 B (above) without its sqrt list of 131,084 B: params, grads, m and v
  // (4 * 131,084), the inputs (48) and the caller-held loss (4).
  CHECK(check.peak_bytes == 655472 - 131084);
}

TEST_CASE("single-tensor AdamW frees a parameter's denom only once the next one's is bound",
          "[planner][optimizer]") {
  Scenario scenario = tiny_mlp_scenario();
  scenario.optimizer.type = OptimizerType::AdamW;
  scenario.optimizer.impl = OptimizerImpl::SingleTensor;
  scenario.model.dims["hidden"] = 4096;
  scenario.model.dims["output"] = 4096;
  testing::ScheduleCheck check = check_schedule(plan_steps(scenario));
  REQUIRE(check.ok);
  // Params: 4*4096 + 4096 + 4096*4096 + 4096 = 16,801,792 elements = 67,207,168 B; params,
  // grads, m and v are 4 * 67,207,168 = 268,828,672 B. At the big weight's step: its sqrt and
  // denom (2 * 67,108,864) plus the bias before it's denom, still bound (16,384): 134,234,112.
  // Plus the inputs (48) and the caller-held loss (4): 403,062,836 B.
  CHECK(check.peak_bytes == 403062836ull);
}

TEST_CASE("8-bit AdamW keeps one byte per state element plus block absmax", "[planner][optimizer]") {
  Scenario scenario = tiny_mlp_scenario();
  scenario.optimizer.type = OptimizerType::AdamW8bit;
  scenario.model.dims["hidden"] = 4096;
  testing::ScheduleCheck check = check_schedule(plan_steps(scenario));
  REQUIRE(check.ok);
  // w0 16,384 elements (>= 4096): 2 * 16,384 B + 2 * 64 blocks * 4 B = 33,280;
  // w1 12,288: 2 * 12,288 + 2 * 48 * 4 = 24,960; b0 4,096: 2 * 4,096 + 2 * 16 * 4 = 8,320;
  // b1 3 (< 4096, fp32 state): 2 * 12 = 24; two 256-entry fp32 qmaps 2,048.
  CHECK(check.live_at_end_by_category.at("optimizer_state") == 33280 + 24960 + 8320 + 24 + 2048);
}

TEST_CASE("full checkpointing lowers the peak and keeps the schedule valid", "[planner][checkpointing]") {
  Scenario scenario = cpu_scenario("gpt2-tiny", 4, 128, Precision::AmpBf16, AttentionImpl::Eager);
  scenario.model.dims["layers"] = 6;
  scenario.dropout = 0.1;
  testing::ScheduleCheck plain = check_schedule(plan_steps(scenario));
  scenario.checkpointing.mode = CheckpointMode::Full;
  PlannedTrace checkpointed = plan_steps(scenario);
  testing::ScheduleCheck full = check_schedule(checkpointed);
  REQUIRE(plain.ok);
  REQUIRE(full.ok);
  CHECK(full.peak_bytes < plain.peak_bytes);
  CHECK(checkpointed.trace.events.size() > 0);
  scenario.checkpointing.mode = CheckpointMode::Selective;
  // The attention core as a closed set: everything between the qkv split and c_proj's input
  // (recomputing an op whose input is not recomputed keeps that input alive instead).
  scenario.checkpointing.recompute_ops = {"matmul", "copy", "mul", "constant", "masked_fill", "softmax", "dropout"};
  testing::ScheduleCheck selective = check_schedule(plan_steps(scenario));
  REQUIRE(selective.ok);
  CHECK(selective.peak_bytes < plain.peak_bytes);
  scenario.checkpointing.mode = CheckpointMode::EveryN;
  scenario.checkpointing.every_n = 2;
  testing::ScheduleCheck every_other = check_schedule(plan_steps(scenario));
  REQUIRE(every_other.ok);
  CHECK(every_other.peak_bytes < plain.peak_bytes);
  CHECK(every_other.peak_bytes > full.peak_bytes);
}

TEST_CASE("an unknown op kind in recompute_ops is an error with a did-you-mean", "[planner][checkpointing]") {
  Scenario scenario = cpu_scenario("gpt2-tiny", 2, 32);
  scenario.checkpointing.mode = CheckpointMode::Selective;
  scenario.checkpointing.recompute_ops = {"sofmax"};
  CHECK_THROWS_WITH(plan_steps(scenario), Catch::Contains("did you mean 'softmax'"));
}

TEST_CASE("losses kept across iterations without .item() grow the live set", "[planner][leaks]") {
  Scenario scenario = tiny_mlp_scenario();
  scenario.iterations = 4;
  testing::ScheduleCheck plain = check_schedule(plan_steps(scenario));
  scenario.loop.keep_losses_across_iterations = true;
  testing::ScheduleCheck leaking = check_schedule(plan_steps(scenario));
  REQUIRE(leaking.ok);
  // Three earlier 4-byte losses are never freed.
  CHECK(leaking.final_bytes == plain.final_bytes + 3 * 4);
}

TEST_CASE("evaluation under grad mode with summed losses keeps every batch's graph alive", "[planner][leaks]") {
  Scenario scenario = cpu_scenario("gpt2-tiny", 2, 32);
  scenario.eval.enabled = true;
  scenario.eval.batches = 4;
  testing::ScheduleCheck no_grad = check_schedule(plan_steps(scenario));
  scenario.eval.no_grad = false;
  scenario.eval.accumulate_loss_without_item = true;
  testing::ScheduleCheck leaking = check_schedule(plan_steps(scenario));
  REQUIRE(no_grad.ok);
  REQUIRE(leaking.ok);
  CHECK(leaking.peak_bytes > no_grad.peak_bytes);
  // The summed losses live for the whole run (the list of eval losses), and with them every
  // eval graph: memory grows every iteration, as the CPU captures of real PyTorch show
  // (validate/scenarios/gpt2-tiny-eval-leak.yaml, docs/validation.md).
  CHECK(leaking.final_bytes > no_grad.final_bytes);
  scenario.iterations = 3;
  testing::ScheduleCheck longer = check_schedule(plan_steps(scenario));
  CHECK(longer.final_bytes - leaking.final_bytes == (leaking.final_bytes - no_grad.final_bytes) / 2);
}

TEST_CASE("gradient accumulation steals .grad once and adds later micro-batches in place", "[planner][schedule]") {
  Scenario scenario = tiny_mlp_scenario();
  scenario.grad_accum_steps = 3;
  PlannedTrace planned = plan_steps(scenario);
  testing::ScheduleCheck check = check_schedule(planned);
  REQUIRE(check.ok);
  size_t gradient_allocs = 0;
  for (size_t i = 0; i < planned.info.size(); ++i) {
    if (planned.trace.events[i].kind == oomcast::sim::EventKind::Alloc && planned.info[i].category == TensorCategory::Gradient) {
      ++gradient_allocs;
    }
  }
  CHECK(gradient_allocs == 4);  // one .grad per parameter, made in the first micro-batch only
  CHECK(live_at(check, "iter0/optimizer") == 588);
}

TEST_CASE("a GPU device gets two cuBLAS workspaces that are never freed", "[planner][schedule]") {
  Scenario scenario = tiny_mlp_scenario();
  scenario.device.is_cpu = false;
  scenario.device.cublas_workspace_bytes = 8519680;
  scenario.device.cublas_workspaces = 2;
  testing::ScheduleCheck check = check_schedule(plan_steps(scenario));
  REQUIRE(check.ok);
  CHECK(check.live_at_end_by_category.at("workspace") == 2 * 8519680ull);
}

TEST_CASE("every event carries its iteration, phase and category", "[planner][schedule]") {
  Scenario scenario = cpu_scenario("llama-tiny", 2, 32, Precision::AmpBf16, AttentionImpl::Flash);
  PlannedTrace planned = plan_steps(scenario);
  REQUIRE(planned.info.size() == planned.trace.events.size());
  REQUIRE(planned.names.at(0).empty());
  bool saw_iteration_one = false;
  for (size_t i = 0; i < planned.info.size(); ++i) {
    const EventInfo& info = planned.info[i];
    CHECK(info.phase < planned.names.size());
    if (planned.trace.events[i].kind == oomcast::sim::EventKind::Alloc) CHECK(info.tensor != 0);
    saw_iteration_one = saw_iteration_one || info.iteration == 1;
  }
  CHECK(saw_iteration_one);
}

TEST_CASE("llama-2-70b plans three iterations into a valid schedule", "[planner][schedule][slow]") {
  Scenario scenario = cpu_scenario("llama-2-70b", 1, 4096, Precision::AmpBf16, AttentionImpl::Flash);
  scenario.iterations = 3;
  PlannedTrace planned = plan_steps(scenario);
  require_valid(planned);
  CHECK(planned.parameter_count == 68976648192ull);
}

TEST_CASE("GPT-2 small peaks agree with the hand-derived totals of ../shared/docs/training-memory-model.md 11.6",
          "[planner][schedule][gpt2]") {
  // §11.6 (b=8, s=1024, dropout 0.1, fused AdamW, steady state): A fp32 eager 24.06 GB,
  // B bf16 autocast eager 18.94 GB, C bf16 autocast flash 10.42 GB, D fp32 mem-efficient
  // 13.13 GB (static + cast cache + saved activations + the four vocab-sized tensors at the
  // loss backward). The reference rounds to 10 MB, so compare within 0.1%.
  struct Case {
    Precision precision;
    AttentionImpl attention;
    double expected_gb;
  };
  for (const Case& c : {Case{Precision::Fp32, AttentionImpl::Eager, 24.06}, Case{Precision::AmpBf16, AttentionImpl::Eager, 18.94},
                        Case{Precision::AmpBf16, AttentionImpl::Flash, 10.42},
                        Case{Precision::Fp32, AttentionImpl::MemEfficient, 13.13}}) {
    Scenario scenario = cpu_scenario("gpt2", 8, 1024, c.precision, c.attention);
    // The hand derivation is of CUDA kernels (bool dropout masks): a GPU schedule without
    // workspaces, counted exactly by check_schedule, not the cpu device's CPU kernels.
    scenario.device.is_cpu = false;
    scenario.device.cublas_workspaces = 0;
    scenario.dropout = 0.1;
    scenario.optimizer.impl = OptimizerImpl::Fused;
    // nanoGPT's loop, `logits, loss = model(X, Y)`: the logits live through the backward (an
    // output the caller does not bind dies as the forward returns).
    scenario.loop.caller_held_outputs = {"logits", "loss"};
    testing::ScheduleCheck check = check_schedule(plan_steps(scenario));
    REQUIRE(check.ok);
    CHECK(static_cast<double>(check.peak_bytes) / 1e9 == Approx(c.expected_gb).epsilon(0.001));
  }
}
