// vLLM: index-driven, strict about checkpoint keys its model code does not know. Sources:
// specs/quantization-layouts.md §10 (vLLM rows), specs/incidents.md §2 G3 (#144, #158),
// specs/architectures.md §1 (V:llama load_weights skip list), specs/template-dialects.md §4.
#include "engines/profiles.h"

namespace ckpt::engines::detail {

Profile vllm_profile() {
  Profile p;
  p.name = "vllm";
  p.title = "vLLM";
  p.family = "python-reference";
  p.reference = true;
  p.weights_format = "safetensors";
  p.dialect = {DialectKind::python_jinja2, "jinja2", {3, 1, 6},
               "chat templates are rendered by transformers' apply_chat_template (Python jinja2)",
               "template-dialects.md §4 (Python jinja2: transformers / vLLM / SGLang)"};
  p.loader.unexpected_tensors = {Verdict::breaks,
                                 "load_weights looks every checkpoint key up among the model's parameters; keys it "
                                 "does not know and does not skip (tied lm_head, rotary caches) fail the load — 27 "
                                 "superseded mtp.* tensors crashed vLLM at boot",
                                 "incidents.md §2 G3 item 4 (#144); architectures.md §1 (V:llama skip list)"};
  p.loader.missing_tensors = {Verdict::breaks,
                              "refused for float models; for quantized models the missing-weight check is off, so a "
                              "missing tensor (e.g. zero points) loads as uninitialised memory",
                              "incidents.md §2 G3 item 1"};
  p.loader.stray_shards = {Verdict::tolerates,
                           "with an index, only the files it names are read (weight_utils.py "
                           "filter_duplicate_safetensors_files)",
                           "vllm-project/vllm model_executor/model_loader/weight_utils.py (read for ckpt; not in the "
                           "specs); incidents.md §5 item 1"};
  p.loader.tied_head = {Verdict::tolerates, "lm_head.weight is skipped when the embeddings are tied",
                        "architectures.md §1 tied row (V:llama)"};
  p.loader.rotary_buffers = {Verdict::tolerates, "rotary_emb.inv_freq / cos_cached / sin_cached are skipped",
                             "architectures.md §1 inv_freq row (V:llama)"};
  p.loader.dtype_casts = {Verdict::unknown, "", ""};
  constexpr std::string_view kQ = "quantization-layouts.md §10 vLLM rows";
  p.quant = {
      {"compressed-tensors", "", Verdict::tolerates, 0, false, "compressed_tensors.py", kQ},
      {"gptq", "", Verdict::tolerates, 0, false, "gptq / gptq_marlin (any bit width, desc_act)", kQ},
      {"awq", "", Verdict::tolerates, 0, false, "awq", kQ},
      {"fp8", "", Verdict::tolerates, 0, false, "fp8 (block or per-tensor)", kQ},
      {"bitsandbytes", "", Verdict::tolerates, 0, false, "bitsandbytes", kQ},
      {"auto-round", "", Verdict::tolerates, 0, false, "auto-round", kQ},
      {"modelopt", "", Verdict::tolerates, 0, false, "modelopt / modelopt_fp4", kQ},
      {"mlx", "", Verdict::breaks, 0, false, "MLX-converted checkpoints are mlx-only",
       "architectures.md §7.3 (valid for mlx-lm but not for transformers or vLLM)"},
  };
  // vLLM reads config.json and the tokenizer through transformers (AutoConfig, AutoTokenizer).
  p.config = transformers_config_rules();
  p.tokenizers = transformers_tokenizer_rules();
  p.notes = {
      "config.json and the tokenizer are read with transformers' AutoConfig/AutoTokenizer, so transformers' "
      "defaults apply (vllm transformers_utils/config.py; read for ckpt, not in the specs)",
      "quantization config discovery: quantization_config, text_config.quantization_config, compression_config, "
      "then quantize_config.json and friends (quantization-layouts.md §10)",
      "refuses a max_model_len larger than the KV-cache capacity (peers.md, PR #2163)",
  };
  return p;
}

}  // namespace ckpt::engines::detail
