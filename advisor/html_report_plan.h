// The HTML report of a planned scenario (`plan --html`) and of the what-if doctor
// (`whatif --html`: the same pictures of the scenario as given, plus the fixes table).
#pragma once

#include "advisor/html_report.h"
#include "advisor/predict.h"
#include "advisor/whatif.h"

namespace oomcast::advisor {

// Replays `planned` once more with a TimelineRecorder (on the scenario's device when the step
// fits, else on an unbounded one, as predict() reports the demand) and fills the pictures.
HtmlReport plan_html_report(const scenario::Scenario& scenario, const planner::PlannedTrace& planned, const Prediction& prediction);

// plan_html_report() of the scenario plus the patterns and the ranked fixes.
HtmlReport whatif_html_report(const scenario::Scenario& scenario, const planner::PlannedTrace& planned, const Prediction& prediction,
                              const Diagnosis& diagnosis);

}  // namespace oomcast::advisor
