// libFuzzer: the TK checks over tokenizer files. An input is up to five parts separated by
// the byte 0x1E (ASCII record separator, never needed inside these files):
//   tokenizer.json 0x1E tokenizer_config.json 0x1E config.json 0x1E chat_template.jinja
//   0x1E embedding rows (decimal)
// Each non-empty part is written as that file of a model directory made once per process
// (absent parts are absent files), the directory goes through the loader as `ckpt verify`
// loads it, and the TK checks run over the result with the given embedding rows.
// Invariants: no crash/UB, the directory always loads, every finding is a TK code with a
// message.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/tokenizer.h"
#include "fuzz_temp_dir.h"

namespace {

namespace fs = std::filesystem;

const fs::path& model_dir() { return fuzz::model_dir("tokenizer"); }

void put(const fs::path& p, std::string_view bytes) {
  std::error_code ec;
  if (bytes.empty()) {
    fs::remove(p, ec);
    return;
  }
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  while (parts.size() < 4) {
    size_t sep = in.find('\x1e');
    if (sep == std::string_view::npos) break;
    parts.push_back(in.substr(0, sep));
    in.remove_prefix(sep + 1);
  }
  parts.push_back(in);
  parts.resize(5);

  const fs::path& dir = model_dir();
  put(dir / "tokenizer.json", parts[0]);
  put(dir / "tokenizer_config.json", parts[1]);
  put(dir / "config.json", parts[2]);
  put(dir / "chat_template.jinja", parts[3]);

  tok::CheckInput input;
  if (!parts[4].empty() && parts[4].size() <= 12) {
    uint64_t rows = 0;
    bool digits = true;
    for (char c : parts[4]) {
      if (c < '0' || c > '9') digits = false;
      else rows = rows * 10 + uint64_t(c - '0');
    }
    if (digits) input.embedding = tok::EmbeddingInfo{rows, "model.embed_tokens.weight", "model.safetensors"};
  }

  LoadOptions opts;
  opts.threads = 1;
  LoadResult r = load_checkpoint(dir.string(), opts);
  if (!r.checkpoint || r.error) std::abort();
  FindingSink sink;
  tok::check_tokenizer(*r.checkpoint, input, sink);
  for (const auto& f : sink.findings())
    if (f.code.size() != 5 || f.code.compare(0, 2, "TK") != 0 || f.message.empty()) std::abort();
  (void)tok::template_literal_tokens(parts[3]);
  return 0;
}
