// Every cap on untrusted input, named once.
#pragma once
#include <cstdint>

namespace ckpt::limits {
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;   // safetensors MAX_HEADER_SIZE
inline constexpr uint32_t kMaxTensorRank = 256;            // far above any real tensor (safety cap)
inline constexpr uint32_t kMaxJsonDepth = 512;             // JSON nesting
inline constexpr uint64_t kMaxSideJsonBytes = 512ull << 20; // config/tokenizer/index JSON files
inline constexpr uint64_t kMaxTemplateBytes = 16ull << 20; // a chat template file
inline constexpr uint64_t kLfsPointerMaxBytes = 1024;      // Git LFS pointers are ~130 bytes
}  // namespace ckpt::limits
