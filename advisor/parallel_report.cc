// Renders ParallelSummary. Sizes use GiB like the rest of the text report; the offload line
// says "estimate" because neither PCIe efficiency nor MFU is measured.
#include "advisor/parallel_report.h"

#include <fmt/format.h>

namespace oomcast::advisor {

using planner::ModelStateBytes;
using planner::OffloadCost;
using planner::ParallelSummary;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / kGiB); }
std::string mib(uint64_t bytes) { return fmt::format("{:.0f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

}  // namespace

std::string parallel_text(const Prediction& prediction) {
  const ParallelSummary& p = prediction.parallel;
  if (!p.enabled) {
    std::string warnings;
    for (const auto& warning : p.warnings) warnings += "warning   " + warning + "\n";
    return warnings;
  }
  const ModelStateBytes& m = p.model_states;
  std::string text = fmt::format("parallel  {}; one rank planned; NCCL buffers {} outside the allocator (counted with the context)\n",
                                 p.description, mib(p.nccl_buffer_bytes));
  text += fmt::format("per rank  model states: params {}, grads {}, optimizer {}", gib(m.parameters), gib(m.gradients),
                      gib(m.optimizer));
  if (m.gathered_working_set > 0) text += fmt::format(", largest gathered module/unit + its grads {}", gib(m.gathered_working_set));
  text += "\n";
  if (p.host_bytes > 0) {
    text += fmt::format("host RAM  {} per rank ({}), {} per node of {} ranks; {} while a node's ranks build the model\n",
                        gib(p.host_bytes), p.host_pinned ? "pinned" : "pageable", gib(p.host_bytes_per_node),
                        p.gpus_per_node, gib(p.host_load_peak_per_node));
  } else {
    text += fmt::format("host RAM  no offloaded states; {} per node while its {} ranks build the model\n",
                        gib(p.host_load_peak_per_node), p.gpus_per_node);
  }
  if (p.offloads) {
    const OffloadCost& c = p.offload;
    text += fmt::format("offload   estimate: {} host->GPU + {} GPU->host per step", gib(c.host_to_device_bytes),
                        gib(c.device_to_host_bytes));
    if (c.host_link_gbps > 0.0) text += fmt::format(" over {:.0f} GB/s = {:.2f} s", c.host_link_gbps, c.transfer_seconds);
    if (c.compute_seconds > 0.0) {
      text += fmt::format(" vs ~{:.2f} s compute (6 FLOPs/param/token at MFU {:.1f})", c.compute_seconds,
                          c.model_flops_utilization);
    }
    text += "\n";
  }
  for (const auto& warning : p.warnings) text += "warning   " + warning + "\n";
  return text;
}

void add_parallel_json(const Prediction& prediction, nlohmann::ordered_json& json) {
  using Json = nlohmann::ordered_json;
  const ParallelSummary& p = prediction.parallel;
  json["host_bytes"] = p.host_bytes;
  Json warnings = Json::array();
  for (const auto& warning : p.warnings) warnings.push_back(warning);
  json["warnings"] = std::move(warnings);
  if (!p.enabled) {
    json["parallel"] = nullptr;
    return;
  }
  const ModelStateBytes& m = p.model_states;
  json["parallel"] = Json{
      {"description", p.description},
      {"world_size", p.world_size},
      {"gpus_per_node", p.gpus_per_node},
      {"nccl_buffer_bytes", p.nccl_buffer_bytes},
      {"model_states_per_rank",
       Json{{"parameters", m.parameters}, {"gradients", m.gradients}, {"optimizer", m.optimizer},
            {"step_fp32_gradients", m.step_fp32_gradients}, {"gathered_working_set", m.gathered_working_set}}},
      {"host", Json{{"bytes_per_rank", p.host_bytes}, {"pinned", p.host_pinned},
                    {"bytes_per_node", p.host_bytes_per_node}, {"load_peak_bytes_per_node", p.host_load_peak_per_node}}},
      {"offload_estimate",
       p.offloads ? Json{{"host_to_device_bytes", p.offload.host_to_device_bytes},
                         {"device_to_host_bytes", p.offload.device_to_host_bytes},
                         {"host_link_gbps", p.offload.host_link_gbps},
                         {"transfer_seconds", p.offload.transfer_seconds},
                         {"compute_seconds", p.offload.compute_seconds},
                         {"model_flops_utilization", p.offload.model_flops_utilization}}
                  : Json(nullptr)}};
}

}  // namespace oomcast::advisor
