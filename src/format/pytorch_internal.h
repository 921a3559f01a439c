// Shared between the PyTorch container scan (pytorch.cpp) and the tensor walk (pytorch_tensors.cpp).
#pragma once
#include "ckpt/pytorch.h"
#include "format/pickle.h"

namespace ckpt::pt {

// Walks the object a state_dict pickle returned and appends its storages and tensors.
void extract_tensors(const pickle::Result& r, FileScan& out);

}  // namespace ckpt::pt
