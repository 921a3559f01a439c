// libFuzzer: ckpt::json::parse on arbitrary bytes. Accepted documents must survive
// dump() -> parse() unchanged (in both dump modes); rejected ones must carry a located error;
// the exact reader alone (parse_exact) must give what parse() gives, simdjson path or not.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ckpt/json.h"

namespace {

bool same(const ckpt::json::ParseResult& a, const ckpt::json::ParseResult& b) {
  if (a.ok() != b.ok()) return false;
  if (!a.ok())
    return a.error->message == b.error->message && a.error->offset == b.error->offset &&
           a.error->line == b.error->line && a.error->column == b.error->column;
  if (a.value.dump(true) != b.value.dump(true) || a.duplicates.size() != b.duplicates.size()) return false;
  for (size_t i = 0; i < a.duplicates.size(); ++i)
    if (a.duplicates[i].path != b.duplicates[i].path || a.duplicates[i].key != b.duplicates[i].key) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ckpt;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  json::ParseResult r = json::parse(text);
  if (!same(r, json::parse_exact(text))) std::abort();
  if (!r.ok()) {
    if (r.error->offset > size) std::abort();
    if (r.error->message.empty()) std::abort();
    if (json::locate_error(text).offset != r.error->offset) std::abort();
    return 0;
  }
  // A small depth limit must refuse what is deeper, never crash.
  json::parse(text, 4);
  for (bool ascii : {false, true}) {
    std::string again = r.value.dump(ascii);
    json::ParseResult r2 = json::parse(again);
    if (!r2.ok()) std::abort();
    if (r2.value.dump(true) != r.value.dump(true)) std::abort();  // the same types and values, big ints included
    if (!(r2.value == r.value)) {
      // NaN never equals itself; anything else differing is a round-trip bug.
      if (again.find("NaN") == std::string::npos) std::abort();
    }
  }
  return 0;
}
