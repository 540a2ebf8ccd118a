// Tests of compare_capture(): per-mark live bytes and phase peaks, errors against the real
// peak, skipped marks, the tolerance verdict and the op where the curves part.
#include "advisor/compare.h"

#include <catch2/catch.hpp>

namespace oomcast::advisor {

using planner::EventInfo;
using planner::PlannedTrace;

namespace {

// A planned trace written by hand; every event names the op that made it.
struct PlannedByHand {
  sim::TraceBuilder builder;
  PlannedTrace planned;

  PlannedByHand() { planned.names = {""}; }
  void push(const std::string& op) {
    planned.names.push_back(op);
    EventInfo info;
    info.op = static_cast<uint32_t>(planned.names.size() - 1);
    planned.info.push_back(info);
  }
  void alloc(const std::string& id, sim::Bytes bytes, const std::string& op) {
    builder.alloc(id, bytes);
    push(op);
  }
  void free(const std::string& id) {
    builder.free(id);
    push("");
  }
  void mark(const std::string& label) {
    builder.mark(label);
    push("");
  }
  PlannedTrace take() {
    planned.trace = builder.take();
    return planned;
  }
};

// setup: a 1000-byte weight; forward: activations; end.
PlannedTrace planned_step(sim::Bytes activation_bytes) {
  PlannedByHand hand;
  hand.mark("setup");
  hand.alloc("w", 1000, "init");
  hand.mark("iter0/forward");
  hand.alloc("a", activation_bytes, "linear");
  hand.alloc("b", 500, "gelu");
  hand.free("b");
  hand.free("a");
  hand.mark("end");
  return hand.take();
}

sim::Trace captured_step(sim::Bytes activation_bytes) {
  sim::TraceBuilder builder;
  builder.mark("setup");
  builder.alloc("t0", 1000);
  builder.mark("iter0/forward");
  builder.alloc("t1", activation_bytes);
  builder.alloc("t2", 500);
  builder.free("t2");
  builder.free("t1");
  builder.mark("teardown");
  builder.free("t0");
  return builder.take();
}

TEST_CASE("mark stats give the live bytes at each mark and the peak of the phase it opens") {
  std::vector<MarkStats> rows = mark_stats(captured_step(2000), {"teardown"});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].label == "setup");
  CHECK(rows[0].live_bytes == 0);
  CHECK(rows[0].phase_peak_bytes == 1000);
  CHECK(rows[1].label == "iter0/forward");
  CHECK(rows[1].live_bytes == 1000);
  CHECK(rows[1].phase_peak_bytes == 3500);
}

TEST_CASE("identical schedules compare with zero error and skip teardown and end") {
  Comparison c = compare_capture(planned_step(2000), captured_step(2000), 0.02);
  CHECK(c.within_tolerance());
  CHECK(c.real_peak_bytes == 3500);
  CHECK(c.phases.size() == 2);
  CHECK(c.only_in_capture.empty());
  CHECK(c.only_in_prediction.empty());
  CHECK(c.max_abs_peak_error == 0.0);
  CHECK_FALSE(c.divergence);
}

TEST_CASE("errors are fractions of the real overall peak and fail past the tolerance") {
  // predicted forward peak 1000 + 2350 + 500 = 3850 against 3500: +350 / 3500 = +10%.
  Comparison c = compare_capture(planned_step(2350), captured_step(2000), 0.02);
  CHECK_FALSE(c.within_tolerance());
  REQUIRE(c.first_failing_phase);
  CHECK(*c.first_failing_phase == "iter0/forward");
  CHECK(c.phases[1].peak_error == Approx(0.10));
  CHECK(c.max_abs_peak_error == Approx(0.10));
  CHECK(c.median_abs_peak_error == Approx(0.05));
  REQUIRE(c.divergence);
  CHECK(c.divergence->op == "linear");
}

TEST_CASE("a mark missing on one side makes the comparison fail") {
  sim::TraceBuilder builder;
  builder.mark("setup");
  builder.alloc("t0", 1000);
  Comparison c = compare_capture(planned_step(2000), builder.take(), 0.02);
  CHECK_FALSE(c.within_tolerance());
  REQUIRE(c.only_in_prediction.size() == 1);
  CHECK(c.only_in_prediction[0] == "iter0/forward");
}

}  // namespace
}  // namespace oomcast::advisor
