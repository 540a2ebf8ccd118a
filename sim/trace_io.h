// Reading and writing the plain-text trace format (docs/trace-format.md):
//   alloc <id> <bytes> [stream] [tag]
//   free <id>
//   mark <label>
//   empty_cache
//   record_stream <id> <stream>
//   free_requested <id> / free_completed <id>
//   sync [stream]
// '#' starts a comment; blank lines are ignored.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

#include "sim/trace.h"

namespace oomcast::sim {

// Limits of a trace read from a file: beyond them the host's memory, not the trace, decides.
// 20 M events (as the planner's kMaxPlannedEvents) stay under about 2 GB; a line is one event,
// so a line over 1 MiB (a comment of a gigabyte) is refused instead of held.
inline constexpr size_t kMaxTraceEvents = 20'000'000;
inline constexpr size_t kMaxTraceLineBytes = size_t{1} << 20;

// Parses trace text. `name` is used in errors. Throws InputError (file:line and event index)
// for unknown actions, missing or malformed fields, negative or overflowing sizes, a free of
// an unknown id and a double free.
Trace parse_trace_text(const std::string& name, std::string_view text);

// Reads a trace file (plain text; gzip-compressed when it starts with the gzip magic bytes).
Trace read_trace_file(const std::string& path);

// Writes `trace` in the text format; parse_trace_text(write_trace(t)) == t.
void write_trace(std::ostream& out, const Trace& trace);

}  // namespace oomcast::sim
