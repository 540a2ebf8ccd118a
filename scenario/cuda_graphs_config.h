// The scenario's `cuda_graphs` key: the CUDA graphs a job captures (torch.cuda.graph,
// torch.compile(mode="reduce-overhead"), the decode graphs of vLLM / SGLang). Each graph's
// allocations during capture live in a private pool while the graph lives; the planner
// emits one capture per batch size (planner/cuda_graph_capture.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace oomcast::scenario {

enum class CapturedPhase { Decode, Forward };

struct CudaGraphConfig {
  std::string name;                   // names the graphs in the trace: "<name>_b<batch>"
  CapturedPhase phase = CapturedPhase::Decode;
  std::vector<int64_t> batch_sizes;   // captured largest first, as vLLM does
  bool share_pool = true;             // one pool for all batch sizes (vLLM's global pool)
};

}  // namespace oomcast::scenario
