// libFuzzer: the GGUF reader on arbitrary bytes (as a whole file, or as the first part of a
// larger one), then the GG structure/metadata/split and GGUF conformance families on the result.
// Invariants checked on every input: no crash/UB (ASan/UBSan), every rejection explained, and
// what the reader calls loadable really lies inside the file.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "checks/family.h"
#include "ckpt/checkpoint.h"
#include "ckpt/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  // The first byte picks how much larger the "file" claims to be than the bytes handed over.
  const uint64_t extra = size ? (data[0] % 4 == 0 ? 0 : data[0] % 4 == 1 ? 7 : data[0] % 4 == 2 ? 1u << 20 : ~uint64_t{0} >> 1) : 0;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  const uint64_t file_size = size + (extra > ~uint64_t{0} - size ? 0 : extra);
  auto file = std::make_shared<gguf::File>(gguf::parse(bytes, file_size));

  if (!file->loadable() && file->problems.empty()) std::abort();  // every rejection is explained
  if (file->parsed && !file->metadata_ok) std::abort();
  if (file->loadable()) {
    if (!file->sizes_ok || file->data_start > file_size) std::abort();
    for (const auto& t : file->tensors)
      if (!t.size_ok || file->data_start + t.offset + t.nbytes > file_size) std::abort();
  }
  for (const auto& kv : file->kvs)
    if (kv.value.is_array() && kv.value.elem == gguf::ValueType::STRING && kv.value.strings.size() != kv.value.count) std::abort();

  Checkpoint ck;
  Shard sh;
  sh.file = "model.gguf";
  sh.header.file_size = file_size;
  sh.gguf = file;
  ck.gguf_shards.push_back(std::move(sh));
  GgufModel m;
  m.name = "model.gguf";
  m.shards = {0};
  ck.gguf_models.push_back(m);
  ck.finalize();
  FindingSink sink;
  checks::kGgufFamily.run(ck, VerifyOptions{}, sink);
  checks::kGgufConformanceFamily.run(ck, VerifyOptions{}, sink);
  for (const auto& f : sink.findings())
    if (f.code.size() != 5 || f.message.empty()) std::abort();
  return 0;
}
