// PyTorch weights beside safetensors weights (PT014, and PT022 with --deep): pytorch_twins.cpp.
#pragma once
#include "ckpt/checks.h"

namespace ckpt::checks {

// Says which format loaders read and whether the .bin holds the same tensors; with opts.deep,
// compares their bytes tensor by tensor in bounded memory.
void both_formats(const Checkpoint& ck, const VerifyOptions& opts, FindingSink& out);

}  // namespace ckpt::checks
