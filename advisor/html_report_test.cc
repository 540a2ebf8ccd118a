// Tests of what the HTML report draws from: the timeline recorder (downsampling that keeps
// the peak exact, the segment map at the peak) and the page renderer (numbers, escaping).
#include "advisor/html_report.h"

#include <catch2/catch.hpp>

#include <algorithm>

#include "advisor/html_report_replay.h"
#include "advisor/timeline_recorder.h"
#include "sim/caching_allocator.h"
#include "sim/replay.h"

namespace oomcast::advisor {
namespace {

constexpr sim::Bytes kMiB = 1ull << 20;

TimelineRecording record(const sim::Trace& trace, size_t buckets, size_t capture_event,
                         sim::ReplayResult* result_out = nullptr) {
  sim::ReplayOptions options;
  sim::Replayer replayer(sim::AllocatorConfig{}, sim::DeviceModel::unlimited(), options);
  TimelineRecorder recorder(trace.events.size(), buckets, capture_event);
  replayer.on_event([&](size_t index) { recorder.after_event(index, trace, replayer); });
  sim::ReplayResult result = replayer.run(trace);
  if (result_out) *result_out = result;
  return recorder.finish();
}

TEST_CASE("the timeline keeps the exact peak however many events share a bucket", "[advisor][html]") {
  sim::TraceBuilder builder;
  // 20,000 events: a saw of small tensors and, once, a 700 MiB spike for a single event.
  for (int i = 0; i < 10'000; ++i) {
    std::string id = "t" + std::to_string(i);
    builder.alloc(id, (i == 6'123 ? 700 : 1 + i % 7) * kMiB);
    builder.free(id);
  }
  sim::Trace trace = builder.take();
  sim::ReplayResult result;
  TimelineRecording recording = record(trace, 100, SIZE_MAX, &result);
  REQUIRE(recording.buckets.size() == 100);
  sim::Bytes highest = 0;
  size_t highest_event = 0;
  for (const TimelineBucket& bucket : recording.buckets) {
    CHECK(bucket.last_event - bucket.first_event + 1 == 200);
    if (bucket.max_allocated > highest) {
      highest = bucket.max_allocated;
      highest_event = bucket.max_allocated_event;
    }
  }
  CHECK(highest == result.peak_allocated_bytes);
  CHECK(highest == 700 * kMiB);
  CHECK(highest_event == result.peak_allocated_event);
  CHECK(recording.buckets.front().min_allocated == 0);
}

TEST_CASE("a trace shorter than the bucket count gets one bucket per event", "[advisor][html]") {
  sim::TraceBuilder builder;
  builder.alloc("a", 4 * kMiB);
  builder.alloc("b", 8 * kMiB);
  builder.free("a");
  TimelineRecording recording = record(builder.take(), 1600, SIZE_MAX);
  REQUIRE(recording.buckets.size() == 3);
  CHECK(recording.buckets[1].max_allocated == 12 * kMiB);
  CHECK(recording.buckets[2].min_allocated == 8 * kMiB);
}

TEST_CASE("the segment map at the capture event tells allocated, cached free and fragments apart", "[advisor][html]") {
  sim::TraceBuilder builder;
  builder.alloc("x", 3 * kMiB);   // a 20 MiB segment: x, y and a free tail
  builder.alloc("y", 3 * kMiB);
  builder.free("x");              // a free piece of a split segment
  builder.alloc("z", 30 * kMiB);  // a segment of its own
  builder.free("z");              // now a whole free segment: cached
  sim::Trace trace = builder.take();
  sim::ReplayResult result;
  TimelineRecording recording = record(trace, 1600, trace.events.size() - 1, &result);
  REQUIRE(recording.segments.size() == 2);
  uint64_t total = 0, allocated = 0, cached = 0, fragments = 0;
  size_t y_event = SIZE_MAX;
  for (const SegmentView& segment : recording.segments) {
    uint64_t sum = 0;
    for (const SegmentPiece& piece : segment.pieces) {
      sum += piece.size;
      if (piece.state == SegmentPieceState::Allocated) {
        allocated += piece.size;
        y_event = piece.alloc_event;
      }
      if (piece.state == SegmentPieceState::CachedFree) cached += piece.size;
      if (piece.state == SegmentPieceState::Fragment) fragments += piece.size;
    }
    CHECK(sum == segment.size);
    total += segment.size;
  }
  CHECK(total == static_cast<uint64_t>(result.final_stats.reserved_bytes.all().current));
  CHECK(allocated == 3 * kMiB);
  CHECK(y_event == 1);
  CHECK(cached == 30 * kMiB);
  CHECK(fragments == 17 * kMiB);
}

TEST_CASE("small neighbouring blocks are merged into one piece that keeps their bytes", "[advisor][html]") {
  sim::TraceBuilder builder;
  // 40 blocks of 512 KiB in 2 MiB small-pool segments, every other one freed.
  for (int i = 0; i < 40; ++i) builder.alloc("s" + std::to_string(i), 512 * 1024);
  for (int i = 0; i < 40; i += 2) builder.free("s" + std::to_string(i));
  sim::Trace trace = builder.take();
  sim::ReplayOptions options;
  sim::Replayer replayer(sim::AllocatorConfig{}, sim::DeviceModel::unlimited(), options);
  TimelineRecorder recorder(trace.events.size(), 10, trace.events.size() - 1);
  replayer.on_event([&](size_t index) { recorder.after_event(index, trace, replayer); });
  replayer.run(trace);
  TimelineRecording recording = recorder.finish(4);
  size_t blocks = 0, pieces = 0;
  uint64_t allocated = 0, bytes = 0;
  for (const SegmentView& segment : recording.segments) {
    for (const SegmentPiece& piece : segment.pieces) {
      blocks += piece.blocks;
      allocated += piece.allocated_bytes;
      bytes += piece.size;
      pieces += 1;
    }
  }
  CHECK(blocks == recording.segment_blocks);
  CHECK(pieces < recording.segment_blocks);
  CHECK(allocated == 20 * 512 * 1024);
  CHECK(bytes == static_cast<uint64_t>(replayer.allocator().stats().reserved_bytes.all().current));
}

HtmlReport small_report() {
  HtmlReport report;
  report.kind = "plan";
  report.title = "a <b>bold</b> & \"quoted\" title";
  report.peak_allocated_bytes = 123456789;
  report.peak_reserved_bytes = 223456789;
  report.device_total_bytes = 85899345920;
  report.usable_bytes = 85000000000;
  report.events = 2;
  TimelineBucket bucket;
  bucket.first_event = 0;
  bucket.last_event = 1;
  bucket.min_allocated = 0;
  bucket.max_allocated = 123456789;
  bucket.max_allocated_event = 1;
  report.timeline.push_back(bucket);
  report.label_of = [](size_t) { return std::string("op </script><script>alert(1)</script>"); };
  return report;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("the page states the key numbers in exact bytes", "[advisor][html]") {
  std::string html = render_html(small_report());
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("id=\"peak-allocated\" data-bytes=\"123456789\"") != std::string::npos);
  CHECK(html.find("id=\"peak-reserved\" data-bytes=\"223456789\"") != std::string::npos);
  CHECK(html.find("id=\"device-total\" data-bytes=\"85899345920\"") != std::string::npos);
  CHECK(html.find("117.74 MiB") != std::string::npos);
}

TEST_CASE("text from the trace cannot close the page's script or add markup", "[advisor][html]") {
  std::string html = render_html(small_report());
  CHECK(html.find("a &lt;b&gt;bold&lt;/b&gt; &amp; &quot;quoted&quot; title") != std::string::npos);
  CHECK(occurrences(html, "</script>") == 2);  // the data block's and the script's own
  CHECK(html.find("op <\\/script><script>alert(1)<\\/script>") != std::string::npos);
}

TEST_CASE("a page without a device shows no device cards", "[advisor][html]") {
  HtmlReport report = small_report();
  report.device_total_bytes = 0;
  std::string html = render_html(report);
  CHECK(html.find("id=\"device-total\"") == std::string::npos);
  CHECK(html.find("id=\"peak-reserved\"") != std::string::npos);
}

TEST_CASE("a replay report labels graph and MemPool events by their action and name, not by a tensor",
          "[advisor][html]") {
  sim::TraceBuilder builder;
  builder.alloc("weights", 4 * kMiB);
  builder.mempool_enter("pool");  // its slot field holds option bits (0), which also index "weights"
  builder.alloc("activations", 2 * kMiB);
  builder.mempool_exit("pool");
  builder.capture_begin("decode", 0);
  builder.capture_end("decode");
  builder.free("activations");
  const sim::Trace trace = builder.take();
  sim::ReplayOptions options;
  const sim::ReplayResult first =
      sim::replay(trace, sim::AllocatorConfig{}, sim::DeviceModel::unlimited(), options);
  const HtmlReport report =
      trace_html_report("t.trace", trace, sim::AllocatorConfig{}, sim::DeviceModel::unlimited(), options, first);
  CHECK(report.label_of(0) == "alloc weights 4.00 MiB");
  CHECK(report.label_of(1) == "mempool_enter pool");
  CHECK(report.label_of(3) == "mempool_exit pool");
  CHECK(report.label_of(4) == "capture_begin decode");
  CHECK(report.label_of(6) == "activations");
}

}  // namespace
}  // namespace oomcast::advisor
