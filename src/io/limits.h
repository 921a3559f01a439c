// Every cap on untrusted input, named once.
#pragma once
#include <cstdint>

namespace ckpt::limits {
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;   // safetensors MAX_HEADER_SIZE
inline constexpr uint32_t kMaxTensorRank = 256;            // far above any real tensor (safety cap)
// JSON nesting, for documents read as Python's json reads them (config.json, tokenizer_config.json,
// generation_config.json; json::kDefaultMaxDepth is the same number). CPython 3.11's json counts
// each '[' / '{' against the recursion limit (1000) shared with the Python frames below
// json.loads: /usr/bin/python3 3.11.2 reads 995 levels with one frame below it (`python3 -c`),
// one level less per further frame, so 990 with six: a script's <module> and main(), and four
// frames of a loader's chain down to its json.loads (from_pretrained -> ... ->
// _dict_from_json_file). tests/model/json_python.py measures the limit at exactly that depth,
// and json_python_test.cpp checks this number against it. Callers from deeper frames accept a few levels less; nothing
// legitimate comes near either. (tokenizer.json and safetensors headers also use this bound
// today, although their loaders read them with serde_json, whose limit is 128.)
inline constexpr uint32_t kMaxJsonDepth = 990;
inline constexpr uint64_t kMaxSideJsonBytes = 512ull << 20; // config/tokenizer/index JSON files
inline constexpr uint64_t kMaxTemplateBytes = 16ull << 20; // a chat template file
inline constexpr uint64_t kLfsPointerMaxBytes = 1024;      // Git LFS pointers are ~130 bytes
}  // namespace ckpt::limits
