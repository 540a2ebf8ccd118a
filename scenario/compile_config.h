// The scenario's `compile` key and a graph file's `compiled` key: how torch.compile runs the
// job (mode, fullgraph, dynamic, what is compiled, the partitioner's activation memory budget).
// A compiled plan comes from a graph file captured compiled (capture/compiled_capture.py), so
// the scenario's settings must be the ones the capture ran with (compile_config_loader.h).
#pragma once

#include <string>
#include <vector>

namespace oomcast::scenario {

// torch.compile's `mode` (torch/_inductor/__init__.py list_mode_options, torch 2.13).
enum class CompileMode { Default, Lite, ReduceOverhead, MaxAutotune, MaxAutotuneNoCudagraphs };

// What is wrapped in torch.compile: the whole model, each repeated block, the loss function, the
// optimizer step.
enum class CompileScope { Model, Blocks, Loss, Optimizer };

struct CompileConfig {
  bool enabled = false;
  CompileMode mode = CompileMode::Default;
  bool fullgraph = false;
  std::string dynamic = "false";              // "false" | "true" | "auto" (torch.compile's dynamic=None)
  std::vector<CompileScope> scopes;           // {Model} when enabled and none is given
  double activation_memory_budget = 1.0;      // torch._functorch.config.activation_memory_budget
  // Written by the capture (graph files only): graphs partitioned, and the graph breaks between them.
  int graphs = 0;
  int graph_breaks = 0;
  // The device kind the capture decided inductor's layout for ("cpu" | "cuda"; "" in files
  // written before the key existed): channels-last copies differ by device.
  std::string for_device;

  bool has_scope(CompileScope scope) const;
  // Whether the mode captures CUDA graphs (cudagraph trees): reduce-overhead and max-autotune.
  bool uses_cudagraphs() const { return mode == CompileMode::ReduceOverhead || mode == CompileMode::MaxAutotune; }
};

const char* compile_mode_name(CompileMode mode);
const char* compile_scope_name(CompileScope scope);

}  // namespace oomcast::scenario
