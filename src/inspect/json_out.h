// A small streaming JSON writer (indented, keys in the order written) for the inspect and diff
// reports. Strings go through json::append_quoted (ensure_ascii=false, as the other renderers).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/json.h"

namespace ckpt::inspect {

class JsonOut {
 public:
  JsonOut& begin_object(std::string_view key = {}) { return open(key, '{'); }
  JsonOut& end_object() { return close('}'); }
  JsonOut& begin_array(std::string_view key = {}) { return open(key, '['); }
  JsonOut& end_array() { return close(']'); }

  JsonOut& value(std::string_view key, std::string_view s) {
    item(key);
    json::append_quoted(out_, s);
    return *this;
  }
  JsonOut& value(std::string_view key, const char* s) { return value(key, std::string_view(s)); }
  JsonOut& value(std::string_view key, const std::string& s) { return value(key, std::string_view(s)); }
  JsonOut& value(std::string_view key, uint64_t v) {
    item(key);
    out_ += std::to_string(v);
    return *this;
  }
  JsonOut& value(std::string_view key, int64_t v) {
    item(key);
    out_ += std::to_string(v);
    return *this;
  }
  JsonOut& value(std::string_view key, int v) { return value(key, static_cast<int64_t>(v)); }
  JsonOut& value(std::string_view key, bool v) {
    item(key);
    out_ += v ? "true" : "false";
    return *this;
  }
  // A float with `digits` decimals (finite values only; others are null).
  JsonOut& number(std::string_view key, double v, int digits = 4) { return formatted(key, v, "%.*f", digits); }
  // A float with `significant` significant digits ("%.*g": 3.0517578e-05), null when not finite.
  JsonOut& precise(std::string_view key, double v, int significant = 9) { return formatted(key, v, "%.*g", significant); }
  JsonOut& null(std::string_view key) {
    item(key);
    out_ += "null";
    return *this;
  }
  // An already-serialised JSON value.
  JsonOut& raw(std::string_view key, std::string_view json_text) {
    item(key);
    out_ += json_text;
    return *this;
  }
  std::string str() const { return out_ + "\n"; }

 private:
  JsonOut& formatted(std::string_view key, double v, const char* spec, int precision) {
    item(key);
    if (!std::isfinite(v)) {
      out_ += "null";
      return *this;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, spec, precision, v);
    out_ += buf;
    return *this;
  }
  JsonOut& open(std::string_view key, char c) {
    item(key);
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  JsonOut& close(char c) {
    bool empty = first_.back();
    first_.pop_back();
    if (!empty) newline();
    out_ += c;
    return *this;
  }
  void newline() {
    out_ += '\n';
    out_.append(first_.size() * 2, ' ');
  }
  void item(std::string_view key) {
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
      newline();
    }
    if (!key.empty()) {
      json::append_quoted(out_, key);
      out_ += ": ";
    }
  }
  std::string out_;
  std::vector<bool> first_;
};

}  // namespace ckpt::inspect
