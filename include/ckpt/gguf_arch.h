// What llama.cpp expects of a GGUF, per architecture: the hyperparameters it reads from
// `{arch}.*` and the tensor names and shapes (GGUF ne order, innermost first) they imply
// (specs/gguf.md §3.3, §4). One table serves conformance (the GGUF AR checks) and the GGUF
// fixture writer, so the two cannot disagree.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/gguf.h"

namespace ckpt::gguf_arch {

struct Hparams {
  std::string arch;
  uint64_t E = 0, L = 0, V = 0;    // embedding_length, block_count, token count
  uint64_t nextn = 0;              // nextn_predict_layers (trailing MTP layers, not judged)
  std::vector<uint64_t> F, H, Hkv; // per layer (scalars spread)
  uint64_t Dk = 0, Dv = 0, R = 0;  // key/value head width, rope dims
  uint64_t X = 0, Xu = 0, Fe = 0, S = 0, Ld = 0;  // experts, used, expert ffn, shared, dense lead
  uint64_t Rq = 0, Rkv = 0, Dkm = 0, Dvm = 0;     // deepseek2 MLA
  bool mla = false;
  std::string rope_scaling;        // rope.scaling.type ("" when absent)
};

// The architectures whose tensor sets are modelled.
std::vector<std::string_view> modelled_architectures();
bool is_modelled(std::string_view arch);

// Reads the hyperparameters of `arch` from the first shard's metadata, with llama.cpp's
// defaults; n_tokens is the length of tokenizer.ggml.tokens (0: use {arch}.vocab_size).
// Returns nullopt with `why` when a value the shapes need is missing or unusable.
std::optional<Hparams> read_hparams(const gguf::File& g, uint64_t n_tokens, std::string* why);

enum class Need : uint8_t { required, optional };

struct ExpectedTensor {
  std::string name;
  std::vector<uint64_t> ne;  // innermost first
  Need need = Need::required;
  // Alternative forms (fused attn_qkv vs attn_q/k/v, fused gate_up vs gate + up): tensors of
  // one `group` with different `form`s; the form some tensor of the file uses is expected,
  // the first form when none is present. Empty group = no alternative.
  std::string group;
  uint8_t form = 0;
  bool form_optional = false;  // the whole form may be absent (phi3's split q/k/v)
};

// Every tensor llama.cpp requests for these hyperparameters, layers 0..L-nextn-1.
std::vector<ExpectedTensor> expected_tensors(const Hparams& hp);

// Writing: hyperparameter KV pairs for a fixture of `arch` with these dimensions.
std::vector<std::pair<std::string, gguf::WriteValue>> hparam_kvs(const Hparams& hp);

}  // namespace ckpt::gguf_arch
