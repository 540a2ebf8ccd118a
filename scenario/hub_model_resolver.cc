// Hub ids looked up in the local Hugging Face cache (hub_model_resolver.h). The layout is
// huggingface_hub's (file_download.py, 0.26+ and 1.x): repo folder "models--" + id with "/"
// replaced by "--", refs/<revision> holding a commit hash, snapshots/<hash>/<file>.
#include "scenario/hub_model_resolver.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/input_error.h"

namespace oomcast::scenario {

namespace fs = std::filesystem;

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

[[noreturn]] void not_cached(const std::string& repo_id, const std::string& why) {
  throw InputError(SourceLocation{}, "model",
                   "model '" + repo_id + "' is no file here and " + why + " in the Hugging Face cache " +
                       hub_cache_directory() + ": fetch just its config with `huggingface-cli download " + repo_id +
                       " config.json` (or give the folder that holds its config.json)");
}

}  // namespace

bool looks_like_hub_id(const std::string& reference) {
  const size_t slash = reference.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == reference.size()) return false;
  if (reference.find('/', slash + 1) != std::string::npos) return false;
  if (reference.ends_with(".json") || reference.ends_with(".yaml") || reference.ends_with(".yml")) return false;
  if (reference.starts_with(".") || reference.find("..") != std::string::npos) return false;
  for (char c : reference) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '/') return false;
  }
  return true;
}

std::string hub_cache_directory() {
  if (std::string cache = environment("HF_HUB_CACHE"); !cache.empty()) return cache;
  if (std::string home = environment("HF_HOME"); !home.empty()) return (fs::path(home) / "hub").string();
  if (std::string xdg = environment("XDG_CACHE_HOME"); !xdg.empty()) {
    return (fs::path(xdg) / "huggingface" / "hub").string();
  }
  return (fs::path(environment("HOME")) / ".cache" / "huggingface" / "hub").string();
}

std::string cached_hub_config(const std::string& repo_id) {
  std::string folder_name = "models--" + repo_id;
  folder_name.replace(folder_name.find('/'), 1, "--");
  const fs::path repo = fs::path(hub_cache_directory()) / folder_name;
  std::error_code error;
  if (!fs::is_directory(repo, error)) not_cached(repo_id, "is not");
  // refs/main names the snapshot from_pretrained uses by default.
  std::ifstream ref(repo / "refs" / "main");
  std::string revision;
  if (!ref || !std::getline(ref, revision) || trimmed(revision).empty()) {
    not_cached(repo_id, "has no refs/main (no default revision downloaded)");
  }
  const fs::path config = repo / "snapshots" / trimmed(revision) / "config.json";
  if (!fs::is_regular_file(config, error)) not_cached(repo_id, "has no config.json for revision " + trimmed(revision));
  return config.string();
}

}  // namespace oomcast::scenario
