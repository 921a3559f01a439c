// UTF-8 encoding of one code point, shared by every reader that turns escapes or code points
// back into bytes (JSON, pickles, Jinja, the tokenizer encoder).
#pragma once
#include <cstdint>
#include <string>

namespace ckpt::util {

// cp below 0x110000. A lone surrogate (U+D800-U+DFFF) is written in its 3-byte WTF-8 form, as
// Python's surrogatepass and the JSON reader's lone \uD800 escapes need.
inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace ckpt::util
