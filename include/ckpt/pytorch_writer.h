// Writes torch.save-compatible checkpoints (zip and legacy formats) for fixtures, with optional planted defects.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/tensor.h"

namespace ckpt::pt {

struct TensorToSave {
  std::string name;
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;
  std::vector<std::byte> data;  // numel x itemsize bytes (shorter: zero-filled)
};

struct WriterDefects {
  bool missing_record = false;          // the last tensor's data/<key> record is left out (PT004)
  bool short_storage = false;           // the first record holds half its declared bytes (PT005)
  bool tensor_outside_storage = false;  // the first storage is declared one element short of its tensor (PT007)
  bool dangerous_global = false;        // an extra entry whose value reduces posix.system (PK001)
  bool truncate_storage = false;        // the file ends halfway through the last storage record (PT002, PT006)
  // Not a defect: the zip's storages big-endian and its byteorder record "big", as torch >= 2.1
  // writes on a big-endian host (PT011; --deep swaps before scanning). Ignored by the legacy writer.
  bool big_endian = false;
};

// The torch storage class for a table dtype ("FloatStorage"), or nullptr when it has none.
const char* storage_class_for(DType d);

// The archive's bytes (root folder `root`); error set when a dtype has no torch storage class.
std::string torch_zip_bytes(const std::vector<TensorToSave>& tensors, const std::string& root,
                            const WriterDefects& defects = {}, std::string* error = nullptr);
// Writes the archive to `path` (root folder = its basename minus the last extension, as torch).
std::string write_torch_zip(const std::filesystem::path& path, const std::vector<TensorToSave>& tensors,
                            const WriterDefects& defects = {});

// The legacy stream torch.save(..., _use_new_zipfile_serialization=False) writes: five
// protocol-2 pickles (magic, protocol 1001, sys_info, the state_dict, the sorted storage keys),
// then each storage as an int64 element count and its little-endian bytes. The same defects
// apply (missing_record leaves the storage out of the key list and the blocks).
std::string torch_legacy_bytes(const std::vector<TensorToSave>& tensors, const WriterDefects& defects = {},
                               std::string* error = nullptr);
std::string write_torch_legacy(const std::filesystem::path& path, const std::vector<TensorToSave>& tensors,
                               const WriterDefects& defects = {});

// A header-only stand-in: tensors with empty `data` become holes of their full size (CRC 0),
// so a multi-GB shard costs a few KB of disk. Records or offsets past 4 GiB are written as ZIP64.
std::string write_torch_zip_sparse(const std::filesystem::path& path, const std::vector<TensorToSave>& tensors);

}  // namespace ckpt::pt
