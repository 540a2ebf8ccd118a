// export_scenario_graph(): builds the model's forward as the training step does (grad mode on;
// a job without gradients drops the saves again when it plans the file) and exports it.
#include "planner/scenario_graph_export.h"

#include "base/input_error.h"
#include "planner/families/families.h"
#include "planner/families/graph_file_export.h"
#include "planner/model_setup.h"
#include "scenario/model_families.h"
#include "scenario/scenario_loader.h"

namespace oomcast::planner {

using scenario::JobKind;
using scenario::Scenario;
using scenario::precision_name;

std::string export_scenario_graph(const Scenario& scenario, const std::string& graph_name) {
  // What a concrete graph file cannot carry: refused rather than exported to plan differently.
  if (scenario.job.job.kind == JobKind::Generate) {
    throw InputError(SourceLocation{scenario.source_path, 0, 0, -1}, "job",
                     "export-graph writes one forward at one size, and a generate job builds the model again for "
                     "every decode step (batch expanded, one new token); export with job: train or inference");
  }
  if (scenario.job.weights.quantized()) {
    throw InputError(SourceLocation{scenario.source_path, 0, 0, -1}, "weights",
                     "export-graph cannot write bitsandbytes-quantized weights (int8, nf4, fp4): a graph file's "
                     "parameters are plain dtypes");
  }
  if (scenario.batch_size <= 0) throw InputError(SourceLocation{}, "batch_size", "batch_size must be positive");
  const int64_t seq_len = scenario.seq_len > 0 ? scenario.seq_len : scenario::families::default_sequence_length(scenario.model);
  GraphBuilder builder(scenario_build_context(scenario, seq_len, /*training=*/true, /*grad_enabled=*/true));
  families::build_forward(builder, scenario.model);
  families::ExportedSize size;
  size.key = scenario::families::is_vision(scenario.model) ? "image_size" : "seq_len";
  size.value = seq_len;
  size.built_for = "batch_size " + std::to_string(scenario.batch_size) + ", " + size.key + " " +
                   std::to_string(seq_len) + ", precision " + precision_name(scenario.precision);
  return families::export_graph_file(builder.finish(), graph_name, size);
}

}  // namespace oomcast::planner
