// The text trace format: what it accepts and the exact errors for what it refuses.
#include "sim/trace_io.h"

#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/input_error.h"

using namespace oomcast::sim;
using oomcast::InputError;

namespace {
std::string error_of(const std::string& text) {
  try {
    parse_trace_text("t.trace", text);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}
// A gzip-compressed trace file in the temp directory, optionally cut after `keep` bytes;
// removed when the test ends.
class GzipTraceFile {
 public:
  GzipTraceFile(const std::string& name, const std::string& text, size_t keep = std::string::npos)
      : path_((std::filesystem::temp_directory_path() / ("oomcast_trace_io_test_" + std::to_string(getpid()) + "_" + name))
                  .string()) {
    gzFile file = gzopen(path_.c_str(), "wb");
    gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
    gzclose(file);
    if (keep != std::string::npos) std::filesystem::resize_file(path_, keep);
  }
  ~GzipTraceFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }
  size_t size() const { return std::filesystem::file_size(path_); }

 private:
  std::string path_;
};

std::string read_error_of(const std::string& path) {
  try {
    read_trace_file(path);
  } catch (const InputError& error) {
    return error.what();
  }
  return "no error";
}

// Enough distinct lines that the file is read in several chunks and lines cross their ends.
std::string long_trace() {
  std::string text = "# a long trace\n";
  for (int i = 0; i < 20000; ++i) {
    text += "alloc a" + std::to_string(i) + " " + std::to_string(512 * (i % 7 + 1)) + "\nfree a" + std::to_string(i) + "\n";
  }
  return text;
}
}  // namespace

TEST_CASE("a trace lists allocs, frees, marks and empty_cache in order", "[sim][trace]") {
  Trace trace = parse_trace_text("t.trace",
                                 "# a comment\n"
                                 "mark forward\n"
                                 "alloc x 1000 0 activation\n"
                                 "alloc y 2048 3\n"
                                 "\n"
                                 "free x   # trailing comment\n"
                                 "empty_cache\n");
  REQUIRE(trace.events.size() == 5);
  CHECK(trace.events[0].kind == EventKind::Mark);
  CHECK(trace.strings[trace.events[0].tag] == "forward");
  CHECK(trace.events[1].bytes == 1000);
  CHECK(trace.strings[trace.events[1].tag] == "activation");
  CHECK(trace.events[2].stream == 3);
  CHECK(trace.events[3].kind == EventKind::Free);
  CHECK(trace.events[3].slot == trace.events[1].slot);
  CHECK(trace.events[4].kind == EventKind::EmptyCache);
  CHECK(trace.source_lines[3] == 6);
}

TEST_CASE("an id can be reused after it is freed and gets a fresh slot", "[sim][trace]") {
  Trace trace = parse_trace_text("t.trace", "alloc a 1\nfree a\nalloc a 2\nfree a\n");
  CHECK(trace.events[0].slot != trace.events[2].slot);
  CHECK(trace.events[3].slot == trace.events[2].slot);
}

TEST_CASE("writing and reading a trace gives the same events", "[sim][trace]") {
  Trace trace = parse_trace_text("t.trace", "mark setup\nalloc w 4096 0 parameter\nalloc g 512 2\nfree g\nempty_cache\n");
  std::ostringstream out;
  write_trace(out, trace);
  Trace again = parse_trace_text("again", out.str());
  REQUIRE(again.events.size() == trace.events.size());
  for (size_t i = 0; i < trace.events.size(); ++i) {
    CHECK(again.events[i].kind == trace.events[i].kind);
    CHECK(again.events[i].bytes == trace.events[i].bytes);
    CHECK(again.events[i].stream == trace.events[i].stream);
    CHECK(again.strings[again.events[i].tag] == trace.strings[trace.events[i].tag]);
  }
}

TEST_CASE("an unknown action is an error with a suggestion", "[sim][trace][errors]") {
  CHECK(error_of("alloc a 1\nallocc b 2\n") ==
        "t.trace:2: event 1: error: unknown trace action 'allocc' (did you mean 'alloc'?); expected alloc, free, "
        "mark, empty_cache, record_stream, free_requested, free_completed, sync, capture_begin, capture_join, "
        "capture_end, graph_release, mempool_enter, mempool_exit or mempool_release");
}

TEST_CASE("a free of an unknown id is an error naming the line", "[sim][trace][errors]") {
  CHECK(error_of("alloc a 1\nfree b\n") == "t.trace:2: event 1: error: free of unknown id 'b'");
}

TEST_CASE("a double free is an error naming where it was first freed", "[sim][trace][errors]") {
  CHECK(error_of("alloc a 1\nfree a\nfree a\n") ==
        "t.trace:3: event 2: error: double free of id 'a' (already freed on line 2)");
}

TEST_CASE("a negative size is an error", "[sim][trace][errors]") {
  CHECK(error_of("alloc a -5\n") == "t.trace:1: event 0: error: size '-5' is negative");
}

TEST_CASE("a size beyond 64 bits is an error", "[sim][trace][errors]") {
  CHECK(error_of("alloc a 18446744073709551616\n") ==
        "t.trace:1: event 0: error: size '18446744073709551616' does not fit in 64 bits");
}

TEST_CASE("a size that is not a number is an error", "[sim][trace][errors]") {
  CHECK(error_of("alloc a 12kb\n") == "t.trace:1: event 0: error: size '12kb' is not a non-negative integer");
}

TEST_CASE("allocating a live id again is an error", "[sim][trace][errors]") {
  CHECK(error_of("alloc a 1\nalloc a 2\n") ==
        "t.trace:2: event 1: error: id 'a' is allocated again while still live (allocated on line 1)");
}

TEST_CASE("an alloc without a size is an error", "[sim][trace][errors]") {
  CHECK(error_of("alloc a\n") ==
        "t.trace:1: event 0: error: alloc needs an id and a size: 'alloc <id> <bytes> [stream] [tag]'");
}

TEST_CASE("writing a trace whose live slots share a name keeps them apart", "[sim][trace]") {
  TraceBuilder builder;
  builder.alloc("grad", 1000);
  builder.alloc("grad", 2000);  // a second live slot under the same label
  Trace trace = builder.take();
  trace.events.push_back(Event{EventKind::Free, 0, 0, 0, 0});
  trace.events.push_back(Event{EventKind::Free, 1, 0, 0, 0});
  std::ostringstream out;
  write_trace(out, trace);
  Trace again = parse_trace_text("again", out.str());
  REQUIRE(again.events.size() == 4);
  CHECK(again.events[2].slot == again.events[0].slot);
  CHECK(again.events[3].slot == again.events[1].slot);
}

TEST_CASE("carriage returns are blanks, so a trace written back reads the same", "[sim][trace][fuzz]") {
  // Found by a round-trip fuzzer: tests/data/fuzz/trace_mark_label_ends_in_cr.txt.
  Trace trace = parse_trace_text("t", "alloc a\r 5\r\nfree a\r#\r\nmark end\r#\n");
  REQUIRE(trace.events.size() == 3);
  CHECK(trace.slot_names[trace.events[0].slot] == "a");
  CHECK(trace.strings[trace.events[2].tag] == "end");
  std::ostringstream out;
  write_trace(out, trace);
  Trace again = parse_trace_text("again", out.str());
  REQUIRE(again.events.size() == 3);
  CHECK(again.strings[again.events[2].tag] == "end");
}

TEST_CASE("the stream actions round-trip through the text form", "[sim][trace][streams]") {
  const char* text =
      "alloc a 4096 0\nrecord_stream a 7\nfree a\nalloc b 100\nfree_requested b\nsync 7\nsync\nfree_completed b\n";
  Trace trace = parse_trace_text("t.trace", text);
  REQUIRE(trace.events.size() == 8);
  CHECK(trace.events[1].kind == EventKind::RecordStream);
  CHECK(trace.events[1].stream == 7);
  CHECK(trace.events[4].kind == EventKind::FreeRequested);
  CHECK(trace.events[5].kind == EventKind::StreamSync);
  CHECK(trace.events[6].kind == EventKind::DeviceSync);
  CHECK(trace.events[7].kind == EventKind::FreeCompleted);
  std::ostringstream out;
  write_trace(out, trace);
  Trace again = parse_trace_text("again", out.str());
  REQUIRE(again.events.size() == trace.events.size());
  for (size_t i = 0; i < trace.events.size(); ++i) {
    CHECK(again.events[i].kind == trace.events[i].kind);
    CHECK(again.events[i].stream == trace.events[i].stream);
  }
}

TEST_CASE("free_completed needs a free_requested of the same id", "[sim][trace][streams][errors]") {
  CHECK(error_of("alloc a 1\nfree_completed a\n") ==
        "t.trace:2: event 1: error: free_completed of id 'a' whose free was not requested");
  CHECK(error_of("alloc a 1\nfree_requested a\nfree a\n") ==
        "t.trace:3: event 2: error: free of id 'a' whose free was already requested on line 2");
}

TEST_CASE("record_stream needs a live id", "[sim][trace][streams][errors]") {
  CHECK(error_of("record_stream a 3\n") ==
        "t.trace:1: event 0: error: record_stream of id 'a', which is not allocated");
}

TEST_CASE("a gzip-compressed trace read in chunks gives the same events as its text", "[sim][trace][gzip]") {
  const std::string text = long_trace();
  const GzipTraceFile file("whole.trace.gz", text);
  const Trace read = read_trace_file(file.path());
  const Trace parsed = parse_trace_text("t", text);
  REQUIRE(read.events.size() == 40000);
  REQUIRE(read.events.size() == parsed.events.size());
  for (size_t i = 0; i < read.events.size(); ++i) CHECK(read.events[i].bytes == parsed.events[i].bytes);
}

TEST_CASE("a truncated trace.gz is an error, not a shorter trace", "[sim][trace][gzip][errors]") {
  const std::string text = long_trace();
  const GzipTraceFile whole("cut_reference.trace.gz", text);
  const GzipTraceFile cut("cut.trace.gz", text, whole.size() / 2);
  CHECK_THAT(read_error_of(cut.path()), Catch::Matchers::Contains("truncated compressed trace"));
  // Only the 8-byte trailer (CRC and length) missing: every event decompresses, still refused.
  const GzipTraceFile no_trailer("no_trailer.trace.gz", text, whole.size() - 8);
  CHECK_THAT(read_error_of(no_trailer.path()), Catch::Matchers::Contains("truncated compressed trace"));
}

TEST_CASE("a line over the line limit is refused instead of held in memory", "[sim][trace][gzip][errors]") {
  const GzipTraceFile comment("comment.trace.gz", "alloc a 1\n#" + std::string(kMaxTraceLineBytes + 1, 'x') + "\n");
  const std::string error = read_error_of(comment.path());
  CHECK_THAT(error, Catch::Matchers::Contains("comment.trace.gz:2:"));
  CHECK_THAT(error, Catch::Matchers::Contains("a line longer than 1 MiB"));
}
