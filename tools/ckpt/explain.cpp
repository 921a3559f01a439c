// ckpt explain CODE: a finding code's entry of docs/checks.md (meaning, why, example, fix). The
// document is compiled into the binary (cmake/docs.cmake), so what explain prints is the docs.
#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "ckpt/checks.h"
#include "cli_parse.h"
#include "subcommand.h"

namespace ckpt::cli {

extern const char kChecksMd[];
extern const size_t kChecksMd_size;

namespace {

struct Entry {
  std::string code, title;
  std::string_view body;  // the markdown between the heading and the next heading or rule
};

// Entries are "## CODE — title" headings; an entry ends at the next line starting with '#'
// or at a "---" rule.
std::vector<Entry> entries() {
  std::string_view doc(kChecksMd, kChecksMd_size);
  std::vector<Entry> out;
  size_t pos = 0;
  Entry* open = nullptr;
  size_t body_start = 0;
  auto close = [&](size_t end) {
    if (open) open->body = doc.substr(body_start, end - body_start);
    open = nullptr;
  };
  while (pos < doc.size()) {
    size_t eol = doc.find('\n', pos);
    if (eol == std::string_view::npos) eol = doc.size();
    std::string_view line = doc.substr(pos, eol - pos);
    if (!line.empty() && (line[0] == '#' || line == "---")) {
      close(pos);
      constexpr std::string_view dash = " — ";
      size_t sep = line.find(dash);
      if (line.rfind("## ", 0) == 0 && sep != std::string_view::npos) {
        out.push_back({std::string(line.substr(3, sep - 3)), std::string(line.substr(sep + dash.size())), {}});
        open = &out.back();
        body_start = eol + 1;
      }
    }
    pos = eol + 1;
  }
  close(doc.size());
  return out;
}

// The entry as plain text: each **Means:** / **Why:** / **Example:** / **Fix:** label starts a
// line ("Means: ..."), blank lines around the entry are dropped, everything else is verbatim.
std::string plain(std::string_view body) {
  static const std::string_view labels[] = {"Means", "Why", "Examples", "Example", "Fix"};
  std::string out;
  size_t i = 0;
  while (i < body.size()) {
    bool matched = false;
    if (body.compare(i, 2, "**") == 0) {
      for (auto label : labels) {
        std::string marker = "**" + std::string(label) + ":**";
        if (body.compare(i, marker.size(), marker) != 0) continue;
        while (!out.empty() && out.back() == ' ') out.pop_back();
        if (!out.empty() && out.back() != '\n') out += '\n';
        out += std::string(label) + ":";
        i += marker.size();
        matched = true;
        break;
      }
    }
    if (!matched) out += body[i++];
  }
  size_t a = out.find_first_not_of('\n');
  if (a == std::string::npos) return "";
  size_t b = out.find_last_not_of("\n ");
  return out.substr(a, b - a + 1) + "\n";
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

int run_explain(int argc, char** argv) {
  CLI::App app{"Print what a finding code means, why it matters, an example and the fix: its entry of "
               "docs/checks.md. A family prefix (ST, QZ, ...) lists the family's codes. "
               "Exit 0: printed; 2: unknown code or usage error."};
  app.name(argv[0]);
  std::string code;
  bool list = false;
  app.add_option("CODE", code, "a finding code (e.g. QZ004) or a family prefix (e.g. QZ)");
  app.add_flag("--list", list, "list every documented code with its title");
  if (auto rc = parse_args(app, argc, argv)) return *rc;
  const auto all = entries();
  code = upper(code);
  if (list || code.empty()) {
    if (!list) {
      std::fprintf(stderr, "ckpt explain: a CODE or --list is required\n");
      return 2;
    }
    for (const auto& e : all) std::printf("%-6s %s\n", e.code.c_str(), e.title.c_str());
    return 0;
  }
  for (const auto& e : all) {
    if (e.code != code) continue;
    std::string text = e.code + " — " + e.title + "\n\n" + plain(e.body);
    if (const CheckInfo* info = find_check(e.code))
      text += "\nDefault severity: " + std::string(severity_name(info->severity)) +
              " (--engine and the check itself may raise or lower it; see docs/checks.md).\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  bool family = !code.empty() && code.find_first_of("0123456789") == std::string::npos;
  size_t shown = 0;
  for (const auto& e : all)
    if (family && e.code.rfind(code, 0) == 0 && e.code.size() > code.size() &&
        std::isdigit(static_cast<unsigned char>(e.code[code.size()]))) {
      std::printf("%-6s %s\n", e.code.c_str(), e.title.c_str());
      ++shown;
    }
  if (shown) return 0;
  std::fprintf(stderr, "ckpt explain: '%s' is not a documented code; 'ckpt explain --list' lists them\n", code.c_str());
  return 2;
}

}  // namespace

CKPT_REGISTER_SUBCOMMAND("explain", "print what a finding code means, why, an example and the fix (docs/checks.md)",
                         run_explain);

}  // namespace ckpt::cli
