// A Hugging Face config.json of an architecture no built-in family reads, planned through the
// layer graph of transformers' own class: capture/oomcast_capture.py runs the class's real
// forward and backward (on the meta device) in a subprocess of the project's python, and the
// graph file it writes is cached and read like any captured model (docs/graph-format.md).
#pragma once

#include <string>

#include "scenario/scenario.h"

namespace oomcast::scenario {

// The python that runs the capture: $OOMCAST_PYTHON, else `.venv/bin/python` in `repo_root`
// (what scripts/make-venv.sh builds), else python3 from PATH.
std::string capture_python(const std::string& repo_root);

// Captures (or reads from the cache) the graph of the config.json at `path`, whose model_type
// `model_type` has no family, and returns it as a family "graph" model with a warning saying
// how it was planned. The cache is $OOMCAST_CACHE_DIR, else $XDG_CACHE_HOME/oomcast, else
// ~/.cache/oomcast (hf-graphs/), keyed by the config's text, the python and the capture's code.
// Throws InputError (key model_type) with one line saying which families exist and how to
// capture, when the capture cannot run or refuses the config.
ModelConfig captured_hf_model(const std::string& path, const std::string& model_type, const std::string& repo_root);

// The config.json at `path` captured as torch.compile runs transformers' class of it (on fake
// tensors: no weights are made), with the scenario's compile settings (a YAML map, --compile's
// SETTINGS) for `device_kind` (cuda or cpu); cached as above, keyed by the settings too. The
// one path a family's or any config.json's `compile:` is planned through. Throws InputError
// (key compile) with the capture's last line when it cannot run or refuses the model.
ModelConfig captured_compiled_hf_model(const std::string& path, const std::string& settings,
                                       const std::string& device_kind, const std::string& repo_root);

}  // namespace oomcast::scenario
