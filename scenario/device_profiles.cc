// The device profile table. Totals are cudaMemGetInfo totals, which sit below the marketing
// size (ECC, driver reservations); where a real OOM text or torch.cuda.get_device_properties()
// output was found, that figure is used and cited. Context sizes are estimates.
#include "scenario/device_profiles.h"

#include <algorithm>
#include <cctype>

#include "base/edit_distance.h"
#include "scenario/outside_allocator.h"
#include "sim/allocator_config.h"

namespace oomcast::scenario {

namespace {

constexpr uint64_t kMiB = 1ull << 20;

// ../shared/docs/allocator-spec.md §9: CUBLAS_WORKSPACE_CONFIG default ":4096:2:16:8" = 4096 KiB x 2 +
// 16 KiB x 8 = 8,519,680 B; exactly 32 MiB (":4096:8") when compute capability is 9.0.
constexpr uint64_t kCublasWorkspaceDefault = 8'519'680;
constexpr uint64_t kCublasWorkspaceHopper = 32ull << 20;

// The CUDA context comes from scenario/outside_allocator.yaml (by architecture, CUDA release and
// module loading, every row with its source); the profile keeps ../shared/docs/training-memory-model.md
// §8's 512 MiB only as the fallback when no row matches.
constexpr uint64_t kContext = kDefaultContextBytes;

DeviceProfile gpu(const char* name, const char* display_name, uint64_t total_mib, int capability) {
  DeviceProfile profile;
  profile.name = name;
  profile.display_name = display_name;
  profile.total_bytes = total_mib * kMiB;
  profile.context_bytes = kContext;
  profile.cublas_workspace_bytes = default_cublas_workspace_bytes(capability);
  profile.cublas_workspaces = kTrainingCublasWorkspaces;
  profile.compute_capability = capability;
  return profile;
}

std::vector<DeviceProfile> build_profiles() {
  std::vector<DeviceProfile> profiles = {
      // 79.15 GiB: the total most often printed by OOM texts on 80 GB A100s ("GPU 0 has a total
      // capacity of 79.15 GiB"); ../shared/docs/allocator-spec.md §9 gives 79.10-79.25 GiB for 80 GB parts.
      gpu("a100-80gb", "A100-80GB", 81'050, 80),
      // 39.38 GiB: OOM texts on A100-40GB (../shared/docs/allocator-spec.md §9; a DeepSpeed issue prints
      // "total capacity of 39.38 GiB"). SXM4 boards with other drivers report up to 39.59 GiB
      // (get_device_properties: 40536MB).
      gpu("a100-40gb", "A100-40GB", 40'325, 80),
      // get_device_properties() of "NVIDIA H100 80GB HBM3" (torch 2.7, CUDA 12.8):
      // total_memory=81089MB = 79.19 GiB, inside the 79.10-79.25 GiB range of OOM texts.
      gpu("h100-80gb", "H100-80GB", 81'089, 90),
      // get_device_properties() of "NVIDIA H200" (vLLM log): total_memory=143156MB = 139.80 GiB.
      gpu("h200", "H200", 143'156, 90),
      // Estimate: L4 has 24 GB GDDR6 with ECC on by default. OOM texts from 24 GB datacenter
      // cards with ECC print 22.03-22.06 GiB; we take 22.03 GiB. Not confirmed for an L4.
      gpu("l4", "L4", 22'559, 89),
      // get_device_properties() of "Tesla T4" on Colab: total_memory=15109MB = 14.75 GiB, the
      // capacity Colab OOM texts print.
      gpu("t4", "T4", 15'109, 75),
      // 15.77 GiB: OOM texts on 16 GB cards (../shared/docs/allocator-spec.md §9); V100-SXM2-16GB properties
      // show 16130-16160MB (15.75-15.78 GiB).
      gpu("v100-16gb", "V100-16GB", 16'149, 70),
      // 31.75 GiB: OOM texts from V100 32 GB jobs ("31.75 GiB total capacity").
      gpu("v100-32gb", "V100-32GB", 32'512, 70),
      // get_device_properties() of "GeForce RTX 3090": total_memory=24268MB = 23.70 GiB
      // (Hugging Face docs); inside the 23.6-23.7 GiB range of OOM texts.
      gpu("rtx-3090", "RTX 3090", 24'268, 86),
      // 23.68 GiB: an OOM text from an RTX 4090 ("23.68 GiB total capacity", CogVideo #36).
      // One WSL setup reported total_memory=24563MB; we keep the OOM-text figure.
      gpu("rtx-4090", "RTX 4090", 24'248, 89),
      // get_device_properties() of "NVIDIA A10G" (AWS g5): total_memory=22587MB = 22.06 GiB.
      gpu("a10g", "A10G", 22'587, 86),
      // 44.42 GiB: an OOM text from an 8 x L40S job ("GPU has a total capacity of 44.42 GiB",
      // stepfun-ai/Step-Video-T2V #8); 48 GB GDDR6 with ECC on.
      gpu("l40s", "L40S", 45'486, 89),
      // "Total Global Memory: 178.35 GB" (GiB) from cudaGetDeviceProperties of an "NVIDIA B200",
      // compute capability 10.0 (pytorch/ao #4002). Its cuBLAS workspace is taken as the
      // pre-Hopper default: the size torch picks on sm100 is not verified here.
      gpu("b200", "B200", 182'630, 100),
      // "GPU 0 has a total capacity of 93.00 GiB" on an H100 NVL 94GB (ali-vilab/VACE #56).
      gpu("h100-nvl", "H100 NVL", 95'232, 90),
      // "GPU has a total capacity of 95.00 GiB" on an H20 96GB (modelscope/DiffSynth-Studio #1238).
      gpu("h20", "H20", 97'280, 90),
      // "GPU 0 has a total capacity of 31.37 GiB" on an RTX 5090 32GB (Wan-Video/Wan2.1 #465).
      gpu("rtx-5090", "RTX 5090", 32'123, 120),
      // "GPU 0 has a total capacity of 44.43 GiB" on an RTX 6000 Ada, nvidia-smi 46068MiB with ECC
      // on (DINGYANB/MTVCrafter #21).
      gpu("rtx-6000-ada", "RTX 6000 Ada", 45'496, 89),
      // Estimate: RTX A6000 48 GB GDDR6, ECC off by default (nvidia-smi 49,140 MiB), less the
      // ~0.55 GiB the RTX 6000 Ada's driver keeps back: 47.54 GiB. Not confirmed by an OOM text.
      gpu("a6000", "RTX A6000", 48'681, 86),
      // Estimate: A40 48 GB GDDR6 with ECC on by default, as the L40S and RTX 6000 Ada (nvidia-smi
      // 46,068 MiB): the L40S's 44.42 GiB. Not confirmed by an OOM text.
      gpu("a40", "A40", 45'486, 86),
  };
  // Host link and compute peak, for the offload-cost estimate (planner/timing/offload_cost.cc).
  // host_link_gbps is the *effective* host<->device copy bandwidth of pinned memory, below
  // the link's theoretical rate: PCIe 3.0 x16 is 15.75 GB/s theoretical, ~12 GB/s measured;
  // PCIe 4.0 x16 31.5 GB/s theoretical, ~25 GB/s measured (A100, L4, A10G, RTX 30/40);
  // PCIe 5.0 x16 63 GB/s theoretical, ~50 GB/s measured (H100/H200 SXM hosts), as reported
  // by cudaMemcpy bandwidth tests. peak_tflops: dense bf16 (fp16 before sm_80) tensor-core
  // peak from NVIDIA's data sheets (A100 312, H100/H200 SXM 989, L4 121, T4 65, V100 125,
  // RTX 3090 71, RTX 4090 165, A10G ~70 as the A10's 125 scaled by AWS's lower clocks).
  struct LinkAndPeak {
    const char* name;
    double host_link_gbps;
    double peak_tflops;
  };
  const LinkAndPeak kLinks[] = {
      {"a100-80gb", 25.0, 312.0}, {"a100-40gb", 25.0, 312.0}, {"h100-80gb", 50.0, 989.0},
      {"h200", 50.0, 989.0},      {"l4", 25.0, 121.0},        {"t4", 12.0, 65.0},
      {"v100-16gb", 12.0, 125.0}, {"v100-32gb", 12.0, 125.0}, {"rtx-3090", 25.0, 71.0},
      {"rtx-4090", 25.0, 165.0},  {"a10g", 25.0, 70.0},       {"l40s", 25.0, 362.0},
      // PCIe 5.0 hosts (B200, H100 NVL, H20, RTX 5090) ~50 GB/s, PCIe 4.0 ~25 GB/s; dense bf16
      // peaks as in the throughput table below.
      {"b200", 50.0, 2250.0},     {"h100-nvl", 50.0, 835.0},  {"h20", 50.0, 148.0},
      {"rtx-5090", 50.0, 209.5},  {"rtx-6000-ada", 25.0, 364.2}, {"a6000", 25.0, 154.8},
      {"a40", 25.0, 149.7}};
  for (DeviceProfile& profile : profiles) {
    for (const LinkAndPeak& link : kLinks) {
      if (profile.name == link.name) {
        profile.host_link_gbps = link.host_link_gbps;
        profile.peak_tflops = link.peak_tflops;
      }
    }
  }
  // Step-time figures (planner/timing/step_time.h), dense (no sparsity), from NVIDIA's data sheets and
  // architecture whitepapers: A100 data sheet (FP32 19.5, TF32 156, BF16/FP16 312 TFLOP/s;
  // HBM2e 2,039 GB/s on 80GB SXM, 1,555 GB/s on 40GB; NVLink 600 GB/s = 300 per direction);
  // H100 SXM5 data sheet (FP32 67, TF32 494.7, BF16/FP16 989.4; HBM3 3.35 TB/s; NVLink 900 GB/s);
  // H200 SXM data sheet (the H100's compute, HBM3e 4.8 TB/s, NVLink 900 GB/s); L4 data sheet
  // (FP32 30.3, TF32 60, BF16/FP16 121; 300 GB/s; PCIe only); T4 data sheet (FP32 8.1, FP16
  // 65, no TF32/BF16; 320 GB/s); V100 SXM2 data sheet (FP32 15.7, FP16 125, no TF32/BF16;
  // 900 GB/s; NVLink 300 GB/s); GA102 whitepaper, RTX 3090 (FP32 35.6, TF32 35.6, FP16/BF16
  // with FP32 accumulate 71; 936 GB/s); AD102 whitepaper, RTX 4090 (FP32 82.6, TF32 82.6,
  // FP16/BF16 with FP32 accumulate 165.2; 1,008 GB/s); A10 data sheet (FP32 31.2, TF32 62.5,
  // BF16 125, 600 GB/s) with the A10G's tensor peaks at AWS's lower clocks (~70, as above).
  // GPU-to-GPU is per direction: half the NVLink total, or the PCIe host link for cards without
  // NVLink (a consumer NVLink bridge is not assumed). Between nodes each GPU gets its NIC: DGX
  // A100 has one 200 Gb/s HDR port per GPU (25 GB/s), DGX H100 one 400 Gb/s NDR port (50 GB/s),
  // DGX-1 (V100) four 100 Gb/s ports for eight GPUs (6.25 GB/s); other cards are taken to sit
  // in cloud nodes with 100 Gb/s per GPU (12.5 GB/s), an assumption.
  struct Throughput {
    const char* name;
    DeviceThroughput figures;  // fp32, tf32, bf16, fp16 TFLOP/s; HBM, GPU-GPU, inter-node GB/s
  };
  const Throughput kThroughputs[] = {
      {"a100-80gb", {19.5, 156.0, 312.0, 312.0, 2039.0, 300.0, 25.0}},
      {"a100-40gb", {19.5, 156.0, 312.0, 312.0, 1555.0, 300.0, 25.0}},
      {"h100-80gb", {67.0, 494.7, 989.4, 989.4, 3350.0, 450.0, 50.0}},
      {"h200", {67.0, 494.7, 989.4, 989.4, 4800.0, 450.0, 50.0}},
      {"l4", {30.3, 60.0, 121.0, 121.0, 300.0, 25.0, 12.5}},
      {"t4", {8.1, 0.0, 0.0, 65.0, 320.0, 12.0, 12.5}},
      {"v100-16gb", {15.7, 0.0, 0.0, 125.0, 900.0, 150.0, 6.25}},
      {"v100-32gb", {15.7, 0.0, 0.0, 125.0, 900.0, 150.0, 6.25}},
      {"rtx-3090", {35.6, 35.6, 71.0, 71.0, 936.0, 25.0, 12.5}},
      {"rtx-4090", {82.6, 82.6, 165.2, 165.2, 1008.0, 25.0, 12.5}},
      {"a10g", {31.2, 35.0, 70.0, 70.0, 600.0, 25.0, 12.5}},
      // L40S data sheet: FP32 91.6, TF32 183, BF16/FP16 362 TFLOP/s dense; GDDR6 864 GB/s; PCIe
      // 4.0 x16, no NVLink.
      {"l40s", {91.6, 183.0, 362.0, 362.0, 864.0, 25.0, 12.5}},
      // B200: HGX B200 data sheet per GPU, dense (FP32 75, TF32 1,100, BF16/FP16 2,250 TFLOP/s;
      // NVLink 5 1.8 TB/s = 900 per direction); HBM3e 7.67 TB/s as measured from the bus width
      // and memory clock (pytorch/ao #4002, which also takes bf16 2.25e15).
      {"b200", {75.0, 1100.0, 2250.0, 2250.0, 7672.0, 900.0, 50.0}},
      // H100 NVL data sheet (per GPU, halving the sparsity figures): FP32 60, TF32 417.5,
      // BF16/FP16 835.5; HBM3 3.9 TB/s; NVLink bridge 600 GB/s = 300 per direction.
      {"h100-nvl", {60.0, 417.5, 835.5, 835.5, 3900.0, 300.0, 12.5}},
      // H20 as its published specification lists it: FP32 44, TF32 74, BF16/FP16 148 TFLOP/s
      // dense; HBM3 4.0 TB/s; NVLink 900 GB/s = 450 per direction.
      {"h20", {44.0, 74.0, 148.0, 148.0, 4000.0, 450.0, 50.0}},
      // GB202 (Blackwell) whitepaper, RTX 5090: FP32 104.8, TF32 104.8, FP16/BF16 with FP32
      // accumulate 209.5; GDDR7 1,792 GB/s; PCIe 5.0, no NVLink.
      {"rtx-5090", {104.8, 104.8, 209.5, 209.5, 1792.0, 50.0, 12.5}},
      // RTX 6000 Ada data sheet: FP32 91.1, TF32 182.1, FP16/BF16 364.2 dense (1,457 FP8 with
      // sparsity / 4); 960 GB/s; PCIe 4.0, no NVLink.
      {"rtx-6000-ada", {91.1, 182.1, 364.2, 364.2, 960.0, 25.0, 12.5}},
      // RTX A6000 data sheet: FP32 38.7, TF32 77.4, FP16/BF16 154.8 dense (309.7 with sparsity);
      // 768 GB/s; NVLink bridge 112.5 GB/s = 56.25 per direction.
      {"a6000", {38.7, 77.4, 154.8, 154.8, 768.0, 56.25, 12.5}},
      // A40 data sheet: FP32 37.4, TF32 74.8, FP16/BF16 149.7 dense (299.4 with sparsity); 696
      // GB/s; NVLink bridge 112.5 GB/s = 56.25 per direction.
      {"a40", {37.4, 74.8, 149.7, 149.7, 696.0, 56.25, 12.5}},
  };
  for (DeviceProfile& profile : profiles) {
    for (const Throughput& row : kThroughputs) {
      if (profile.name == row.name) profile.throughput = row.figures;
    }
  }
  // Streaming multiprocessors, for GEMM wave quantization (planner/timing/op_cost_gemm.h): A100
  // whitepaper 108; H100 SXM5 data sheet 132 (H200 the same GH100); L4 (AD104) 58; T4 (TU104)
  // 40; V100 SXM2 80; RTX 3090 (GA102) 82; RTX 4090 (AD102) 128; A10G 80 (the GA102 of AWS's G5,
  // 10,240 CUDA cores at 128 per SM: an assumption, NVIDIA publishes no A10G sheet); L40S 142.
  struct SmCount {
    const char* name;
    int sms;
  };
  const SmCount kSmCounts[] = {{"a100-80gb", 108}, {"a100-40gb", 108}, {"h100-80gb", 132}, {"h200", 132},
                               {"l4", 58},         {"t4", 40},         {"v100-16gb", 80},  {"v100-32gb", 80},
                               {"rtx-3090", 82},   {"rtx-4090", 128},  {"a10g", 80},       {"l40s", 142},
                               // B200 148 (pytorch/ao #4002's device query); H100 NVL 132; H20 78
                               // (reported, no NVIDIA sheet); RTX 5090 170 (GB202 whitepaper); RTX
                               // 6000 Ada 142; RTX A6000 84; A40 84 (GA102 data sheets).
                               {"b200", 148},      {"h100-nvl", 132},  {"h20", 78},        {"rtx-5090", 170},
                               {"rtx-6000-ada", 142}, {"a6000", 84},   {"a40", 84}};
  for (DeviceProfile& profile : profiles) {
    for (const SmCount& row : kSmCounts) {
      if (profile.name == row.name) profile.throughput.sm_count = row.sms;
    }
  }
  // cpu: no caching allocator, no rounding, no cuBLAS workspace, no context. Capacity is
  // effectively unlimited (the verdict is about GPUs); set device.total_gib to check a bound.
  DeviceProfile cpu;
  cpu.name = "cpu";
  cpu.display_name = "cpu";
  cpu.total_bytes = 1ull << 60;
  cpu.is_cpu = true;
  profiles.push_back(cpu);
  return profiles;
}

std::string normalized(std::string_view name) {
  std::string result;
  for (char c : name) {
    if (c == '-' || c == '_' || c == ' ') continue;
    result += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return result;
}

}  // namespace

uint64_t default_cublas_workspace_bytes(int compute_capability) {
  return compute_capability == 90 ? kCublasWorkspaceHopper : kCublasWorkspaceDefault;
}

const std::vector<DeviceProfile>& device_profiles() {
  static const std::vector<DeviceProfile> profiles = build_profiles();
  return profiles;
}

std::vector<std::string> device_profile_names() {
  std::vector<std::string> names;
  for (const auto& profile : device_profiles()) names.push_back(profile.name);
  return names;
}

const DeviceProfile* find_device_profile(std::string_view name) {
  std::string wanted = normalized(name);
  for (const auto& profile : device_profiles()) {
    if (normalized(profile.name) == wanted) return &profile;
  }
  return nullptr;
}

std::string device_did_you_mean(std::string_view name) {
  std::string wanted = normalized(name);
  std::vector<std::string> prefixed;
  for (const auto& profile : device_profiles()) {
    if (!wanted.empty() && normalized(profile.name).rfind(wanted, 0) == 0) prefixed.push_back(profile.name);
  }
  if (prefixed.size() == 1) return " (did you mean '" + prefixed[0] + "'?)";
  if (prefixed.size() > 1) {
    std::string list;
    for (const auto& candidate : prefixed) list += (list.empty() ? "" : ", ") + candidate;
    return " (did you mean one of " + list + "?)";
  }
  // A typo keeps the model number (the series letter the name starts with and the first run
  // of digits): 'l40s' is not a misspelt 'l4', nor 'rtx3090' an 'rtx-4090', nor 'b200' an 'h200'.
  auto model_number = [](std::string_view text) {
    size_t start = 0;
    char letter = 0;
    while (start < text.size() && !std::isdigit(static_cast<unsigned char>(text[start]))) {
      if (letter == 0 && std::isalpha(static_cast<unsigned char>(text[start]))) {
        letter = static_cast<char>(std::tolower(text[start]));
      }
      ++start;
    }
    size_t end = start;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    return std::string(1, letter) + std::string(text.substr(start, end - start));
  };
  std::vector<std::string> same_model;
  for (const auto& candidate : device_profile_names()) {
    if (model_number(candidate) == model_number(name)) same_model.push_back(candidate);
  }
  std::string suggestion = did_you_mean(name, same_model);
  if (!suggestion.empty()) return suggestion;
  if (same_model.size() == 1) return " (did you mean '" + same_model[0] + "'?)";
  if (!same_model.empty()) {
    std::string list;
    for (const auto& candidate : same_model) list += (list.empty() ? "" : ", ") + candidate;
    return " (did you mean one of " + list + "?)";
  }
  return " (no profile for that GPU: describe it as device: {total_gib: N, compute_capability: X.Y})";
}

DeviceConfig device_config_from_profile(const DeviceProfile& profile) {
  DeviceConfig config;
  config.profile = profile.name;
  config.display_name = profile.display_name;
  config.model.total_bytes = profile.total_bytes;
  config.model.context_bytes = profile.context_bytes;
  config.cublas_workspace_bytes = profile.cublas_workspace_bytes;
  config.cublas_workspaces = profile.cublas_workspaces;
  config.is_cpu = profile.is_cpu;
  config.compute_capability = profile.compute_capability;
  config.host_link_gbps = profile.host_link_gbps;
  config.peak_tflops = profile.peak_tflops;
  config.throughput = profile.throughput;
  // The context and cuBLAS workspace of the default torch release (a scenario's own release
  // and keys are applied again by the loader).
  resolve_outside_allocator({}, sim::kDefaultTorchVersion, config);
  return config;
}

}  // namespace oomcast::scenario
