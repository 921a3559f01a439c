// The fit verdict: weights (as loaded) + KV cache + linear-attention state + an allowance for
// activations and workspaces, against --gpu-memory; and the largest context that fits.
//
// The allowance (docs/inspect.md "Fit"), unless --overhead replaces it:
//   fixed        1 GiB: the CUDA context, cuBLAS/NCCL workspaces and allocator slack
//   activations  T x (2H + nh*hd + 2*nkv*hd + 2*I_act) x 2 bytes: one prefill chunk of
//                T = min(context x batch, 2048) tokens holding the residual stream and its normed
//                copy, the q/k/v projections and the MLP's gate and up outputs (I_act: the dense
//                intermediate size, or k x expert size + shared-expert size for MoE layers)
//   logits       batch x V x 4 bytes: float32 logits of each sequence's last position
#include <algorithm>

#include "inspect/internal.h"

namespace ckpt::inspect {

namespace {

constexpr uint64_t kFixed = 1ull << 30;
constexpr uint64_t kChunkTokens = 2048;

uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t sat_mul(uint64_t a, uint64_t b) {
  unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return p > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(p);
}

Allowance allowance(const ModelInfo& m, const Context& cx, const Options& opts, uint64_t context) {
  Allowance a;
  if (opts.overhead) {
    a.fixed = *opts.overhead;
    a.overridden = true;
    return a;
  }
  const auto& v = cx.view;
  const uint64_t H = static_cast<uint64_t>(std::max<int64_t>(0, m.hidden));
  const uint64_t nh = static_cast<uint64_t>(std::max<int64_t>(0, m.heads));
  const uint64_t nkv = static_cast<uint64_t>(std::max<int64_t>(0, m.kv_heads));
  uint64_t hd = static_cast<uint64_t>(std::max<int64_t>(0, m.head_dim));
  if (!hd && nh) hd = H / nh;
  uint64_t I_act = static_cast<uint64_t>(std::max<int64_t>(0, m.intermediate));
  if (m.experts > 0 && m.experts_per_token > 0) {
    const int64_t expert_I = v.dim_or("moe_I", m.intermediate);
    const int64_t shared_I = v.dim("sI") ? v.dim_or("sI", 0) : v.dim_or("n_shared", 0) * expert_I;
    I_act = std::max<uint64_t>(I_act, sat_add(sat_mul(static_cast<uint64_t>(m.experts_per_token),
                                                      static_cast<uint64_t>(std::max<int64_t>(0, expert_I))),
                                              static_cast<uint64_t>(std::max<int64_t>(0, shared_I))));
  }
  a.fixed = kFixed;
  a.per_token = sat_mul(sat_add(sat_add(sat_mul(2, H), sat_mul(nh, hd)), sat_add(sat_mul(2 * nkv, hd), sat_mul(2, I_act))), 2);
  a.chunk_tokens = std::min(sat_mul(context, opts.batch), kChunkTokens);
  a.activations = sat_mul(a.chunk_tokens, a.per_token);
  a.logits = sat_mul(sat_mul(opts.batch, static_cast<uint64_t>(std::max<int64_t>(0, m.vocab))), 4);
  return a;
}

}  // namespace

Fit fit(const Inspection& in, const KvLayout& layout, const Options& opts, const Context& cx) {
  Fit f;
  f.gpu_memory = opts.gpu_memory.value_or(0);
  f.weights = in.bytes.in_memory;
  f.kv = in.kv.bytes;
  f.state = in.kv.state_bytes;
  f.allowance = allowance(in.model, cx, opts, in.kv.context);
  f.required = sat_add(sat_add(sat_add(f.weights, f.kv), f.state), f.allowance.total());
  f.fits = f.required <= f.gpu_memory;
  const unsigned __int128 diff = static_cast<unsigned __int128>(f.gpu_memory);
  f.headroom = f.fits ? static_cast<int64_t>(std::min<unsigned __int128>(diff - f.required, INT64_MAX))
                      : -static_cast<int64_t>(std::min<uint64_t>(f.required - f.gpu_memory, INT64_MAX));

  // the largest context that fits at this batch: every term grows with the context, so the
  // answer is found by bisection over [0, max_position_embeddings]
  const std::string dtype = in.kv.dtype;
  auto required_at = [&](uint64_t n) {
    KvCache c = kv_cache(layout, opts.kv, dtype, n, opts.batch);
    return sat_add(sat_add(f.weights, c.total_bytes), allowance(in.model, cx, opts, n).total());
  };
  const uint64_t cap = in.model.max_position_embeddings > 0 ? static_cast<uint64_t>(in.model.max_position_embeddings)
                                                              : (1ull << 24);
  if (required_at(cap) <= f.gpu_memory) {
    f.max_context = cap;
    f.max_context_limit = in.model.max_position_embeddings > 0 ? "max_position_embeddings" : "memory";
  } else {
    uint64_t lo = 0, hi = cap;  // required_at(hi) > budget
    if (required_at(1) > f.gpu_memory) {
      f.max_context = 0;
    } else {
      lo = 1;
      while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (required_at(mid) <= f.gpu_memory) lo = mid;
        else hi = mid;
      }
      f.max_context = lo;
    }
    f.max_context_limit = "memory";
  }
  return f;
}

}  // namespace ckpt::inspect
