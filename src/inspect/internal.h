// Private to src/inspect: what the parts of `inspect()` share.
#pragma once
#include <optional>

#include "ckpt/arch.h"
#include "ckpt/quant.h"
#include "inspect/inspect.h"

namespace ckpt::inspect {

struct Context {
  arch::ConfigView view;                   // resolved config.json (arch null when unknown)
  std::optional<quant::QuantScheme> scheme;
};

// Parameters, bytes and the quantization summary into `out` (params.cpp).
void account(const Checkpoint& ck, const Context& cx, const Options& opts, Inspection& out);
// The fit verdict (fit.cpp).
Fit fit(const Inspection& in, const KvLayout& layout, const Options& opts, const Context& cx);
// The whole inspection of a GGUF-only target (gguf_inspect.cpp); false when `ck` holds other
// weights or no GGUF model.
bool inspect_gguf(const Checkpoint& ck, const Options& opts, Inspection& in);
// "f16" style name of the float dtype the model is served in (config torch_dtype; F32 -> f16, as
// vLLM's dtype "auto" does).
std::string serving_dtype(st::DType model_dtype);

}  // namespace ckpt::inspect
