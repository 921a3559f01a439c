// Line diff (Myers' O(ND) greedy algorithm, "An O(ND) Difference Algorithm and Its Variations",
// 1986) and its unified, line-numbered hunks.
#include <algorithm>
#include <cstdint>

#include "inspect/diff.h"

namespace ckpt::diff {

namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      out.push_back(text.substr(start));
      break;
    }
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// The edit script as a sequence of (op, index in a, index in b): ' ' keep, '-' delete, '+' insert.
struct Edit {
  char op;
  size_t a, b;
};

std::vector<Edit> myers(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b,
                        size_t max_d) {
  const int64_t n = static_cast<int64_t>(a.size()), m = static_cast<int64_t>(b.size());
  const int64_t max = n + m;
  std::vector<int64_t> v(static_cast<size_t>(2 * max + 2), 0);
  std::vector<std::vector<int64_t>> trace;
  const int64_t off = max + 1;
  int64_t found = -1;
  for (int64_t d = 0; d <= max && d <= static_cast<int64_t>(max_d); ++d) {
    trace.push_back(v);
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x;
      if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1])) x = v[off + k + 1];
      else x = v[off + k - 1] + 1;
      int64_t y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      v[off + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    if (found >= 0) break;
  }
  std::vector<Edit> edits;
  if (found < 0) {  // too different to align within max_d: everything replaced
    for (size_t i = 0; i < a.size(); ++i) edits.push_back({'-', i, 0});
    for (size_t j = 0; j < b.size(); ++j) edits.push_back({'+', a.size(), j});
    return edits;
  }
  int64_t x = n, y = m;
  for (int64_t d = found; d > 0; --d) {
    const auto& vd = trace[static_cast<size_t>(d)];
    const int64_t k = x - y;
    int64_t prev_k;
    if (k == -d || (k != d && vd[off + k - 1] < vd[off + k + 1])) prev_k = k + 1;
    else prev_k = k - 1;
    const int64_t prev_x = vd[off + prev_k], prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      --x, --y;
      edits.push_back({' ', static_cast<size_t>(x), static_cast<size_t>(y)});
    }
    if (x == prev_x) edits.push_back({'+', static_cast<size_t>(x), static_cast<size_t>(--y)});
    else edits.push_back({'-', static_cast<size_t>(--x), static_cast<size_t>(y)});
  }
  while (x > 0 && y > 0) {
    --x, --y;
    edits.push_back({' ', static_cast<size_t>(x), static_cast<size_t>(y)});
  }
  std::reverse(edits.begin(), edits.end());
  return edits;
}

}  // namespace

std::vector<Hunk> line_diff(std::string_view a_text, std::string_view b_text, size_t context) {
  const auto a = split_lines(a_text), b = split_lines(b_text);
  const auto edits = myers(a, b, 20000);
  std::vector<Hunk> hunks;
  // group changes whose context windows touch into one hunk
  size_t i = 0, prev_stop = 0;
  while (i < edits.size()) {
    if (edits[i].op == ' ') {
      ++i;
      continue;
    }
    size_t start = std::max(prev_stop, i >= context ? i - context : 0);
    size_t end = i;  // one past the last change of the hunk
    size_t j = i;
    while (j < edits.size()) {
      if (edits[j].op != ' ') {
        end = j + 1;
        ++j;
        continue;
      }
      size_t run = j;
      while (run < edits.size() && edits[run].op == ' ') ++run;
      if (run == edits.size() || run - j > 2 * context) break;
      j = run;
    }
    size_t stop = std::min(edits.size(), end + context);
    Hunk h;
    bool a_set = false, b_set = false;
    for (size_t e = start; e < stop; ++e) {
      const Edit& ed = edits[e];
      HunkLine l;
      l.op = ed.op;
      if (ed.op != '+') {
        l.a_line = ed.a + 1;
        if (!a_set) h.a_start = l.a_line, a_set = true;
        ++h.a_count;
      }
      if (ed.op != '-') {
        l.b_line = ed.b + 1;
        if (!b_set) h.b_start = l.b_line, b_set = true;
        ++h.b_count;
      }
      l.text = std::string(ed.op == '+' ? b[ed.b] : a[ed.a]);
      h.lines.push_back(std::move(l));
    }
    // an empty side starts after the line before it, as diff -u writes it
    if (!a_set) h.a_start = start < edits.size() ? edits[start].a : a.size();
    if (!b_set) h.b_start = start < edits.size() ? edits[start].b : b.size();
    hunks.push_back(std::move(h));
    i = prev_stop = stop;
  }
  return hunks;
}

std::string render_hunks(const std::vector<Hunk>& hunks, std::string_view name_a, std::string_view name_b) {
  std::string o;
  o += "--- " + std::string(name_a) + "\n+++ " + std::string(name_b) + "\n";
  for (const auto& h : hunks) {
    o += "@@ -" + std::to_string(h.a_start) + "," + std::to_string(h.a_count) + " +" + std::to_string(h.b_start) +
         "," + std::to_string(h.b_count) + " @@\n";
    for (const auto& l : h.lines) {
      char nums[48];
      std::snprintf(nums, sizeof nums, "%5s %5s ", l.a_line ? std::to_string(l.a_line).c_str() : "",
                    l.b_line ? std::to_string(l.b_line).c_str() : "");
      o += nums;
      o += l.op;
      o += ' ';
      o += l.text;
      o += '\n';
    }
  }
  return o;
}

}  // namespace ckpt::diff
