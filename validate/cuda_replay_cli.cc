// cuda_replay_main: argument parsing, trace reading, planning and reporting around run_plan.
#include "validate/cuda_replay_cli.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/input_error.h"
#include "sim/allocator_config.h"
#include "sim/trace_io.h"
#include "validate/device_replay_plan.h"

namespace oomcast::validate {

namespace {

constexpr const char* kUsage =
    "usage: cuda_replay TRACE [--segments] [--raw] [--alloc-conf CONF] [--csv FILE] [--probe-every N]\n"
    "       cuda_replay --context [--csv FILE]\n"
    "  --segments  act out the simulator's own segment cudaMalloc/cudaFree decisions (default)\n"
    "  --raw       one cudaMalloc per allocation of the trace\n"
    "  --context   only measure the CUDA context (run once per CUDA_MODULE_LOADING value)\n";

struct Arguments {
  std::string trace;
  bool segments = false;
  bool raw = false;
  bool context_only = false;
  std::string alloc_conf;
  std::string csv;
  size_t probe_every = 1;
};

std::optional<Arguments> parse(int argc, const char* const* argv, std::ostream& err) {
  Arguments arguments;
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    auto value = [&](const char* flag) -> std::optional<std::string> {
      if (i + 1 >= argc) {
        err << "cuda_replay: " << flag << " needs a value\n" << kUsage;
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    if (argument == "--segments") {
      arguments.segments = true;
    } else if (argument == "--raw") {
      arguments.raw = true;
    } else if (argument == "--context") {
      arguments.context_only = true;
    } else if (argument == "--alloc-conf") {
      auto text = value("--alloc-conf");
      if (!text) return std::nullopt;
      arguments.alloc_conf = *text;
    } else if (argument == "--csv") {
      auto text = value("--csv");
      if (!text) return std::nullopt;
      arguments.csv = *text;
    } else if (argument == "--probe-every") {
      auto text = value("--probe-every");
      if (!text) return std::nullopt;
      auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), arguments.probe_every);
      if (error != std::errc() || end != text->data() + text->size()) {
        err << "cuda_replay: --probe-every takes a count, got '" << *text << "'\n";
        return std::nullopt;
      }
    } else if (argument == "-h" || argument == "--help") {
      err << kUsage;
      return std::nullopt;
    } else if (!argument.empty() && argument[0] == '-') {
      err << "cuda_replay: unknown option '" << argument << "'\n" << kUsage;
      return std::nullopt;
    } else if (arguments.trace.empty()) {
      arguments.trace = argument;
    } else {
      err << "cuda_replay: one trace at a time (also given: '" << argument << "')\n";
      return std::nullopt;
    }
  }
  if (arguments.context_only && (!arguments.trace.empty() || arguments.segments || arguments.raw)) {
    err << "cuda_replay: --context takes no trace and no mode\n" << kUsage;
    return std::nullopt;
  }
  if (!arguments.context_only && arguments.trace.empty()) {
    err << kUsage;
    return std::nullopt;
  }
  if (!arguments.segments && !arguments.raw) arguments.segments = true;
  return arguments;
}

std::string error_text(const InputError& error) {
  std::string text;
  if (!error.where().file.empty()) text += error.where().file + ":";
  if (error.where().line > 0) text += std::to_string(error.where().line) + ":";
  if (error.where().event >= 0) text += " event " + std::to_string(error.where().event) + ":";
  return text + (text.empty() ? "" : " ") + "error: " + error.message();
}

}  // namespace

uint64_t ContextMeasurement::context_bytes() const {
  if (nvml_used_before_bytes && nvml_used_after_bytes && *nvml_used_after_bytes >= *nvml_used_before_bytes) {
    return *nvml_used_after_bytes - *nvml_used_before_bytes;
  }
  return used_after_init_bytes;
}

std::string ContextMeasurement::context_method() const {
  if (nvml_used_before_bytes && nvml_used_after_bytes && *nvml_used_after_bytes >= *nvml_used_before_bytes) {
    return "nvml_after_minus_before";
  }
  return "memgetinfo_used_after_init_upper_bound";
}

void write_context_csv(std::ostream& out, const ContextMeasurement& m, bool header) {
  if (header) {
    out << "mode,gpu,compute_capability,cuda_runtime,cuda_driver,module_loading,context_bytes,method,"
           "used_after_init_bytes,total_bytes\n";
  }
  out << "context," << m.gpu_name << ',' << m.compute_capability << ',' << m.runtime_version << ','
      << m.driver_version << ',' << m.module_loading << ',' << m.context_bytes() << ',' << m.context_method() << ','
      << m.used_after_init_bytes << ',' << m.total_bytes << '\n';
}

int cuda_replay_main(int argc, const char* const* argv, DeviceRuntime& runtime, std::ostream& out, std::ostream& err) {
  std::optional<Arguments> arguments = parse(argc, argv, err);
  if (!arguments) return 2;

  std::vector<DeviceReplayPlan> plans;
  if (!arguments->context_only) {
    try {
      sim::AllocatorConfig config;
      if (!arguments->alloc_conf.empty()) config = sim::parse_alloc_conf(arguments->alloc_conf);
      sim::Trace trace = sim::read_trace_file(arguments->trace);
      if (arguments->segments) plans.push_back(plan_segment_replay(trace, config));
      if (arguments->raw) plans.push_back(plan_raw_replay(trace));
    } catch (const InputError& error) {
      err << "cuda_replay: " << error_text(error) << "\n";
      return 2;
    }
  }

  // Plans are made before the GPU is touched, so bad input never creates a context.
  ContextMeasurement context;
  if (auto problem = runtime.open(context)) {
    err << "cuda_replay: no usable CUDA GPU: " << *problem << "; nothing was run\n";
    return 77;
  }

  std::ofstream file;
  std::ostringstream summaries;
  std::ostream* csv = &out;
  if (!arguments->csv.empty()) {
    file.open(arguments->csv);
    if (!file) {
      err << "cuda_replay: cannot write '" << arguments->csv << "'\n";
      return 2;
    }
    csv = &file;
  }
  summaries << "cuda_replay: " << context.gpu_name << " (sm_" << context.compute_capability << ", CUDA runtime "
            << context.runtime_version << ", driver " << context.driver_version << "), CUDA_MODULE_LOADING "
            << context.module_loading << ": context " << context.context_bytes() << " B ("
            << context.context_method() << ")\n";
  if (arguments->context_only) {
    write_context_csv(*csv, context, true);
  }
  int status = 0;
  RunOptions options;
  options.probe_every_mallocs = arguments->probe_every;
  for (size_t i = 0; i < plans.size(); ++i) {
    ReplayRun run = run_plan(plans[i], runtime.device(), options);
    write_run_csv(*csv, run, i == 0);
    summaries << "cuda_replay: " << run_summary(run);
    if (run.failed || !run.everything_freed) status = 1;
  }
  if (csv == &out) {
    err << summaries.str();
  } else {
    out << summaries.str();
  }
  return status;
}

}  // namespace oomcast::validate
