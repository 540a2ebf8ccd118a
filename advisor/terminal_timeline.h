// The terminal timeline of the text report: one bar per phase of the schedule showing its
// peak allocated and peak reserved bytes against the usable device memory, so the phase
// that crosses (or nears) the limit stands out without reading the numbers.
#pragma once

#include <cstddef>
#include <string>

#include "advisor/predict.h"

namespace oomcast::advisor {

struct TerminalTimelineOptions {
  size_t bar_width = 40;   // characters between the start and the full scale
  size_t max_rows = 24;    // more phases than this are merged, consecutive ones per row
};

// The timeline block, ending with a newline; empty when the prediction has no phases.
std::string terminal_timeline(const Prediction& prediction, const TerminalTimelineOptions& options = {});

}  // namespace oomcast::advisor
