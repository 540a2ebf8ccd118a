// A Hugging Face Hub id (`meta-llama/Llama-3.1-8B`) resolved to the config.json in the local
// Hugging Face cache, where from_pretrained would find it: HF_HUB_CACHE, else HF_HOME/hub, else
// XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub; inside it
// models--ORG--NAME/snapshots/<revision of refs/main>/config.json. Nothing is downloaded:
// when the config is not cached, the error names the command that fetches just that file.
#pragma once

#include <string>

namespace oomcast::scenario {

// True for "ORG/NAME" with one slash and Hub-legal characters, and no file extension the
// scenario reads (.json, .yaml, .yml): what a Hub id looks like, as opposed to a path.
bool looks_like_hub_id(const std::string& reference);

// The cache folder searched, from the environment as huggingface_hub reads it.
std::string hub_cache_directory();

// The cached config.json of `repo_id`. Throws InputError (key "model") naming the folder
// searched and `huggingface-cli download ORG/NAME config.json` when it is not there.
std::string cached_hub_config(const std::string& repo_id);

}  // namespace oomcast::scenario
