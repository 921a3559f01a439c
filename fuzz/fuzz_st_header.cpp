// libFuzzer: the safetensors header parser on arbitrary bytes, then the ST check family
// over the parsed header (offset sorting, size arithmetic, coverage of the data section).
// Invariants checked on every input: no crash/UB (ASan/UBSan), framing claims are true.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "checks/family.h"
#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  // The first byte (when present) picks how much larger the "file" claims to be than the
  // bytes handed over, so truncated-data paths are reached as well as exact files.
  uint64_t extra = size ? (data[0] % 4 == 0 ? 0 : data[0] % 4 == 1 ? 7 : data[0] % 4 == 2 ? 1u << 20 : ~uint64_t{0} >> 1) : 0;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  uint64_t file_size = size + (extra > ~uint64_t{0} - size ? 0 : extra);
  st::Header h = st::parse_header(bytes, file_size);

  if (h.framing_ok && (h.header_len > st::kMaxHeaderBytes || h.data_start() > file_size || h.data_start() > size)) std::abort();
  if (h.parsed && !h.framing_ok) std::abort();
  if (!h.parsed && !h.tensors.empty()) std::abort();
  if (!h.parsed && !h.framing_ok && h.problems.empty()) std::abort();  // every failure is explained
  for (const auto& t : h.tensors)
    if (t.dtype == st::DType::Unknown) {
      bool reported = false;
      for (const auto& p : h.problems) reported |= p.rule == st::Rule::UnknownDType && p.tensor == t.name;
      if (!reported) std::abort();
    }

  Checkpoint ck;
  Shard sh;
  sh.file = "model.safetensors";
  sh.header = std::move(h);
  ck.shards.push_back(std::move(sh));
  ck.finalize();
  FindingSink sink;
  checks::kSafetensorsFamily.run(ck, VerifyOptions{}, sink);
  for (const auto& f : sink.findings())
    if (f.code.size() != 5 || f.code.compare(0, 2, "ST") != 0 || f.message.empty()) std::abort();
  return 0;
}
