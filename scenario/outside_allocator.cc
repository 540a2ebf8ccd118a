// The table lookups of scenario/outside_allocator_table.h applied to one scenario's device.
#include "scenario/outside_allocator.h"

#include <fmt/format.h>

#include "scenario/device_profiles.h"
#include "scenario/outside_allocator_table.h"

namespace oomcast::scenario {

namespace {

std::string architecture_text(int capability) { return fmt::format("sm_{}", capability); }

std::string row_citation(const TableRowOrigin& origin) {
  return fmt::format("scenario/outside_allocator.yaml {} row {} ({}): {}", origin.section, origin.row, origin.kind,
                     origin.source);
}

}  // namespace

void resolve_outside_allocator(const OutsideAllocatorRequest& request, sim::TorchVersion torch_version,
                               DeviceConfig& device) {
  if (device.is_cpu) return;
  const OutsideAllocatorTable& table = outside_allocator_table();
  std::string cuda_origin = "device.cuda_version";
  if (request.cuda_version) {
    device.cuda_version = *request.cuda_version;
  } else {
    auto release = table.default_cuda(torch_version);
    device.cuda_version = release.value_or(1204);
    cuda_origin = "the default wheel of torch " + release_text(torch_version);
  }
  if (request.module_loading) {
    device.module_loading = *request.module_loading;
  } else {
    device.module_loading = module_loading_name(
        table.default_loading(torch_version, device.cuda_version).value_or(ModuleLoading::Eager));
  }
  ModuleLoading loading = device.module_loading == "lazy" ? ModuleLoading::Lazy : ModuleLoading::Eager;
  std::string lookup = fmt::format("{}, CUDA {} ({}), {} module loading", architecture_text(device.compute_capability),
                                   release_text(device.cuda_version), cuda_origin, device.module_loading);
  if (request.context_given) {
    device.cuda_context_bytes = device.model.context_bytes;  // read_device already applied it
    device.context_source = "scenario: device.context_mib";
  } else if (const ContextRow* row =
                 table.find_context(device.compute_capability, torch_version, device.cuda_version, loading)) {
    device.cuda_context_bytes = row->bytes;
    device.context_source = row_citation(row->origin) + " [looked up for " + lookup + "]";
  } else {
    device.cuda_context_bytes = kDefaultContextBytes;
    device.context_source = "no row of scenario/outside_allocator.yaml matches " + lookup + "; the 512 MiB default";
  }
  device.model.context_bytes = device.cuda_context_bytes;
  if (request.cublas_workspace_bytes) {
    device.cublas_workspace_bytes = *request.cublas_workspace_bytes;
  } else if (const CublasWorkspaceRow* row = table.find_cublas_workspace(device.compute_capability, torch_version)) {
    device.cublas_workspace_bytes = row->bytes;
  }
}

void apply_outside_allocator(const YamlNode& device_node, sim::TorchVersion torch_version, DeviceConfig& device) {
  if (device.is_cpu) return;
  // child() of a scalar or missing section is a missing key, so `device: h200` has none.
  OutsideAllocatorRequest request;
  YamlNode cuda_node = device_node.child("cuda_version");
  if (!cuda_node.is_missing()) {
    auto release = parse_release(cuda_node.as_string());
    if (!release || *release < 900) {
      cuda_node.fail("'device.cuda_version' must be a CUDA release such as \"12.4\" (9.0 or later), got '" +
                     cuda_node.as_string() + "'");
    }
    request.cuda_version = *release;
  }
  YamlNode loading_node = device_node.child("module_loading");
  if (!loading_node.is_missing()) request.module_loading = loading_node.as_choice({"lazy", "eager"});
  request.context_given = !device_node.child("context_mib").is_missing();
  YamlNode explicit_bytes = device_node.child("cublas_workspace_bytes");
  YamlNode config_node = device_node.child("cublas_workspace_config");
  if (!config_node.is_missing()) {
    if (!explicit_bytes.is_missing()) {
      config_node.fail("give 'device.cublas_workspace_config' or 'device.cublas_workspace_bytes', not both");
    }
    auto bytes = cublas_workspace_config_bytes(config_node.as_string());
    if (!bytes) {
      config_node.fail("'device.cublas_workspace_config' must be CUBLAS_WORKSPACE_CONFIG text such as \":4096:8\" "
                       "(:SIZE_KiB:COUNT pairs), got '" + config_node.as_string() + "'");
    }
    request.cublas_workspace_bytes = *bytes;
  } else if (!explicit_bytes.is_missing()) {
    request.cublas_workspace_bytes = device.cublas_workspace_bytes;  // read_device already applied it
  }
  resolve_outside_allocator(request, torch_version, device);
}

}  // namespace oomcast::scenario
