// libFuzzer: model.safetensors.index.json through the loader. The index reader is only
// reachable through load_checkpoint(), so the process makes one model directory (three real
// shards, one of them in a subdirectory) and each input is written over its index file.
// Then the IX and ST families run over the result. Invariants: no crash/UB, a located
// directory always loads, the weight map only names what the shards hold, findings are
// well-formed.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "checks/family.h"
#include "ckpt/checkpoint.h"
#include "fuzz_temp_dir.h"

namespace {

namespace fs = std::filesystem;

using fuzz::write_bytes;

// A safetensors file: 8-byte little-endian header length, the JSON header, then `data` bytes.
std::string safetensors(std::string_view header, size_t data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.append(header);
  out.append(data, '\x01');
  return out;
}

fs::path g_dir;

const fs::path& model_dir() {
  if (!g_dir.empty()) return g_dir;
  g_dir = fuzz::model_dir("index");
  write_bytes(g_dir / "model-00001-of-00002.safetensors",
              safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]}})",
                          16));
  write_bytes(g_dir / "model-00002-of-00002.safetensors",
              safetensors(R"({"__metadata__":{"format":"pt"},)"
                          R"("c":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})",
                          8));
  fs::create_directories(g_dir / "sub");
  write_bytes(g_dir / "sub" / "extra.safetensors",
              safetensors(R"({"d":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", 4));
  return g_dir;
}

void check_findings(const ckpt::FindingSink& sink, std::string_view family) {
  for (const auto& f : sink.findings())
    if (f.code.size() != 5 || f.code.compare(0, 2, family) != 0 || f.message.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  const fs::path& dir = model_dir();
  write_bytes(dir / "model.safetensors.index.json",
              std::string_view(reinterpret_cast<const char*>(data), size));

  LoadOptions opts;
  opts.threads = 1;
  LoadResult r = load_checkpoint(dir.string(), opts);
  if (!r.checkpoint || r.error) std::abort();  // the directory exists: it always loads
  const Checkpoint& ck = *r.checkpoint;
  if (!ck.index) std::abort();
  if (ck.index->json.error && !ck.index->empty()) std::abort();

  // The index reader works chunk by chunk: a buffer of 64-127 bytes (from the input's size)
  // puts the chunk boundaries everywhere, and must read the same index. That read also splits
  // every input between two threads (hand-over or not, the result must not change).
  LoadOptions small = opts;
  small.index_buffer_bytes = 64 + size % 64;
  small.threads = 2;
  small.index_split_min_bytes = 1;
  LoadResult rs = load_checkpoint(dir.string(), small);
  if (!rs.checkpoint || !rs.checkpoint->index) std::abort();
  const ShardIndex& a = *ck.index;
  const ShardIndex& b = *rs.checkpoint->index;
  if (a.names != b.names || a.file_of != b.file_of || a.files != b.files || a.total_size != b.total_size ||
      ck.index_positions() != rs.checkpoint->index_positions() ||
      a.schema_error != b.schema_error || a.json.error.has_value() != b.json.error.has_value())
    std::abort();

  // Every weight the map resolves is a tensor of the shard it points at.
  for (const auto& [name, w] : ck.weights()) {
    if (!w.entry || !w.shard) std::abort();
    if (w.entry->name != name) std::abort();
    if (ck.weight(name) == nullptr) std::abort();
  }

  FindingSink ix, st;
  checks::kIndexFamily.run(ck, VerifyOptions{}, ix);
  checks::kSafetensorsFamily.run(ck, VerifyOptions{}, st);
  check_findings(ix, "IX");
  check_findings(st, "ST");
  return 0;
}
