// The progress line on a terminal: what the library reports through base/progress.h, drawn on
// stderr in place, only when stderr is a terminal and only once the work has run a second.
#pragma once

namespace oomcast::cli {

// Installs the sink when stderr is a terminal (OOMCAST_PROGRESS=1 forces it on, 0 off).
void install_terminal_progress();

// Erases the line if one is drawn (before an error message or the results are printed).
void erase_terminal_progress();

}  // namespace oomcast::cli
