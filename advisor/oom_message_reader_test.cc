// The OOM message reader as the inverse of sim/oom_message: every text the simulator prints,
// for each torch release, reads back to the figures it was made from; and real messages
// quoted in public issues (cited by URL) read to the numbers they print.
#include "advisor/oom_message_reader.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "advisor/oom_explanation.h"
#include "sim/newest_torch_release.h"
#include "sim/oom_message.h"

using namespace oomcast;
using namespace oomcast::advisor;

namespace {

// format_size keeps two decimals of the unit it picks: the value read back is within half a
// hundredth of that unit (twice that for a sum of two printed values).
bool near(uint64_t read, uint64_t actual, int terms = 1) {
  double unit = actual <= 1024 ? 1.0 : actual <= (1ull << 20) ? 1024.0 : actual <= (1ull << 30) ? 1048576.0 : 1073741824.0;
  return std::fabs(static_cast<double>(read) - static_cast<double>(actual)) <= terms * (unit / 200.0 + 1.0);
}

sim::OomFigures example_figures() {
  sim::OomFigures f;
  f.alloc_size = 546ull << 20;
  f.device_total = 16934436864ull;
  f.device_free = 539164672ull;
  f.process_in_use = 16374562816ull;
  f.allocated_bytes = 14742363750ull;
  f.reserved_bytes = 14742363750ull + 772657152ull;
  return f;
}

}  // namespace

// The texts per release come from sim/allocator_release_facts.cc, each fact cited there (PR or
// the release's c10/cuda/CUDACachingAllocator.cpp); 2.12 and 2.13 print what 2.11 prints (no
// later change is known). The real messages below, quoted in public issues, check the same
// reader against texts PyTorch itself printed.
TEST_CASE("every OOM message the simulator prints for torch 2.0 to the newest release reads back to its figures",
          "[advisor][explain]") {
  REQUIRE(sim::kNewestTorchVersion >= 213);
  for (int version = 200; version <= sim::kNewestTorchVersion; ++version) {
    for (bool private_pools : {false, true}) {
      for (bool fraction : {false, true}) {
        sim::OomFigures f = example_figures();
        f.torch_version = version;
        f.cached_in_private_pools = private_pools ? 46ull << 20 : 0;
        f.memory_fraction_set = fraction;
        f.allowed_bytes = fraction ? 12ull << 30 : 0;
        std::string text = sim::current_oom_message(f);
        INFO("torch " << version << ": " << text);
        std::optional<OomMessageFigures> read = read_oom_message(text);
        REQUIRE(read);
        CHECK(read->format == (version <= 200   ? OomMessageFormat::Legacy
                               : version == 201 ? OomMessageFormat::Torch21
                                                : OomMessageFormat::Current));
        CHECK(near(read->alloc_size, f.alloc_size));
        CHECK(near(read->device_total, f.device_total));
        CHECK(near(read->device_free, f.device_free));
        CHECK(near(read->reserved, f.reserved_bytes, 2));
        uint64_t pools = version >= 204 ? f.cached_in_private_pools : 0;
        CHECK(near(read->in_private_pools, pools));
        CHECK(near(read->allocated_by_pytorch, f.allocated_bytes + pools));
        // The legacy text prints the fraction (placement per spec §5.4); 2.1-2.4 compute it but do not print it.
        bool printed_fraction = fraction && (version <= 200 || version >= 205);
        CHECK(read->allowed_bytes.has_value() == printed_fraction);
        if (version >= 201) {
          REQUIRE(read->processes.size() == 1);
          CHECK(read->processes[0].this_process);
          CHECK(near(read->processes[0].bytes, f.process_in_use));
        }
      }
    }
  }
}

TEST_CASE("the legacy message of torch 1.10-2.0 reads back to its figures", "[advisor][explain]") {
  sim::OomFigures f = example_figures();
  f.device_index = 3;
  std::optional<OomMessageFigures> read = read_oom_message("RuntimeError: " + sim::legacy_oom_message(f));
  REQUIRE(read);
  CHECK(read->format == OomMessageFormat::Legacy);
  CHECK(read->device_index == 3);
  CHECK(near(read->allocated_by_pytorch, f.allocated_bytes));
  CHECK(near(read->reserved, f.reserved_bytes));
  // The difference of two values printed in GiB: within two GiB half-hundredths.
  CHECK(std::fabs(static_cast<double>(read->reserved_unallocated) -
                  static_cast<double>(f.reserved_bytes - f.allocated_bytes)) <= 2 * 1073741824.0 / 200);
}

TEST_CASE("a message without NVML has no process lines and still reads", "[advisor][explain]") {
  sim::OomFigures f = example_figures();
  f.nvml_available = false;
  std::optional<OomMessageFigures> read = read_oom_message(sim::current_oom_message(f));
  REQUIRE(read);
  CHECK(read->processes.empty());
  CHECK(near(read->reserved, f.reserved_bytes, 2));
}

TEST_CASE("a torch 2.2+ message quoted in pytorch/pytorch#16417 reads to its printed numbers", "[advisor][explain]") {
  // https://github.com/pytorch/pytorch/issues/16417 (comment of 2024-03-13), wrapped as a log would.
  const std::string text =
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of\n"
      "23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has 23.60 GiB memory in use. "
      "Of the allocated memory 22.90 GiB is allocated by PyTorch, and 194.87 MiB is reserved by PyTorch but "
      "unallocated. If reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
      "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";
  std::optional<OomMessageFigures> read = read_oom_message(text);
  REQUIRE(read);
  CHECK(read->format == OomMessageFormat::Current);
  CHECK(read->alloc_size == 22ull << 20);
  CHECK(near(read->device_total, static_cast<uint64_t>(23.65 * 1073741824.0)));
  CHECK(near(read->reserved_unallocated, static_cast<uint64_t>(194.87 * 1048576.0)));
}

TEST_CASE("the torch 2.1 message with its 'capacty' typo, from kerrj/lerf#73, reads", "[advisor][explain]") {
  // https://github.com/kerrj/lerf/issues/73 (2024-02-01)
  std::optional<OomMessageFigures> read = read_oom_message(
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. GPU 0 has a total capacty of "
      "23.65 GiB of which 1.66 GiB is free. Including non-PyTorch memory, this process has 20.81 GiB memory in use. Of "
      "the allocated memory 12.09 GiB is allocated by PyTorch, and 4.84 GiB is reserved by PyTorch but unallocated. If "
      "reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See "
      "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF");
  REQUIRE(read);
  CHECK(read->format == OomMessageFormat::Torch21);
  CHECK(read->alloc_size == 3ull << 30);
  CHECK(near(read->reserved, static_cast<uint64_t>((12.09 + 4.84) * 1073741824.0), 2));
}

TEST_CASE("the 1.x 'reserved in total' and the older 'cached' messages read", "[advisor][explain]") {
  // https://github.com/pytorch/pytorch/issues/59778 (2021) and
  // https://github.com/pytorch/pytorch/issues/16417 (its title, 2019).
  std::optional<OomMessageFigures> legacy = read_oom_message(
      "CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total capacity; 781.59 MiB already allocated; "
      "3.03 GiB free; 1.24 GiB reserved in total by PyTorch)");
  REQUIRE(legacy);
  CHECK(legacy->format == OomMessageFormat::Legacy);
  CHECK(near(legacy->reserved, static_cast<uint64_t>(1.24 * 1073741824.0)));
  std::optional<OomMessageFigures> cached = read_oom_message(
      "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB "
      "already allocated; 9.28 GiB free; 4.68 MiB cached)");
  REQUIRE(cached);
  CHECK(cached->format == OomMessageFormat::Cached);
  CHECK(near(cached->reserved_unallocated, static_cast<uint64_t>(4.68 * 1048576.0)));
}

TEST_CASE("a message naming other processes counts them outside this allocator", "[advisor][explain]") {
  // The spec's (§5.2) real example: the own process shows as "Process N" inside a container.
  std::optional<OomMessageFigures> read = read_oom_message(
      "CUDA out of memory. Tried to allocate 546.00 MiB. GPU 0 has a total capacity of 15.77 GiB of which 514.19 MiB "
      "is free. Process 562167 has 15.25 GiB memory in use. Of the allocated memory 13.73 GiB is allocated by "
      "PyTorch, with 46.00 MiB allocated in private pools (e.g., CUDA Graphs), and 736.86 MiB is reserved by PyTorch "
      "but unallocated.");
  REQUIRE(read);
  REQUIRE(read->processes.size() == 1);
  CHECK(read->processes[0].pid == 562167);
  CHECK(read->in_private_pools == 46ull << 20);
  OomExplanation explanation = explain_oom_message(*read);
  CHECK(explanation.other_processes_bytes == 0);  // the one process line is this one: it holds the reserved bytes
  CHECK(std::any_of(explanation.patterns.begin(), explanation.patterns.end(),
                    [](const OomMessagePattern& p) { return p.name == "fragmentation"; }));
}

TEST_CASE("a second process on the GPU is the first pattern named", "[advisor][explain]") {
  std::optional<OomMessageFigures> read = read_oom_message(
      "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 39.39 GiB of which 4.00 MiB is "
      "free. Process 11 has 20.00 GiB memory in use. Including non-PyTorch memory, this process has 19.30 GiB memory "
      "in use. Of the allocated memory 18.50 GiB is allocated by PyTorch, and 10.00 MiB is reserved by PyTorch but "
      "unallocated.");
  REQUIRE(read);
  OomExplanation explanation = explain_oom_message(*read);
  CHECK(explanation.other_processes_bytes == 20ull << 30);
  REQUIRE_FALSE(explanation.patterns.empty());
  CHECK(explanation.patterns.front().name == "other processes");
}

TEST_CASE("a text that is not an allocator OOM message reads as none", "[advisor][explain]") {
  CHECK_FALSE(read_oom_message("RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously "
                               "reported"));
  CHECK_FALSE(read_oom_message("hello"));
  CHECK_FALSE(read_oom_message("CUDA out of memory. Tried to allocate lots"));
}

TEST_CASE("the explanation of a fragmented cache tries expandable segments first", "[advisor][explain]") {
  sim::OomFigures f = example_figures();
  f.alloc_size = 512ull << 20;
  f.allocated_bytes = 10ull << 30;
  f.reserved_bytes = 14ull << 30;
  f.device_free = 200ull << 20;
  f.process_in_use = f.reserved_bytes + (400ull << 20);
  f.device_total = f.reserved_bytes + f.device_free + (400ull << 20);  // a CUDA context outside, nothing else
  OomExplanation explanation = explain_oom_message(*read_oom_message(sim::current_oom_message(f)));
  CHECK(explanation.first_try.find("expandable_segments:True") != std::string::npos);
  CHECK(render_explanation_text(explanation).find("_record_memory_history(max_entries=") != std::string::npos);
}

TEST_CASE("a small cache beside live tensors that fill the device puts capacity first", "[advisor][explain]") {
  // The legacy example of the spec (§5.4): 85% of the device is live tensors, 61 MiB cached.
  OomExplanation explanation = explain_oom_message(*read_oom_message(
      "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 4.00 GiB total capacity; 3.40 GiB already allocated; 0 "
      "bytes free; 3.46 GiB reserved in total by PyTorch)"));
  REQUIRE(explanation.patterns.size() >= 2);
  CHECK(explanation.patterns[0].name == "capacity");
  CHECK(explanation.patterns[1].name == "fragmentation");
}

TEST_CASE("free blocks cached in private pools are named and not counted as live tensors", "[advisor][explain]") {
  // torch 2.4+ (PR #124673) prints the free blocks of private pools (CUDA graphs, and
  // torch.cuda.MemPool, whose blocks live in a private pool too) inside "allocated": here
  // 10.50 GiB, of which 3.00 GiB is free in a pool, on a 16 GiB device. Live tensors hold
  // 7.50 GiB (47%), not enough to call it capacity; the pool is what to look at first.
  std::optional<OomMessageFigures> read = read_oom_message(
      "CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity of 16.00 GiB of which 4.70 GiB is "
      "free. Including non-PyTorch memory, this process has 11.30 GiB memory in use. Of the allocated memory 10.50 GiB "
      "is allocated by PyTorch, with 3.00 GiB allocated in private pools (e.g., CUDA Graphs), and 512.00 MiB is "
      "reserved by PyTorch but unallocated.");
  REQUIRE(read);
  CHECK(read->in_private_pools == 3ull << 30);
  OomExplanation explanation = explain_oom_message(*read);
  REQUIRE_FALSE(explanation.patterns.empty());
  CHECK(explanation.patterns.front().name == "private pools");
  CHECK(std::none_of(explanation.patterns.begin(), explanation.patterns.end(),
                     [](const OomMessagePattern& p) { return p.name == "capacity"; }));
}

TEST_CASE("the ROCm message reads as HIP with its HIP Graphs pools", "[advisor][explain]") {
  // ROCm builds hipify the text: "HIP out of memory", "(e.g., HIP Graphs)" (spec section 5.2).
  std::optional<OomMessageFigures> read = read_oom_message(
      "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 191.98 GiB "
      "of which 1.20 GiB is free. Of the allocated memory 185.00 GiB is allocated by PyTorch, with 1.50 GiB allocated "
      "in private pools (e.g., HIP Graphs), and 3.00 GiB is reserved by PyTorch but unallocated.");
  REQUIRE(read);
  CHECK(read->backend == "HIP");
  CHECK(read->device_index == 1);
  CHECK(read->processes.empty());  // no NVML on ROCm
  CHECK(read->in_private_pools == 3ull << 29);
  CHECK(read->reserved == (185ull << 30) + (3ull << 30));
}
