// GGUF discovery and parsing for the loader: *.gguf files become Shards (with their parsed
// header) grouped into models, single files and split sets.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"

namespace ckpt::gguf_load {

struct SplitName {
  std::string prefix;  // including any directory
  uint32_t no = 0;     // 1-based, as on disk
  uint32_t count = 0;
};
// "PREFIX-0000k-of-0000n.gguf" (both numbers five digits, as llama.cpp and gguf-py write them).
std::optional<SplitName> parse_split_name(std::string_view rel);
std::string split_file_name(std::string_view prefix, uint32_t no, uint32_t count);

// Parses every *.gguf in ck.files (or, with `blobs`, those files: an Ollama store's model
// layers) on at most `threads` threads, and groups them into ck.gguf_models.
void load(Checkpoint& ck, unsigned threads, const std::vector<std::string>* blobs = nullptr);

}  // namespace ckpt::gguf_load
