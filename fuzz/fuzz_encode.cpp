// libFuzzer: the encoders' readers and encoders. The input is loaded as a tokenizer.json and as a
// tokenizer.model; whatever loads encodes a fixed string (and a slice of the input itself).
// Invariants: no crash/UB/hang; a failed load or encode always says why.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/encode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt::encode;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  static const std::string kText =
      "Hello, world! I'm  12345 caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC <|im_start|>user\n\t x \xF0\x9F\x99\x82";
  std::string err;
  std::vector<uint32_t> ids;
  auto run = [&](const Encoder& e) {
    for (bool special : {false, true}) {
      err.clear();
      if (!encode(e, kText, special, ids, err) && err.empty()) std::abort();
      err.clear();
      if (!encode(e, bytes.substr(0, 256), special, ids, err) && err.empty()) std::abort();
    }
    (void)describe(e);
  };
  if (auto e = load_tokenizer_json(bytes, "", err)) run(*e);
  else if (err.empty()) std::abort();
  err.clear();
  if (auto e = load_sentencepiece(bytes, "", err)) run(*e);
  else if (err.empty()) std::abort();
  return 0;
}
