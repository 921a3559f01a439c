// Findings: the one currency every check family pays in.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ckpt {

enum class Severity { info = 0, warning = 1, error = 2 };

std::string_view severity_name(Severity s);

// `file` is relative to the model root, `tensor` the full tensor name; an empty
// string means "not applicable" and renders as null in JSON.
struct Finding {
  std::string code;      // stable family code, e.g. "ST014"
  Severity severity = Severity::error;
  std::string message;   // expected vs actual
  std::string file;
  std::string tensor;
  std::string hint;      // likely cause or fix
  // The engine profiles the finding applies to (src/engines); empty = every engine.
  std::vector<std::string> engines;
};

// Collects findings from check families; the only way checks report.
class FindingSink {
 public:
  void add(Finding f) { findings_.push_back(std::move(f)); }
  void add(std::string code, Severity sev, std::string message, std::string_view file = {},
           std::string_view tensor = {}, std::string hint = {}) {
    findings_.push_back(Finding{std::move(code), sev, std::move(message), std::string(file),
                                std::string(tensor), std::move(hint), {}});
  }
  const std::vector<Finding>& findings() const { return findings_; }
  std::vector<Finding>& findings() { return findings_; }

 private:
  std::vector<Finding> findings_;
};

}  // namespace ckpt
