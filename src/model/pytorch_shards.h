// PyTorch weight files as shards of the format-neutral tensor table.
#pragma once
#include "ckpt/checkpoint.h"

namespace ckpt {

// Adds every PyTorch weight file the scan read (pytorch_model*.bin and any file the index
// names; not Meta's per-rank consolidated.*.pth, which the PT Meta-layout checks judge) to ck.shards as a Format::pytorch shard. Each tensor is a
// TensorEntry whose byte range is the span of the file its strided extent covers
// (Header::data_base = 0: offsets are absolute). Pickle-specific facts stay in ck.pickle_scans.
void add_pytorch_shards(Checkpoint& ck, const std::vector<std::string_view>& indexed_files);

// torch dtype name ("bfloat16") -> the table's DType (Unknown for qint8, complex128, ...).
DType torch_dtype(std::string_view name);

}  // namespace ckpt
