// libFuzzer: ckpt::json::parse on arbitrary bytes. Accepted documents must survive
// dump() -> parse() unchanged; rejected ones must carry a located error.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ckpt/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  json::ParseResult r = json::parse(text);
  if (!r.ok()) {
    if (r.error->offset > size) std::abort();
    if (r.error->message.empty()) std::abort();
    return 0;
  }
  // A small depth limit must refuse what is deeper, never crash.
  json::parse(text, 4);
  std::string again = r.value.dump();
  json::ParseResult r2 = json::parse(again);
  if (!r2.ok()) std::abort();
  if (!(r2.value == r.value)) {
    // NaN never equals itself; anything else differing is a round-trip bug.
    if (again.find("NaN") == std::string::npos) std::abort();
  }
  return 0;
}
