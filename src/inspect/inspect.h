// ckpt inspect: what a checkpoint costs to serve, from its headers and config alone.
//
//   auto r = load_checkpoint(target);
//   inspect::Options o;                 // --context, --batch, --kv-dtype, --gpu-memory ...
//   inspect::Inspection in = inspect::inspect(*r.checkpoint, o);
//   std::string text = inspect::render_text(in), json = inspect::render_json(in);
//
// Parameters are counted from the tensors on disk (the weights a loader sees), each packed
// quantized weight at its logical element count; the architecture registry (arch::resolve_config)
// names the dimensions the KV-cache model needs and the quantization model (quant::parse_scheme,
// for_module) the bit width of each packed module. docs/inspect.md states every formula.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/arch.h"
#include "ckpt/checkpoint.h"

namespace ckpt::inspect {

// ---- parameters ---------------------------------------------------------------------------

enum class Component : uint8_t {
  Embedding,      // input token embeddings (and per-layer input embeddings)
  OutputHead,     // lm_head (absent when tied)
  Attention,      // self-attention and linear-attention projections, biases, sinks
  Mlp,            // dense MLP and MoE routers
  RoutedExperts,  // routed experts (per-expert, fused or stacked)
  SharedExperts,  // shared experts and their gates
  Mtp,            // multi-token-prediction layers (loaders for plain serving drop them)
  Towers,         // vision / audio towers and their projectors
  Norms,          // normalisation weights
  Other,          // everything else (AltUp, LAuReL, per-layer projections, ...)
  Count_
};
inline constexpr size_t kComponents = static_cast<size_t>(Component::Count_);
std::string_view component_key(Component c);  // stable JSON key: "embedding", "routed_experts", ...

struct Tally {
  uint64_t params = 0;   // logical parameters (packed weights at their unpacked element count)
  uint64_t bytes = 0;    // stored bytes (packed weights and their companions as stored)
  uint64_t tensors = 0;
};

// One tensor as inspect counted it.
struct TensorCost {
  std::string name;
  Component component = Component::Other;
  uint64_t params = 0;       // 0 for quantization companions (scales, zero points, g_idx ...)
  uint64_t bytes = 0;
  bool companion = false;    // a quantization companion of `module`
  bool quantized = false;    // the packed/quantized weight of `module`
  int bits = 0;              // for quantized weights: the bit width it was unpacked at
  bool loaded = true;        // false: loaders drop it (non-persistent buffers, a tied head copy)
  std::string module;        // module path for quantized weights and companions
};

struct FloatModule {         // Linear/Embedding weights a quantized checkpoint keeps in float
  std::string pattern;       // layer and expert indices replaced by '*'
  uint64_t count = 0, params = 0;
};

struct Quantization {
  bool quantized = false;    // a declaration was found or packed weights are on disk
  std::string method;        // "mlx", "gptq", "fp8", ... ("" when none)
  std::string format;        // the base module format ("MLX affine", "FP8 block", ...)
  int bits = 0, group_size = 0;  // the declared defaults (group -1: per channel)
  std::vector<std::string> declared_exclusions;  // patterns / module names the declaration excludes
  std::vector<FloatModule> float_modules;        // what stayed float, by pattern
  uint64_t quantized_modules = 0;
  uint64_t quantized_params = 0;                 // logical parameters of the quantized modules
  uint64_t quantized_bytes = 0;                  // their packed weights + companions, as stored
  double effective_bits = 0;                     // quantized_bytes * 8 / quantized_params
  std::map<int, uint64_t> params_by_bits;        // logical params per bit width (mixed recipes)
};

struct Parameters {
  uint64_t total = 0;                       // every loaded tensor's logical parameters
  uint64_t active = 0;                      // per token: dense + shared + routed * k / E
  uint64_t active_excluding_embedding = 0;  // the same without the input-embedding lookup tables
  std::array<Tally, kComponents> by_component{};
  std::map<std::string, Tally> by_dtype;    // by stored dtype name
  Tally not_loaded;                         // tensors on disk that loaders drop
};

struct Bytes {
  uint64_t files = 0;        // every file below the root (what the directory occupies)
  uint64_t shards = 0;       // the safetensors shards (headers included)
  uint64_t tensor_data = 0;  // every tensor's data as stored
  uint64_t in_memory = 0;    // the tensors loaders keep, as stored (MTP and towers included)
  uint64_t mtp = 0, towers = 0, not_loaded = 0;
};

// ---- KV cache -----------------------------------------------------------------------------

enum class LayerKind : uint8_t { Full, Sliding, Mla, Linear, KvShared };

struct AttnLayer {
  LayerKind kind = LayerKind::Full;
  uint64_t k_elems = 0;  // elements cached per token for K (MLA latent: kv_lora_rank + rope dim)
  uint64_t v_elems = 0;  // ... and for V (0 for the MLA latent: V is read from it)
  uint64_t window = 0;   // sliding layers
};

struct KvLayout {
  bool known = false;              // the architecture (or the generic fields) gave the dims
  std::string attention;           // "gqa", "mha", "mqa", "mla", "hybrid linear/gqa", ...
  std::vector<AttnLayer> layers;   // one per decoder layer (MTP layers cache nothing here)
  uint64_t sliding_window = 0;
  // Linear-attention layers (Gated DeltaNet): a fixed state per sequence.
  uint64_t conv_elems = 0;         // per linear layer: (conv kernel - 1) * conv channels
  uint64_t recurrent_elems = 0;    // per linear layer: value heads * key dim * value dim
  std::string conv_dtype, recurrent_dtype;  // "auto" choices made from the config ("bf16", "f32")
  // MLA (DeepSeek): the full K/V widths, for --mla full.
  uint64_t mla_full_k = 0, mla_full_v = 0;
  std::vector<std::string> notes;
};

struct KvOptions {
  std::string dtype = "auto";        // auto | f32 | f16 | bf16 | fp8 | q8_0 | q4_0
  bool mla_full = false;             // --mla full: cache K and V per head instead of the latent
  bool swa_full = false;             // --swa full: sliding layers allocate the whole context
  std::string state_dtype = "auto";  // auto | f32 | bf16 | f16 (linear-attention state)
};

struct KvCache {
  std::string attention;
  std::string dtype;                 // resolved cache dtype
  std::string mla_mode;              // "latent" | "full" | "" (not MLA)
  std::string swa_mode;              // "window" | "full"
  uint64_t full_layers = 0, sliding_layers = 0, mla_layers = 0, linear_layers = 0, kv_shared_layers = 0;
  uint64_t sliding_window = 0;
  uint64_t bytes_per_token = 0;               // every caching layer, while the context is within the windows
  uint64_t bytes_per_token_beyond_window = 0; // full-attention and MLA layers only
  uint64_t context = 0, batch = 1;
  uint64_t bytes = 0;                         // per-token KV for `context` tokens of `batch` sequences
  uint64_t state_conv_bytes = 0, state_recurrent_bytes = 0;  // per sequence, all linear layers
  std::string state_conv_dtype, state_recurrent_dtype;
  uint64_t state_bytes_per_sequence = 0;
  uint64_t state_bytes = 0;                   // * batch
  uint64_t total_bytes = 0;                   // bytes + state_bytes
  bool known = false;
};

// Bytes of one cached row of `elems` elements in a cache dtype (q8_0/q4_0 as ggml blocks of 32).
uint64_t row_bytes(std::string_view dtype, uint64_t elems);
// The per-layer cache layout the config implies (text config of `view`).
KvLayout kv_layout(const arch::ConfigView& view);
// KV bytes for `context` tokens of each of `batch` sequences, and the fixed state.
KvCache kv_cache(const KvLayout& layout, const KvOptions& opts, std::string_view model_dtype,
                 uint64_t context, uint64_t batch);

// ---- fit ----------------------------------------------------------------------------------

struct Allowance {            // activation/workspace allowance (docs/inspect.md "Fit")
  uint64_t fixed = 0;         // CUDA context, library workspaces, allocator slack
  uint64_t activations = 0;   // one prefill chunk's activations
  uint64_t logits = 0;        // fp32 logits of each sequence's last position
  uint64_t chunk_tokens = 0;  // tokens in that chunk: min(context * batch, 2048)
  uint64_t per_token = 0;     // activation bytes per chunk token
  bool overridden = false;    // --overhead replaced the formula
  uint64_t total() const { return fixed + activations + logits; }
};

struct Fit {
  uint64_t gpu_memory = 0;
  uint64_t weights = 0, kv = 0, state = 0;
  Allowance allowance;
  uint64_t required = 0;
  bool fits = false;
  int64_t headroom = 0;       // gpu_memory - required (negative: short by)
  uint64_t max_context = 0;   // largest context that fits at this batch (0: not even one token)
  std::string max_context_limit;  // "memory" | "max_position_embeddings"
};

// ---- the whole report ---------------------------------------------------------------------

struct ModelInfo {
  std::string model_type, text_model_type;
  bool architecture_known = false;
  std::string dtype;  // config torch_dtype as a safetensors dtype name
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0, intermediate = 0;
  int64_t experts = 0, experts_per_token = 0, max_position_embeddings = 0;
  bool tied = false;
};

// An engine's KV-cache layout where engines differ (engine_kv.cpp).
struct EngineKv {
  std::string_view engine;     // canonical name, as `ckpt engines` lists it
  bool mla_full;               // MLA models: per-head K and V instead of the latent
  std::string_view kv_dtype;   // default cache dtype ("" = the serving dtype of the weights)
  std::string_view note, source;
};
// nullptr for an engine ckpt has no KV facts for.
const EngineKv* engine_kv(std::string_view engine);

struct Options {
  KvOptions kv;
  std::string engine;                   // canonical engine name whose layout was applied ("" = none)
  uint64_t context = 0;                 // 0: max_position_embeddings (else 4096)
  uint64_t batch = 1;
  std::optional<uint64_t> gpu_memory;   // bytes
  std::optional<uint64_t> overhead;     // replaces the allowance formula
  bool keep_tensors = false;            // fill Inspection::tensors (tests, debugging)
};

struct Inspection {
  std::string target;
  std::string engine;                   // the engine whose KV layout was used ("" = none)
  ModelInfo model;
  Parameters params;
  Bytes bytes;
  Quantization quant;
  KvCache kv;
  std::optional<Fit> fit;
  std::vector<std::string> notes;
  std::vector<TensorCost> tensors;      // with Options::keep_tensors
};

Inspection inspect(const Checkpoint& ck, const Options& opts = {});

std::string render_text(const Inspection& in);
std::string render_json(const Inspection& in);

// "80GB" (10^9), "80GiB" / "80G" (2^30), "512MiB", "1.5T", plain bytes. nullopt when malformed.
std::optional<uint64_t> parse_size(std::string_view text);
// "24.0 GiB" style, for people.
std::string human_bytes(uint64_t bytes);

// The component a tensor or module path belongs to (exposed for tests). `layers` is
// num_hidden_layers: a decoder layer index at or past it is an MTP layer.
Component classify(std::string_view name, const arch::ConfigView& view, int64_t layers);

}  // namespace ckpt::inspect
