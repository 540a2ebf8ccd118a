// cuda_replay: replays a trace on a real GPU. --segments makes the simulator's own segment
// cudaMalloc/cudaFree calls and reads cudaMemGetInfo along the way, so the device's real
// footprint (2 MiB pages, the context) is measured against the prediction; --raw makes one
// cudaMalloc per allocation; --context measures the CUDA context alone. Everything but the
// CUDA calls is plain C++ in validate/ (cuda_replay_cli.h), tested in CI without a GPU.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>

#include "validate/cuda_replay_cli.h"

namespace oomcast::validate {
namespace {

std::string cuda_error_text(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
}

// NVML through dlopen, so the program needs neither nvml.h nor libnvidia-ml at build time.
// Only nvmlDeviceGetMemoryInfo's v1 struct is used: its layout has not changed.
class Nvml {
 public:
  Nvml() {
    library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library_) return;
    init_ = reinterpret_cast<int (*)()>(dlsym(library_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<int (*)()>(dlsym(library_, "nvmlShutdown"));
    by_index_ = reinterpret_cast<int (*)(unsigned, void**)>(dlsym(library_, "nvmlDeviceGetHandleByIndex_v2"));
    memory_ = reinterpret_cast<int (*)(void*, Memory*)>(dlsym(library_, "nvmlDeviceGetMemoryInfo"));
    ready_ = init_ && shutdown_ && by_index_ && memory_ && init_() == 0;
  }
  ~Nvml() {
    if (ready_) shutdown_();
    if (library_) dlclose(library_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Used bytes of device `index` (NVML numbering: CUDA_VISIBLE_DEVICES is not applied, so the
  // caller asks only for device 0 with one GPU visible).
  std::optional<uint64_t> used(unsigned index) {
    if (!ready_) return std::nullopt;
    void* device = nullptr;
    Memory memory{};
    if (by_index_(index, &device) != 0 || memory_(device, &memory) != 0) return std::nullopt;
    return memory.used;
  }

 private:
  struct Memory {
    unsigned long long total, free, used;
  };
  void* library_ = nullptr;
  bool ready_ = false;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*by_index_)(unsigned, void**) = nullptr;
  int (*memory_)(void*, Memory*) = nullptr;
};

class CudaDevice : public ReplayDevice {
 public:
  std::optional<uint64_t> malloc(uint64_t bytes, std::string& error) override {
    void* pointer = nullptr;
    cudaError_t status = cudaMalloc(&pointer, bytes);
    if (status != cudaSuccess) {
      error = cuda_error_text(status);
      cudaGetLastError();  // clear the sticky-free error state of a failed allocation
      return std::nullopt;
    }
    return reinterpret_cast<uint64_t>(pointer);
  }
  bool free(uint64_t pointer, std::string& error) override {
    cudaError_t status = cudaFree(reinterpret_cast<void*>(pointer));
    if (status != cudaSuccess) {
      error = cuda_error_text(status);
      return false;
    }
    return true;
  }
  std::optional<uint64_t> used_bytes(std::string& error) override {
    size_t free_bytes = 0, total_bytes = 0;
    cudaError_t status = cudaMemGetInfo(&free_bytes, &total_bytes);
    if (status != cudaSuccess) {
      error = cuda_error_text(status);
      return std::nullopt;
    }
    return static_cast<uint64_t>(total_bytes - free_bytes);
  }
};

class CudaRuntime : public DeviceRuntime {
 public:
  std::optional<std::string> open(ContextMeasurement& m) override {
    const char* loading = std::getenv("CUDA_MODULE_LOADING");
    m.module_loading = loading && *loading ? loading : "unset";
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) return "cudaGetDeviceCount: " + cuda_error_text(status);
    if (count == 0) return "cudaGetDeviceCount found no device";
    m.nvml_used_before_bytes = nvml_.used(0);  // before this process has a context
    if ((status = cudaSetDevice(0)) != cudaSuccess) return "cudaSetDevice(0): " + cuda_error_text(status);
    // cudaFree(nullptr) creates the primary context and does nothing else.
    if ((status = cudaFree(nullptr)) != cudaSuccess) return "creating the context: " + cuda_error_text(status);
    cudaDeviceProp properties{};
    if ((status = cudaGetDeviceProperties(&properties, 0)) != cudaSuccess) {
      return "cudaGetDeviceProperties: " + cuda_error_text(status);
    }
    m.gpu_name = properties.name;
    m.compute_capability = properties.major * 10 + properties.minor;
    cudaRuntimeGetVersion(&m.runtime_version);
    cudaDriverGetVersion(&m.driver_version);
    size_t free_bytes = 0, total_bytes = 0;
    if ((status = cudaMemGetInfo(&free_bytes, &total_bytes)) != cudaSuccess) {
      return "cudaMemGetInfo: " + cuda_error_text(status);
    }
    m.total_bytes = total_bytes;
    m.used_after_init_bytes = total_bytes - free_bytes;
    m.nvml_used_after_bytes = nvml_.used(0);
    return std::nullopt;
  }
  ReplayDevice& device() override { return device_; }

 private:
  Nvml nvml_;
  CudaDevice device_;
};

}  // namespace
}  // namespace oomcast::validate

int main(int argc, char** argv) {
  oomcast::validate::CudaRuntime runtime;
  return oomcast::validate::cuda_replay_main(argc, argv, runtime, std::cout, std::cerr);
}
