// transformers (Hugging Face, Python): the reference loader. Sources: specs/architectures.md
// §1 (T: transformers model/config files at the commits listed in its §0),
// specs/chat-templates.md §1, specs/quantization-layouts.md §10.
#include "engines/profiles.h"

namespace ckpt::engines::detail {

std::vector<ConfigRule> transformers_config_rules() {
  // architectures.md §1 "rope_theta default" and "tie_word_embeddings missing" rows.
  constexpr std::string_view kRope = "architectures.md §1 rope_theta row (T: base default_theta)";
  constexpr std::string_view kTie = "architectures.md §1 tie_word_embeddings row";
  return {
      {"*", "rope_theta", false, "10000", kRope},
      {"mixtral", "rope_theta", false, "1000000", kRope},
      {"gemma3_text", "rope_theta", false, "1000000", kRope},
      {"gpt_oss", "rope_theta", false, "150000", kRope},
      {"*", "tie_word_embeddings", false, "false", kTie},
      {"gemma", "tie_word_embeddings", false, "true", kTie},
      {"gemma2", "tie_word_embeddings", false, "true", kTie},
      {"gemma3_text", "tie_word_embeddings", false, "true", kTie},
      {"gemma3n_text", "tie_word_embeddings", false, "true", kTie},
      {"*", "num_key_value_heads", false, "num_attention_heads", "architectures.md §1 nkv row"},
      {"*", "head_dim", false, "hidden_size // num_attention_heads", "architectures.md §1 hd row"},
  };
}

std::vector<TokenizerRule> transformers_tokenizer_rules() {
  constexpr std::string_view kSrc =
      "incidents.md §1.3 (the tokenizers library builds these; only swift-transformers refuses WordLevel)";
  return {
      {"BPE", Verdict::tolerates, "built by the tokenizers library", kSrc},
      {"Unigram", Verdict::tolerates, "built by the tokenizers library", kSrc},
      {"WordLevel", Verdict::tolerates, "built by the tokenizers library", kSrc},
      {"WordPiece", Verdict::tolerates, "built by the tokenizers library", kSrc},
  };
}

Profile transformers_profile() {
  Profile p;
  p.name = "transformers";
  p.title = "Hugging Face transformers (from_pretrained, apply_chat_template)";
  p.family = "python-reference";
  p.reference = true;
  p.weights_format = "safetensors";
  p.dialect = {DialectKind::python_jinja2, "jinja2", {3, 1, 6},
               "ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, generation tag, "
               "json.dumps tojson: ckpt's own engine reproduces it",
               "chat-templates.md §1 (_compile_jinja_template in utils/chat_template_utils.py)"};
  p.loader.unexpected_tensors = {Verdict::tolerates, "unused checkpoint keys are logged as a warning and ignored",
                                 "architectures.md §1 missing-key row (only a shape mismatch raises)"};
  p.loader.missing_tensors = {Verdict::breaks,
                              "missing weights are initialised randomly (\"newly initialized\" warning): the model "
                              "loads and computes garbage",
                              "architectures.md §1 missing-key row"};
  p.loader.stray_shards = {Verdict::tolerates, "opens the files the index names (else model.safetensors): a stray shard is never read",
                           "architectures.md §1 which-files row"};
  p.loader.tied_head = {Verdict::tolerates, "a stored lm_head.weight of a tied model is ignored (_tied_weights_keys)",
                        "architectures.md §1 tied row"};
  p.loader.rotary_buffers = {Verdict::tolerates, "rotary_emb.inv_freq is a non-persistent buffer: the saved copy is ignored",
                             "architectures.md §1 inv_freq row"};
  p.loader.dtype_casts = {Verdict::tolerates, "float tensors are loaded into the model dtype (torch_dtype)",
                          "docs/checks.md AR010 (float tensors accept any float: loaders cast)"};
  constexpr std::string_view kQ = "quantization-layouts.md §10 transformers row (quantizers/base.py)";
  p.quant = {
      {"bitsandbytes", "", Verdict::tolerates, 0, false, "bnb quantizer", kQ},
      {"awq", "", Verdict::tolerates, 0, false, "AWQ quantizer", kQ},
      {"fp8", "", Verdict::tolerates, 0, false, "FineGrainedFP8 quantizer", kQ},
      {"hqq", "", Verdict::tolerates, 0, false, "HQQ quantizer", kQ},
      {"mxfp4", "", Verdict::tolerates, 0, false, "gpt-oss MXFP4 (integrations/mxfp4.py)", "quantization-layouts.md §8"},
      {"gptq", "", Verdict::tolerates, 0, false, "GPTQ of any bit width, desc_act included",
       "docs/checks.md QZ010 (valid for vLLM and transformers); architectures.md §6 GPTQ row"},
      {"mlx", "", Verdict::breaks, 0, false,
       "MLX-converted checkpoints (U32 packed weights with .scales/.biases, switch_mlp) are mlx-only",
       "architectures.md §7.3 (MLX sanitize transforms are one-way)"},
  };
  p.config = transformers_config_rules();
  p.tokenizers = transformers_tokenizer_rules();
  p.notes = {
      "config.json keys an architecture needs have defaults in its configuration class (architectures.md §1)",
      "tools and documents are always passed to the template, as None when absent (chat-templates.md §1)",
  };
  return p;
}

}  // namespace ckpt::engines::detail
