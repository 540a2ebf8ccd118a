// add_device_flags(); see device_flags.h.
#include "cli/device_flags.h"


namespace oomcast::cli {

void add_device_flags(CLI::App* command, DeviceFlags* flags, bool with_fraction) {
  command->add_option("--device", flags->profile,
                      "the GPU it runs on, a profile as in scenarios (a100-80gb, h100-80gb, ...): its total and "
                      "its CUDA context");
  command->add_option("--device-memory", flags->device_memory,
                      "GPU memory, e.g. 80GiB: would it fit, and where would it OOM; the CUDA context is counted "
                      "(default: unlimited)");
  command->add_option("--context-memory", flags->context_memory,
                      "memory held outside the allocator (CUDA context, other processes), e.g. 500MiB "
                      "(default: the CUDA context of the device)");
  if (with_fraction) {
    command->add_option("--memory-fraction", flags->memory_fraction, "torch.cuda.set_per_process_memory_fraction");
  }
}

}  // namespace oomcast::cli
