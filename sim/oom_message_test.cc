// The OOM texts byte for byte, and format_size's thresholds (spec §5).
#include "sim/oom_message.h"

#include <catch2/catch.hpp>

using namespace oomcast::sim;

TEST_CASE("format_size switches unit at inclusive thresholds", "[sim][oom]") {
  CHECK(format_size(0) == "0 bytes");
  CHECK(format_size(1024) == "1024 bytes");
  CHECK(format_size(1536) == "1.50 KiB");
  CHECK(format_size(1048576) == "1024.00 KiB");
  CHECK(format_size(20ull << 20) == "20.00 MiB");
  CHECK(format_size(1ull << 30) == "1024.00 MiB");
  CHECK(format_size(4831838208ull) == "4.50 GiB");
}

TEST_CASE("the current OOM message matches PyTorch 2.2+ byte for byte", "[sim][oom]") {
  OomFigures f;
  f.alloc_size = 546ull << 20;
  f.device_total = 16934436864ull;  // 15.77 GiB
  f.device_free = 539164672ull;     // 514.19 MiB
  f.process_in_use = 16374562816ull;  // 15.25 GiB
  f.allocated_bytes = 14742363750ull;  // 13.73 GiB
  f.reserved_bytes = 14742363750ull + 772657152ull;  // + 736.86 MiB
  CHECK(current_oom_message(f) ==
        "CUDA out of memory. Tried to allocate 546.00 MiB. GPU 0 has a total capacity of 15.77 GiB of which "
        "514.19 MiB is free. Including non-PyTorch memory, this process has 15.25 GiB memory in use. Of the "
        "allocated memory 13.73 GiB is allocated by PyTorch, and 736.86 MiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
        "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
}

TEST_CASE("the legacy OOM message matches PyTorch 1.10-2.0", "[sim][oom]") {
  OomFigures f;
  f.alloc_size = 20ull << 20;
  f.device_total = 4ull << 30;
  f.allocated_bytes = 3650722201ull;  // 3.40 GiB
  f.device_free = 0;
  f.reserved_bytes = 3715146711ull;   // 3.46 GiB
  CHECK(legacy_oom_message(f) ==
        "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 4.00 GiB total capacity; 3.40 GiB already "
        "allocated; 0 bytes free; 3.46 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
        "memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management "
        "and PYTORCH_CUDA_ALLOC_CONF");
}

TEST_CASE("the OOM message names the allowed bytes when a memory fraction is set", "[sim][oom]") {
  OomFigures f;
  f.alloc_size = 2ull << 20;
  f.device_total = 1ull << 30;
  f.memory_fraction_set = true;
  f.allowed_bytes = 512ull << 20;
  CHECK(current_oom_message(f).find("memory in use. 512.00 MiB allowed; Of the allocated") != std::string::npos);
}

TEST_CASE("from 2.11 the expandable hint is left out when expandable segments are on", "[sim][oom]") {
  OomFigures f;
  f.expandable_segments = true;
  f.torch_version = 211;
  CHECK(current_oom_message(f).find("expandable_segments:True to avoid") == std::string::npos);
  f.torch_version = 206;
  CHECK(current_oom_message(f).find("expandable_segments:True to avoid") != std::string::npos);
}

TEST_CASE("torch 2.1 prints its own text, typo and max_split_size_mb hint included", "[sim][oom]") {
  OomFigures f;
  f.alloc_size = 20ull << 20;
  f.device_total = 16ull << 30;
  f.allocated_bytes = 1ull << 30;
  f.reserved_bytes = 2ull << 30;
  f.torch_version = 201;
  std::string text = current_oom_message(f);
  CHECK(text.find("has a total capacty of") != std::string::npos);
  CHECK(text.find("try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
                  "Management and PYTORCH_CUDA_ALLOC_CONF") != std::string::npos);
  CHECK(text.find("expandable_segments") == std::string::npos);
}

TEST_CASE("torch 2.0 and earlier print the legacy text", "[sim][oom]") {
  OomFigures f;
  f.alloc_size = 20ull << 20;
  f.device_total = 16ull << 30;
  f.allocated_bytes = 1ull << 30;
  f.reserved_bytes = 2ull << 30;
  f.torch_version = 200;
  CHECK(current_oom_message(f) == legacy_oom_message(f));
}

TEST_CASE("from 2.4 the OOM message counts the free blocks cached in private pools as allocated", "[sim][oom]") {
  // The real message quoted in the spec (§5.2): 46 MiB cached in private pools.
  OomFigures f;
  f.alloc_size = 546ull << 20;
  f.device_total = 16934436864ull;
  f.device_free = 539164672ull;
  f.process_in_use = 16374562816ull;
  f.cached_in_private_pools = 46ull << 20;
  f.allocated_bytes = 14742363750ull - f.cached_in_private_pools;
  f.reserved_bytes = 14742363750ull + 772657152ull;
  CHECK(current_oom_message(f).find("Of the allocated memory 13.73 GiB is allocated by PyTorch, with 46.00 MiB "
                                    "allocated in private pools (e.g., CUDA Graphs), and 736.86 MiB is reserved by "
                                    "PyTorch but unallocated.") != std::string::npos);
  f.torch_version = 203;
  CHECK(current_oom_message(f).find("Of the allocated memory 13.68 GiB is allocated by PyTorch, and 782.86 MiB is "
                                    "reserved") != std::string::npos);
}
