// torch.autocast's op lists, per device and release: which ops run in the low dtype ("lower"),
// which in fp32, and which follow their inputs. The catalogue's ops (softmax, layer_norm,
// cross_entropy) and a graph file's generic ops both ask here, so a CPU job gets the CPU lists.
// Source: aten/src/ATen/autocast_mode.cpp (TORCH_LIBRARY_IMPL(aten, AutocastCUDA/AutocastCPU));
// measured for torch 2.13 on the CPU by validate/op_probe.py --table (validate/op_facts/).
#pragma once

#include <cstdint>
#include <string_view>

namespace oomcast::planner {

enum class AutocastClass : uint8_t { None, Lower, Fp32 };

enum class AutocastDevice : uint8_t { Cuda, Cpu };

// The class of the aten op `name` (base name: "softmax", "layer_norm", "conv_transpose2d") under
// autocast on `device` in release `torch_version` (100 * major + minor).
AutocastClass autocast_class(std::string_view name, AutocastDevice device, int torch_version);

const char* autocast_class_name(AutocastClass autocast);

}  // namespace oomcast::planner
