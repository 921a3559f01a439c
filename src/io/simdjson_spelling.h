// A document Python's json accepts but simdjson declines, respelled so simdjson reads it. Used
// by the readers that need simdjson's DOM (tokenizer.json, the index's general path) once
// json::parse, the judge of validity, has accepted the text.
#pragma once
#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace ckpt::io {

// Integers beyond 64 bits become doubles (appended ".0", or +-1e308 beyond the double
// range) and NaN/Infinity become null. None of them can be a token id, so no check changes.
inline std::string simdjson_spelling(std::string_view t) {
  std::string out;
  out.reserve(t.size() + 64);
  size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (c == '"') {  // copy a string verbatim
      size_t j = i + 1;
      while (j < t.size() && t[j] != '"') j += t[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, t.size());
      out.append(t.substr(i, j - i));
      i = j;
      continue;
    }
    if (c == 'N' && t.substr(i, 3) == "NaN") { out += "null"; i += 3; continue; }
    if (c == 'I' && t.substr(i, 8) == "Infinity") { out += "null"; i += 8; continue; }
    if (c == '-' && t.substr(i, 9) == "-Infinity") { out += "null"; i += 9; continue; }
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i + (c == '-');
      size_t digits = 0;
      while (j < t.size() && t[j] >= '0' && t[j] <= '9') ++j, ++digits;
      const bool integer = j >= t.size() || (t[j] != '.' && t[j] != 'e' && t[j] != 'E');
      if (integer && digits > 18) {
        if (digits > 300) out += c == '-' ? "-1e308" : "1e308";
        else out.append(t.substr(i, j - i)).append(".0");
        i = j;
        continue;
      }
      while (j < t.size() && (std::isdigit(static_cast<unsigned char>(t[j])) || t[j] == '.' || t[j] == 'e' ||
                              t[j] == 'E' || t[j] == '+' || t[j] == '-'))
        ++j;
      out.append(t.substr(i, j - i));
      i = j;
      continue;
    }
    out.push_back(c);
    ++i;
  }
  return out;
}

}  // namespace ckpt::io
