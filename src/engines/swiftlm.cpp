// SwiftLM (SharpAI): mlx-swift-lm for the weights, swift-transformers for the tokenizer and
// swift-jinja for the chat template. Versioned by swift-jinja, the part whose behaviour
// changed: `swiftlm@2.4.0`. Sources: specs/template-dialects.md §1/§4, specs/incidents.md §1.
#include "engines/profiles.h"

namespace ckpt::engines::detail {

namespace {
// SharpAI/SwiftLM f1dddb89 pins swift-jinja 2.3.5 in Package.resolved (template-dialects.md,
// "Who uses what").
constexpr Version kPinned{2, 3, 5};
constexpr Version kFirst{2, 0, 0}, kLast{2, 4, 2};
}  // namespace

Profile swiftlm_profile(const Version* version, std::string* error) {
  Version v = version ? *version : kPinned;
  if (version && (v < kFirst || v > kLast)) {
    if (error)
      *error = "swift-jinja " + v.str() + " is not modelled: ckpt knows 2.0.0 to 2.4.2 (1.x is johnmai-dev/Jinja, "
               "a different lexer)";
    return {};
  }
  Profile p;
  p.name = "swiftlm";
  p.title = "SwiftLM (mlx-swift-lm + swift-transformers + swift-jinja)";
  p.family = "swift";
  p.version_key = "swift-jinja";
  p.version = v.str();
  p.default_version_note = "2.3.5: the swift-jinja SharpAI/SwiftLM f1dddb89 pins in Package.resolved";
  p.weights_format = "safetensors (MLX)";
  p.dialect = {DialectKind::swift_jinja, "swift-jinja", v,
               "swift-transformers compiles templates with Template(s, with: .init(lstripBlocks: true, trimBlocks: "
               "true)); SwiftLM renders a bare one-turn prompt at startup (PR #142) and exits on a parse error",
               "template-dialects.md header (swift-transformers Tokenizer.swift:548, SwiftLM Package.resolved); "
               "incidents.md §1.5"};
  constexpr std::string_view kVerify = "incidents.md §1.7 (SharpAI/mlx-swift-lm Load.swift@12664a1: update(verify: .all))";
  p.loader.unexpected_tensors = {Verdict::breaks, "update(verify: .all) refuses keys the model does not have", kVerify};
  p.loader.missing_tensors = {Verdict::breaks, "update(verify: .all) refuses parameters the files do not provide",
                              kVerify};
  p.loader.stray_shards = {Verdict::breaks,
                           "globs every *.safetensors recursively and takes metadata from the first file: a stray "
                           "shard is loaded (#118; upstream #408 later made the index authoritative)",
                           "incidents.md §1.7 (same loader, other defects); §5 item 1"};
  p.loader.shard_glob = "*.safetensors";
  p.loader.glob_recursive = true;
  p.loader.tied_head = {Verdict::unknown, "", ""};
  p.loader.rotary_buffers = {Verdict::unknown, "", ""};
  p.loader.dtype_casts = {Verdict::unknown, "", ""};
  constexpr std::string_view kPred =
      "incidents.md §1.7 (quantized iff <path>.scales exists, then update(verify: .all)); §3 MLX affine";
  constexpr std::string_view kForeign =
      "inferred from incidents.md §1.7: only MLX names (weight/scales/biases) are parameters of a quantized "
      "module, so other schemes' tensors (qweight, weight_packed, weight_scale_inv, SCB) fail verification";
  p.quant = {
      {"mlx", "affine", Verdict::tolerates, 0, false, "MLX affine (groups 32/64/128, bits 2-8)", kPred},
      {"mlx", "", Verdict::unknown, 0, false, "mxfp4/nvfp4/mxfp8 modes: not recorded", kPred},
      {"compressed-tensors", "", Verdict::breaks, 0, false, "not an MLX layout", kForeign},
      {"gptq", "", Verdict::breaks, 0, false, "not an MLX layout", kForeign},
      {"awq", "", Verdict::breaks, 0, false, "not an MLX layout", kForeign},
      {"auto-round", "", Verdict::breaks, 0, false, "not an MLX layout", kForeign},
      {"fp8", "", Verdict::breaks, 0, false, "not an MLX layout", kForeign},
      {"bitsandbytes", "", Verdict::breaks, 0, false, "not an MLX layout", kForeign},
  };
  // Keys the Swift Codable configurations decode with `decode` (no decodeIfPresent): a
  // config.json without them fails with keyNotFound.
  constexpr std::string_view kQ2 =
      "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/Qwen2.swift@8c19d284 Qwen2Configuration.init(from:) "
      "(read for ckpt; not in the specs)";
  constexpr std::string_view kQ3 =
      "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/Qwen3.swift@1465e691 Qwen3Configuration.init(from:) "
      "(read for ckpt; not in the specs)";
  for (std::string_view key : {"hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
                               "rms_norm_eps", "vocab_size", "num_key_value_heads"}) {
    p.config.push_back({"qwen2", key, true, "", kQ2});
    p.config.push_back({"qwen3", key, true, "", kQ3});
  }
  p.config.push_back({"qwen3", "head_dim", true, "", kQ3});
  // rope_theta without a default (keyNotFound when config.json lacks it), at mlx-swift-lm HEAD
  // 14414441 (read for ckpt; not in the specs): an init(from:) that calls decode(), or a
  // synthesized Codable whose ropeTheta is a non-optional stored property — synthesis decodes
  // such a property with decode() even when it has an initial value (PhiMoE's `= 10000.0`).
  // Every other LLM configuration there uses decodeIfPresent with a default.
  struct RequiredRope {
    std::string_view model_type, source;
  };
  static constexpr RequiredRope kRequiredRope[] = {
      {"deepseek_v3", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/DeepseekV3.swift@14414441:34 (synthesized Codable, var ropeTheta: Float)"},
      {"baichuan_m1", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/BaichuanM1.swift@14414441:22 (synthesized Codable, var ropeTheta: Float)"},
      {"bailing_moe", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/BailingMoe.swift@14414441:28 (synthesized Codable, var ropeTheta: Float)"},
      {"minimax", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/MiniMax.swift@14414441:299 (synthesized Codable, var ropeTheta: Float)"},
      {"phimoe", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/PhiMoE.swift@14414441:22 (synthesized Codable, var ropeTheta: Float = 10000.0: the initial value is not a decoding default)"},
      {"mimo_v2_flash", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/MiMoV2Flash.swift@14414441:498 (synthesized Codable, var ropeTheta: Float)"},
      {"ernie4_5", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/Ernie4_5.swift@14414441:57 (container.decode(Float.self, forKey: .ropeTheta))"},
      {"exaone4", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/Exaone4.swift@14414441:272 (container.decode(Float.self, forKey: .ropeTheta))"},
      {"glm4_moe", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/GLM4MOE.swift@14414441:428 (container.decode(Float.self, forKey: .ropeTheta))"},
      {"glm4_moe_lite", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/GLM4MOELite.swift@14414441:701 (container.decode(Float.self, forKey: .ropeTheta))"},
      {"granitemoehybrid", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/GraniteMoeHybrid.swift@14414441:682 (container.decode(Float.self, forKey: .ropeTheta))"},
      {"lille-130m", "ml-explore/mlx-swift-lm Libraries/MLXLLM/Models/Lille130m.swift@14414441:233 (container.decode(Float.self, forKey: .ropeTheta))"},
  };
  for (const auto& r : kRequiredRope) p.config.push_back({r.model_type, "rope_theta", true, "", r.source});
  p.config.push_back({"qwen2", "rope_theta", false, "1000000", kQ2});
  p.config.push_back({"qwen3", "rope_theta", false, "1000000", kQ3});
  p.config.push_back({"qwen2", "tie_word_embeddings", false, "false", kQ2});
  p.config.push_back({"qwen3", "tie_word_embeddings", false, "false", kQ3});
  constexpr std::string_view kTok = "incidents.md §1.3 (tokenizer trick; Unigram variant #155)";
  p.tokenizers = {
      {"BPE", Verdict::tolerates, "byte-level BPE with merges (the SwiftLM fixtures)", kTok},
      {"Unigram", Verdict::tolerates, "since SwiftLM #155 (before: a BPE tokenizer that fatalErrors, see TK016)", kTok},
      {"WordLevel", Verdict::breaks, "swift-transformers refuses it (\"BPETokenizer requires merges\")", kTok},
  };
  p.notes = {
      "rope_theta is required (keyNotFound(\"rope_theta\") when absent, and the key must be at the top level of "
      "config.json: rope_parameters.rope_theta is not read) for deepseek_v3, baichuan_m1, bailing_moe, minimax, "
      "phimoe, mimo_v2_flash, ernie4_5, exaone4, glm4_moe, glm4_moe_lite, granitemoehybrid and lille-130m "
      "(mlx-swift-lm 14414441); the other configurations default it. Issue #14's DFlash drafter: its model type "
      "is not recorded",
      "the startup probe passes no tools: a template that fails only with tools passes startup (incidents.md §1.5, "
      "#168; ckpt's CT003)",
      "MoE is detected from the config (incidents.md §1.6, #112; ckpt's CF009)",
  };
  return p;
}

}  // namespace ckpt::engines::detail
