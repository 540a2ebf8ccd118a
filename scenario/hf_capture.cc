// Runs capture/oomcast_capture.py on a config.json whose model_type no family reads (its
// hf_model.py builds transformers' own class with from_config), caches the graph file and
// reads it as a "graph" model. Every failure is one InputError line on the model_type key.
#include "scenario/hf_capture.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "base/bounded_file.h"
#include "base/input_error.h"
#include "scenario/graph_file.h"
#include "scenario/hf_config.h"

extern char** environ;

namespace oomcast::scenario {

namespace fs = std::filesystem;

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string families_line() {
  std::string text;
  for (const auto& type : supported_hf_model_types()) text += (text.empty() ? "" : ", ") + type;
  return text;
}

[[noreturn]] void refuse(const std::string& path, const std::string& model_type, const std::string& why) {
  throw InputError(SourceLocation{path, 0, 0, -1}, "model_type",
                   "unsupported model_type '" + model_type + "' (supported: " + families_line() +
                       "), and transformers' own class of it could not be captured: " + why +
                       " (with torch and transformers installed, scripts/make-venv.sh or $OOMCAST_PYTHON, the "
                       "config.json is captured by capture/oomcast_capture.py; or capture a model file with it "
                       "and give that graph file as the model)");
}

// FNV-1a over the inputs that decide the graph: a changed config, python or capture code
// captures again.
uint64_t fingerprint(const std::vector<std::string>& parts) {
  uint64_t hash = 1469598103934665603ULL;
  for (const auto& part : parts) {
    for (unsigned char c : part) hash = (hash ^ c) * 1099511628211ULL;
    hash = (hash ^ 0xffU) * 1099511628211ULL;
  }
  return hash;
}

std::string capture_code_stamp(const fs::path& capture_dir) {
  std::string stamp;
  std::error_code error;
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(capture_dir, error)) {
    if (entry.path().extension() != ".py") continue;
    auto size = fs::file_size(entry.path(), error);
    auto time = fs::last_write_time(entry.path(), error).time_since_epoch().count();
    entries.push_back(entry.path().filename().string() + ":" + std::to_string(size) + ":" + std::to_string(time));
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& entry : entries) stamp += entry + ";";
  return stamp;
}

fs::path cache_directory() {
  std::string dir = environment("OOMCAST_CACHE_DIR");
  if (dir.empty() && !environment("XDG_CACHE_HOME").empty()) dir = environment("XDG_CACHE_HOME") + "/oomcast";
  if (dir.empty() && !environment("HOME").empty()) dir = environment("HOME") + "/.cache/oomcast";
  if (dir.empty()) dir = (fs::temp_directory_path() / "oomcast-cache").string();
  return fs::path(dir) / "hf-graphs";
}

// The last non-empty line of the capture's stderr, without its "oomcast_capture: error: ".
std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty() && line.rfind("[transformers]", 0) != 0) last = line;
  }
  const std::string prefix = "oomcast_capture: error: ";
  if (last.rfind(prefix, 0) == 0) last = last.substr(prefix.size());
  return last.empty() ? "it wrote no error" : last;
}

// Runs argv with stdout discarded and stderr into `errors`; the exit status, or -1 when the
// program could not be started.
int run(const std::vector<std::string>& argv, const fs::path& errors) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int started = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (started != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 127 ? -1 : WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace

std::string capture_python(const std::string& repo_root) {
  std::string chosen = environment("OOMCAST_PYTHON");
  if (!chosen.empty()) return chosen;
  std::error_code error;
  fs::path venv = fs::path(repo_root) / ".venv" / "bin" / "python";
  if (!repo_root.empty() && fs::exists(venv, error)) return venv.string();
  return "python3";
}

namespace {

// Runs the capture of the config.json at `path` with `extra` arguments into the cache (or finds
// it there) and returns the graph file's path; `fail` says why it could not (never returns).
template <typename Refuse>
fs::path cached_capture(const std::string& path, const std::string& label, const std::vector<std::string>& extra,
                        const std::string& repo_root, bool& cached, Refuse fail) {
  const fs::path script = fs::path(repo_root) / "capture" / "oomcast_capture.py";
  std::error_code error;
  if (repo_root.empty() || !fs::exists(script, error)) fail("capture/oomcast_capture.py is not beside this oomcast");
  const std::string python = capture_python(repo_root);
  const std::string text = read_text_file(path, "", "config.json");
  std::vector<std::string> parts = {text, python, environment("OOMCAST_HF_ATTENTION"),
                                    capture_code_stamp(script.parent_path())};
  parts.insert(parts.end(), extra.begin(), extra.end());
  std::ostringstream name;
  name << label << "-" << std::hex << fingerprint(parts) << ".graph.yaml";
  const fs::path cache = cache_directory();
  const fs::path graph = cache / name.str();
  cached = fs::exists(graph, error);
  if (cached) return graph;
  fs::create_directories(cache, error);
  if (error) fail("cannot create the cache folder " + cache.string() + ": " + error.message());
  const fs::path partial = cache / (name.str() + "." + std::to_string(getpid()) + ".partial");
  const fs::path errors = cache / (name.str() + "." + std::to_string(getpid()) + ".stderr");
  std::vector<std::string> argv = {python, script.string(), fs::absolute(path).string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.insert(argv.end(), {"-o", partial.string(), "-q"});
  const int status = run(argv, errors);
  if (status != 0) {
    const std::string why = status < 0 ? python + " could not be started" : last_line(errors);
    fs::remove(errors, error);
    fs::remove(partial, error);
    fail(why);
  }
  fs::remove(errors, error);
  fs::rename(partial, graph, error);
  if (error) fail("cannot write " + graph.string() + ": " + error.message());
  return graph;
}

std::string folder_name(const std::string& path) {
  std::string name = fs::absolute(path).lexically_normal().parent_path().filename().string();
  return name.empty() ? "hf-model" : name;
}

}  // namespace

ModelConfig captured_hf_model(const std::string& path, const std::string& model_type, const std::string& repo_root) {
  bool cached = false;
  const fs::path graph = cached_capture(path, model_type, {}, repo_root, cached,
                                        [&](const std::string& why) { refuse(path, model_type, why); });
  ModelConfig model = graph_model(graph.string());
  model.source = path;
  model.name = folder_name(path);
  model.warnings.push_back(path + ": model_type '" + model_type + "' has no oomcast family; planned from the layer " +
                           "graph of transformers' own class, captured by " + capture_python(repo_root) + " (" +
                           (cached ? "cached" : "captured now") + ": " + graph.string() + ")");
  return model;
}

ModelConfig captured_compiled_hf_model(const std::string& path, const std::string& settings,
                                       const std::string& device_kind, const std::string& repo_root) {
  bool cached = false;
  auto fail = [&](const std::string& why) {
    throw InputError(SourceLocation{path, 0, 0, -1}, "compile",
                     "the compiled plan of a config.json comes from capturing transformers' own class of it under "
                     "torch.compile (capture/oomcast_capture.py CONFIG.json --compile), which could not run: " + why);
  };
  const fs::path graph = cached_capture(path, "compiled", {"--compile", settings, "--for-device", device_kind},
                                        repo_root, cached, fail);
  ModelConfig model = graph_model(graph.string());
  model.source = path;
  model.name = folder_name(path);
  model.warnings.push_back(path + ": compiled; planned from the graphs torch.compile makes of transformers' own " +
                           std::string("class (fake tensors), captured by ") + capture_python(repo_root) + " (" +
                           (cached ? "cached" : "captured now") + ": " + graph.string() + ")");
  return model;
}

}  // namespace oomcast::scenario
