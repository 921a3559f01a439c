// How each serving engine lays out the KV cache, where it differs by engine: whether an MLA
// model (DeepSeek V2/V3, Kimi K2, ...) caches the shared latent or per-head K and V, and the
// cache dtype it uses by default. `ckpt inspect --engine E` sizes the cache that way.
#include "inspect/inspect.h"

namespace ckpt::inspect {

namespace {

constexpr EngineKv kEngines[] = {
    {"vllm", false, "",
     "MLA cached as one latent row of kv_lora_rank + qk_rope_head_dim per token and layer; cache dtype auto = the model dtype",
     "vLLM MLA attention backends: get_kv_cache_shape(num_blocks, block_size, 1, kv_lora_rank + qk_rope_head_dim)"},
    {"sglang", false, "",
     "MLA cached as one latent row (MLATokenToKVPool [size, 1, kv_lora_rank + qk_rope_head_dim])",
     "sglang python/sglang/srt/mem_cache/memory_pool.py MLATokenToKVPool"},
    {"llama.cpp", false, "f16",
     "MLA GGUFs cache K only, (kv_lora_rank + rope) x 1 head, no V; K and V cache types default to f16",
     "specs/gguf.md 8.2 (llama.cpp src/llama-kv-cache.cpp, common/common.h cache_type_k/v)"},
    {"transformers", true, "",
     "DeepSeek-V3 caches per-head keys (qk_nope + qk_rope) and values (v_head_dim) after kv_b_proj: no latent cache",
     "transformers src/transformers/models/deepseek_v3/modeling_deepseek_v3.py@00b676f8 DeepseekV3Attention.forward "
     "(past_key_value.update(key_states, value_states))"},
    {"mlx-lm", false, "",
     "DeepSeek-V3 caches the normalised latent (kv_lora_rank) and k_pe (qk_rope_head_dim)",
     "mlx-lm mlx_lm/models/deepseek_v3.py@04e6af1f DeepseekV3Attention (cache.update_and_fetch(kv_latent, k_pe))"},
};

}  // namespace

const EngineKv* engine_kv(std::string_view engine) {
  for (const auto& e : kEngines)
    if (e.engine == engine) return &e;
  return nullptr;
}

}  // namespace ckpt::inspect
