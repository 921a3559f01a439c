// mlx-lm (Apple MLX, Python): strict loading, a filename glob instead of the index, its own
// config defaults. Sources: specs/architectures.md §1/§3/§6/§7 (M: ml-explore/mlx-lm @d78bf58e,
// MLX: mlx python/mlx/nn/layers/base.py load_weights), specs/quantization-layouts.md §1c/§10.
#include "engines/profiles.h"

namespace ckpt::engines::detail {

Profile mlx_lm_profile() {
  Profile p;
  p.name = "mlx-lm";
  p.title = "mlx-lm (ml-explore, Python on Apple MLX)";
  p.family = "mlx";
  p.weights_format = "safetensors";
  p.dialect = {DialectKind::python_jinja2, "jinja2", {3, 1, 6},
               "templates are rendered by the transformers tokenizer mlx-lm wraps (TokenizerWrapper)",
               "ml-explore/mlx-lm mlx_lm/tokenizer_utils.py (read for ckpt; not in the specs)"};
  constexpr std::string_view kStrict = "architectures.md §1 missing-key row (MLX load_weights(strict=True))";
  p.loader.unexpected_tensors = {Verdict::breaks, "load_weights(strict=True): \"Received N parameters not in model\"",
                                 kStrict};
  p.loader.missing_tensors = {Verdict::breaks, "load_weights(strict=True): \"Missing N parameters\"", kStrict};
  p.loader.stray_shards = {Verdict::breaks,
                           "load_model globs model*.safetensors and ignores the index: a stray file matching the glob "
                           "is loaded, indexed files outside it are never opened",
                           "architectures.md §1 which-files row (M:utils.load_model)"};
  p.loader.shard_glob = "model*.safetensors";
  p.loader.tied_head = {Verdict::breaks,
                        "phi3, gemma, gemma2, gemma3n and olmo2 do not pop a stored lm_head.weight when tied: "
                        "\"Received 1 parameters not in model\"",
                        "architectures.md §1 tied row"};
  p.loader.rotary_buffers = {Verdict::breaks,
                             "qwen3, qwen3_moe, qwen3_next, mixtral, phi3, gemma*, glm4_moe and gpt_oss do not drop "
                             "rotary_emb.inv_freq: strict loading fails",
                             "architectures.md §1 inv_freq row"};
  p.loader.dtype_casts = {Verdict::unknown, "strict loading checks names and shapes", kStrict};
  constexpr std::string_view kQ = "quantization-layouts.md §1c (foreign formats in mlx-lm load_model), §10";
  p.quant = {
      {"mlx", "", Verdict::tolerates, 0, false, "affine, mxfp4, nvfp4, mxfp8 (quantized iff <path>.scales exists)",
       "quantization-layouts.md §1a, §10 mlx-lm row"},
      {"mxfp4", "", Verdict::tolerates, 0, false, "quant_method mxfp4 becomes mode mxfp4, group 32", kQ},
      {"compressed-tensors", "", Verdict::tolerates, 0, false,
       "nvfp4-pack-quantized becomes nvfp4, anything else affine group 32 / 4 bits", kQ},
      {"gptq", "", Verdict::tolerates, 4, true, "repacked to the MLX layout: 4 bits only, any g_idx refused",
       "quantization-layouts.md §1c; architectures.md §6 AWQ/GPTQ rows"},
      {"awq", "", Verdict::tolerates, 4, true, "repacked to the MLX layout: 4 bits only, any g_idx refused",
       "quantization-layouts.md §1c; architectures.md §6 AWQ row"},
  };
  constexpr std::string_view kM = "architectures.md §1 (M: mlx_lm/models/<arch>.py ModelArgs)";
  p.config = {
      {"qwen2", "num_key_value_heads", true, "", "architectures.md §1 nkv row (qwen2: M requires it)"},
      {"qwen3", "head_dim", true, "", "architectures.md §1 hd row (qwen3/gemma*/glm4_moe: field required)"},
      {"qwen3_moe", "head_dim", true, "", "architectures.md §1 hd row"},
      {"gemma", "head_dim", true, "", "architectures.md §1 hd row"},
      {"gemma2", "head_dim", true, "", "architectures.md §1 hd row"},
      {"gemma3_text", "head_dim", true, "", "architectures.md §1 hd row"},
      {"glm4_moe", "head_dim", true, "", "architectures.md §1 hd row"},
      {"qwen3_moe", "mlp_only_layers", true, "", "architectures.md §3 qwen3_moe (M requires it)"},
      {"llama", "rope_theta", false, "10000", kM},
      {"mistral", "rope_theta", false, "10000", "architectures.md §1 (mistral maps to llama, MODEL_REMAPPING)"},
      {"qwen2", "rope_theta", false, "1000000", kM},
      {"mixtral", "rope_theta", false, "1000000", kM},
      {"gemma3_text", "rope_theta", false, "1000000", kM},
      {"llama", "tie_word_embeddings", false, "true", "architectures.md §1 tie row"},
      {"mistral", "tie_word_embeddings", false, "true", "architectures.md §1 tie row"},
      {"qwen2", "tie_word_embeddings", false, "true", "architectures.md §1 tie row"},
      {"olmo2", "tie_word_embeddings", false, "true", "architectures.md §1 tie row"},
      {"mixtral", "tie_word_embeddings", false, "false", "architectures.md §1 tie row"},
      {"phi3", "tie_word_embeddings", false, "false", "architectures.md §1 tie row"},
  };
  p.tokenizers = transformers_tokenizer_rules();
  p.notes = {
      "qwen2 ignores head_dim and always uses hidden_size / num_attention_heads (architectures.md §1 hd row)",
      "gemma3 (multimodal) accepts only the legacy language_model.model.* layout (architectures.md §3 gemma3)",
      "copies text_config.quantization_config to the top level when the top level has none (architectures.md §4)",
  };
  return p;
}

}  // namespace ckpt::engines::detail
