// Ollama targets for the loader: `ollama:NAME[:TAG]` and models directories.
#pragma once
#include <optional>
#include <string>

#include "ckpt/checkpoint.h"

namespace ckpt::ollama {

// $OLLAMA_MODELS (trimmed of quotes and spaces), else $HOME/.ollama/models.
std::filesystem::path models_root();
// "llama3.2" -> manifests/registry.ollama.ai/library/llama3.2/latest; "hf.co/org/repo:Q4_K_M",
// "user/model:tag". Empty when the name has a part Ollama would not accept.
std::string manifest_path(std::string_view name);
bool is_models_dir(const std::filesystem::path& dir);  // has manifests/ and blobs/

// Fills ck.ollama, ck.files (manifests and the blobs they name) and the GGUF shards of every
// model/projector/adapter layer. `only` = one manifest path relative to root; empty = all.
void load(Checkpoint& ck, const std::string& only, unsigned threads);

}  // namespace ckpt::ollama
