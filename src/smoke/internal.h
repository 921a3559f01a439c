// The smoke pass, inside: a model plan (family, hyperparameters, where each weight is), the
// forward pass over it, and the verdict drawn from its statistics.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/finding.h"
#include "ckpt/smoke.h"
#include "inspect/dequant.h"

namespace ckpt::smoke {

enum class Act : uint8_t { silu, gelu_tanh };

// RoPE as the config sets it up. Frequencies follow the HF rotary definitions (rotate_half
// layout: dimension j pairs with j + rot/2).
struct Rope {
  double theta = 10000;
  uint32_t rot_dim = 0;            // rotated dims per head (partial_rotary_factor * hd)
  std::string scaling;             // "", "linear", "llama3", "longrope"
  double factor = 1;               // linear / llama3
  double low_freq_factor = 1, high_freq_factor = 4, original_max = 8192;  // llama3
  std::vector<double> short_factor;  // longrope, for texts within original_max
  double attention_factor = 1;     // longrope: cos/sin multiplier
  std::vector<double> freq_factors;  // "factors": each frequency divided by its factor (GGUF rope_freqs)
  bool adjacent = false;           // pairs (2j, 2j+1) instead of (j, j + rot/2): llama.cpp's "normal"
                                   // RoPE over a `llama` GGUF's permuted q/k rows (gguf_plan.cpp)
};

// Everything the forward pass needs to know about a family, resolved from config.json.
struct Hyper {
  std::string family;              // "llama", "gemma2", "phi3", "mixtral", ...
  uint32_t H = 0, L = 0, nh = 0, nkv = 0, hd = 0, I = 0, V = 0;
  double eps = 1e-6;
  Act act = Act::silu;
  bool norm_plus_one = false;      // gemma: x * (1 + w)
  bool embed_scale = false;        // gemma: embeddings times sqrt(H), rounded to the model dtype
  bool sandwich_norms = false;     // gemma2/3: post-attention and post-feedforward norms on the branch
  bool qk_norm = false;            // qwen3, gemma3: RMSNorm over each head of q and k
  bool fused_qkv = false, fused_gate_up = false;  // phi3
  double attn_scale = 0;           // softmax scale (1/sqrt(hd) unless the config says otherwise)
  double attn_softcap = 0, final_softcap = 0;     // gemma2
  uint32_t sliding_window = 0;
  std::vector<bool> sliding;       // per layer: sliding-window attention
  Rope rope, rope_local;           // rope_local: gemma3's sliding layers
  // MoE
  uint32_t n_experts = 0, top_k = 0, moe_I = 0;
  bool norm_topk = true;
  std::vector<bool> moe_layer;     // per layer
  std::string expert_prefix;       // "block_sparse_moe" (mixtral) or "mlp" (qwen3_moe)
  bool mixtral_names = false;      // experts.N.w1/w2/w3
  st::DType model_dtype = st::DType::BF16;
  std::string prefix = "model.";   // text weights prefix
  std::string head = "lm_head.weight";
  bool tied = false;
  std::vector<std::string> notes;  // what was approximated (e.g. an unmodelled rope_scaling)
  // The output head's weight: the embedding when tied.
  std::string head_weight() const { return tied ? prefix + "embed_tokens.weight" : head; }
};

// A plan: the hyperparameters and the dequantized view of every weight.
struct Plan {
  Hyper hp;
  diff::dequant::Weights weights;
};

// From config.json and the weight table; false with a finding (SM010/SM011) when the pass
// cannot run.
bool make_plan(const Checkpoint& ck, Plan& plan, FindingSink& out);
// A target that is one GGUF model and no safetensors weights: planned from the GGUF's own
// metadata and encoded with its own vocabulary (gguf_plan.cpp).
bool is_gguf_target(const Checkpoint& ck);
bool make_gguf_plan(const Checkpoint& ck, Plan& plan, FindingSink& out);

// One stream of the forward pass: the text run through the model, optionally with one
// decoder layer left out (the located pass).
struct StreamOut {
  int32_t skipped_layer = -1;
  double nll_sum = 0;
  uint32_t predicted = 0, correct = 0;
  bool logits_finite = true;
  std::vector<float> logits;       // [T x V] when Options keep_logits
};

struct ForwardOut {
  std::vector<StreamOut> streams;  // [0]: the full model; then one per skipped layer
  std::vector<LayerStats> stats;   // of the full model: embed, each layer, final norm
  uint64_t weight_bytes = 0;
  std::string error;               // a weight could not be read (file, offset, what)
  std::string error_tensor;
};

struct ForwardOptions {
  unsigned threads = 1;
  bool locate = false;       // also run every skip-one-layer stream
  bool keep_logits = false;  // tests: keep the full logits of stream 0
};

ForwardOut forward(const Plan& plan, const std::vector<uint32_t>& tokens, const ForwardOptions& o);

// The text as the checkpoint's tokenizer encodes it (with its special tokens); false with
// `error` (file, what) when no tokenizer can encode it. `kind` names the file and model used.
bool encode_text(const Checkpoint& ck, const std::string& text, std::vector<uint32_t>& ids, std::string& kind,
                 std::string& error);

}  // namespace ckpt::smoke
