// Renderers for a Diff: text for people (lists capped at 20 entries per kind), JSON with stable
// keys for scripts (lists capped at 1000 entries; the counts are always complete).
#include <cstdio>
#include <map>

#include "inspect/diff.h"
#include "inspect/inspect.h"
#include "inspect/json_out.h"

namespace ckpt::diff {

namespace {

constexpr size_t kTextCap = 20, kJsonCap = 1000;

std::string clip(const std::string& s, size_t n = 100) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

std::string short_blob(const std::string& b) { return b.size() > 12 ? b.substr(0, 12) : b; }

std::string side_line(const Side& s) {
  std::string o = s.target;
  if (!s.commit.empty()) o += " (" + s.repo + " snapshot " + s.commit.substr(0, 12) + ")";
  else if (s.root != s.target) o += " (" + s.root + ")";
  return o;
}

std::string token_repr(const std::string& t) {
  std::string o = "\"";
  for (unsigned char c : t) {
    if (c == '\n') o += "\\n";
    else if (c == '\t') o += "\\t";
    else if (c == '"') o += "\\\"";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      o += buf;
    } else o += static_cast<char>(c);
  }
  return o + "\"";
}

}  // namespace

std::string shape_text(const std::vector<uint64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

std::string render_text(const Diff& d) {
  std::string o;
  o += "A: " + side_line(d.a) + "\nB: " + side_line(d.b) + "\n";
  if (d.identical()) {
    o += "\nidentical";
    if (!d.files_not_compared.empty())
      o += " (" + std::to_string(d.files_not_compared.size()) + " weight file(s) of equal size and header not read; --deep compares their content)";
    o += "\n";
  }

  // files
  size_t added = 0, removed = 0, changed = 0;
  for (const auto& f : d.files) (f.change == Change::Added ? added : f.change == Change::Removed ? removed : changed)++;
  o += "\nfiles: " + std::to_string(changed) + " changed, " + std::to_string(added) + " added, " +
       std::to_string(removed) + " removed, " + std::to_string(d.files_unchanged) + " unchanged";
  if (!d.files_not_compared.empty()) o += ", " + std::to_string(d.files_not_compared.size()) + " not compared";
  o += "\n";
  size_t shown = 0;
  for (const auto& f : d.files) {
    if (shown++ == kTextCap) {
      o += "  ... " + std::to_string(d.files.size() - kTextCap) + " more\n";
      break;
    }
    o += "  " + std::string(change_name(f.change)) + " " + f.path;
    if (f.change == Change::Changed) {
      std::string why;
      if (f.basis == "blob") why = "blob " + short_blob(f.blob_a) + " -> " + short_blob(f.blob_b);
      else if (f.basis == "size") why = "size";
      else if (f.basis == "sha256") why = "sha256 " + short_blob(f.sha_a) + " -> " + short_blob(f.sha_b);
      else why = f.basis;
      o += " (" + why + ", " + std::to_string(f.size_a) + " -> " + std::to_string(f.size_b) + " bytes)";
    } else {
      o += " (" + std::to_string(f.change == Change::Added ? f.size_b : f.size_a) + " bytes)";
    }
    o += "\n";
  }
  if (d.weight_files) {
    o += "weights: ";
    if (!d.weights_identical) o += "CHANGED";
    else if (d.weights_basis == "blobs") o += "unchanged (same blobs)";
    else if (d.weights_basis == "sha256") o += "unchanged (same sha256)";
    else o += "unchanged by size and header (content not read; --deep compares it)";
    o += ", " + std::to_string(d.weight_files) + " weight file" + (d.weight_files == 1 ? "" : "s");
    o += "\n";
  }

  // config keys
  if (!d.values.empty()) {
    o += "\nconfig: " + std::to_string(d.values.size()) + " key(s)\n";
    shown = 0;
    for (const auto& v : d.values) {
      if (shown++ == kTextCap * 2) {
        o += "  ... " + std::to_string(d.values.size() - 2 * kTextCap) + " more\n";
        break;
      }
      o += "  " + v.file + " " + v.path + ": ";
      if (v.change == Change::Added) o += "added " + clip(v.b);
      else if (v.change == Change::Removed) o += "removed (was " + clip(v.a) + ")";
      else o += clip(v.a) + " -> " + clip(v.b);
      o += "\n";
    }
  }

  // templates
  for (const auto& t : d.templates) {
    o += "\nchat template '" + t.name + "' " + std::string(change_name(t.change)) + "\n";
    o += render_hunks(t.hunks, "A " + (t.origin_a.empty() ? std::string("(none)") : t.origin_a),
                      "B " + (t.origin_b.empty() ? std::string("(none)") : t.origin_b));
  }

  // tokenizer
  const TokenizerDiff& k = d.tokenizer;
  if (!k.added.empty() || !k.removed.empty() || !k.renumbered.empty() || !k.special.empty() ||
      k.model_a != k.model_b || k.merges_a != k.merges_b) {
    o += "\ntokenizer:";
    if (k.compared)
      o += " " + std::to_string(k.added.size()) + " added, " + std::to_string(k.removed.size()) + " removed, " +
           std::to_string(k.renumbered.size()) + " renumbered (" + std::to_string(k.vocab_a) + " -> " +
           std::to_string(k.vocab_b) + " tokens)";
    o += "\n";
    if (k.model_a != k.model_b) o += "  model " + k.model_a + " -> " + k.model_b + "\n";
    if (k.merges_a != k.merges_b) o += "  merges " + std::to_string(k.merges_a) + " -> " + std::to_string(k.merges_b) + "\n";
    auto list = [&](const char* what, const std::vector<TokenChange>& v) {
      for (size_t i = 0; i < v.size() && i < kTextCap; ++i) {
        o += std::string("  ") + what + " " + token_repr(v[i].token);
        if (v[i].id_a >= 0 && v[i].id_b >= 0) o += " " + std::to_string(v[i].id_a) + " -> " + std::to_string(v[i].id_b);
        else o += " id " + std::to_string(v[i].id_a >= 0 ? v[i].id_a : v[i].id_b);
        o += "\n";
      }
      if (v.size() > kTextCap) o += "  ... " + std::to_string(v.size() - kTextCap) + " more " + what + "\n";
    };
    list("added", k.added);
    list("removed", k.removed);
    list("renumbered", k.renumbered);
    for (const auto& s : k.special)
      o += "  special " + s.name + ": " + (s.a.empty() ? "(none)" : s.a) + " -> " + (s.b.empty() ? "(none)" : s.b) + "\n";
  }

  // tensors
  if (!d.tensors.empty()) {
    std::map<TensorDiff::Kind, size_t> count;
    for (const auto& t : d.tensors) count[t.kind]++;
    o += "\ntensors:";
    for (const auto& [kind, n] : count) o += " " + std::to_string(n) + " " + std::string(tensor_change_name(kind)) + ",";
    o += " " + std::to_string(d.tensors_unchanged) + " unchanged\n";
    std::map<TensorDiff::Kind, size_t> printed;
    for (const auto& t : d.tensors) {
      size_t& p = printed[t.kind];
      if (p++ == kTextCap) o += "  ... " + std::to_string(count[t.kind] - kTextCap) + " more " + std::string(tensor_change_name(t.kind)) + "\n";
      if (p > kTextCap) continue;
      o += "  " + std::string(tensor_change_name(t.kind)) + " " + t.name + ": ";
      switch (t.kind) {
        case TensorDiff::Added: o += t.b.dtype + " " + shape_text(t.b.shape) + " in " + t.b.file; break;
        case TensorDiff::Removed: o += t.a.dtype + " " + shape_text(t.a.shape) + " in " + t.a.file; break;
        case TensorDiff::Reshaped: o += shape_text(t.a.shape) + " -> " + shape_text(t.b.shape); break;
        case TensorDiff::Retyped: o += t.a.dtype + " -> " + t.b.dtype; break;
        case TensorDiff::Moved: o += t.a.file + " -> " + t.b.file; break;
        case TensorDiff::ContentChanged: o += "bytes differ (" + t.a.dtype + " " + shape_text(t.a.shape) + ")"; break;
      }
      o += "\n";
    }
  } else if (d.a.tensors || d.b.tensors) {
    o += "\ntensors: " + std::to_string(d.tensors_unchanged) + " unchanged (names, dtypes, shapes, shards)\n";
  }
  if (d.numeric_compared) {
    const size_t compared = d.numeric.size() + d.numeric_identical;
    o += "\nvalues (--deep, quantized weights dequantized): " + std::to_string(compared) + " weight(s) compared, " +
         std::to_string(d.numeric_identical) + " equal, " + std::to_string(d.numeric.size()) + " differ";
    if (!d.numeric_skipped.empty()) o += ", " + std::to_string(d.numeric_skipped.size()) + " not compared";
    o += "\n";
    if (!d.numeric.empty()) {
      o += "  worst first; rel L2 = ||B-A|| / ||A||\n";
      char head[160];
      std::snprintf(head, sizeof head, "  %-10s %-9s %-11s %s\n", "rel L2", "cosine", "max |B-A|", "weight (A -> B)");
      o += head;
    }
    size_t shown = 0;
    for (const auto& n : d.numeric) {
      if (shown++ == kTextCap) {
        o += "  ... " + std::to_string(d.numeric.size() - kTextCap) + " more (--format json lists them)\n";
        break;
      }
      if (!n.error.empty()) {
        o += "  unreadable " + n.name + ": " + n.error + "\n";
        continue;
      }
      char buf[96];
      char cos[16] = "-";
      if (n.cosine) std::snprintf(cos, sizeof cos, "%.6f", *n.cosine);
      std::snprintf(buf, sizeof buf, "  %-10.3e %-9s %-11.3e ", n.rel_l2, cos, n.max_abs);
      o += buf + n.name + " (" + (n.encoding_a == n.encoding_b ? n.encoding_a : n.encoding_a + " -> " + n.encoding_b) + ")";
      if (n.nonfinite) o += ", " + std::to_string(n.nonfinite) + " NaN/Inf element(s) left out";
      o += "\n";
    }
    shown = 0;
    for (const auto& [name, why] : d.numeric_skipped) {
      if (shown++ == kTextCap) {
        o += "  ... " + std::to_string(d.numeric_skipped.size() - kTextCap) + " more not compared\n";
        break;
      }
      o += "  not compared " + name + ": " + why + "\n";
    }
  }
  if (!d.notes.empty()) {
    o += "\nnotes\n";
    for (const auto& n : d.notes) o += "  - " + n + "\n";
  }
  return o;
}

std::string render_json(const Diff& d) {
  inspect::JsonOut j;
  j.begin_object();
  j.value("ckpt_version", CKPT_VERSION);
  for (auto [key, s] : {std::pair{"a", &d.a}, std::pair{"b", &d.b}}) {
    j.begin_object(key).value("target", s->target).value("root", s->root);
    if (s->repo.empty()) j.null("repo").null("commit");
    else j.value("repo", s->repo).value("commit", s->commit);
    j.value("files", s->files).value("tensors", s->tensors).end_object();
  }
  j.value("identical", d.identical());

  j.begin_object("files");
  for (Change c : {Change::Added, Change::Removed, Change::Changed}) {
    j.begin_array(change_name(c));
    for (const auto& f : d.files) {
      if (f.change != c) continue;
      j.begin_object().value("path", f.path);
      if (c != Change::Added) j.value("size_a", f.size_a);
      if (c != Change::Removed) j.value("size_b", f.size_b);
      if (c != Change::Added) j.value("blob_a", f.blob_a);
      if (c != Change::Removed) j.value("blob_b", f.blob_b);
      if (c == Change::Changed) {
        j.value("basis", f.basis);
        if (!f.sha_a.empty() || !f.sha_b.empty()) j.value("sha256_a", f.sha_a).value("sha256_b", f.sha_b);
      }
      j.end_object();
    }
    j.end_array();
  }
  j.value("unchanged", d.files_unchanged);
  j.begin_array("not_compared");
  for (const auto& p : d.files_not_compared) j.value("", p);
  j.end_array();
  j.end_object();

  j.begin_object("weights").value("files", d.weight_files).value("identical", d.weights_identical);
  if (d.weights_basis.empty()) j.null("basis");
  else j.value("basis", d.weights_basis);
  j.end_object();

  j.begin_array("config");
  for (const auto& v : d.values) {
    j.begin_object().value("file", v.file).value("path", v.path).value("change", change_name(v.change));
    if (v.a.empty()) j.null("a");
    else j.raw("a", v.a);
    if (v.b.empty()) j.null("b");
    else j.raw("b", v.b);
    j.end_object();
  }
  j.end_array();

  j.begin_array("templates");
  for (const auto& t : d.templates) {
    j.begin_object().value("name", t.name).value("change", change_name(t.change));
    if (t.origin_a.empty()) j.null("origin_a");
    else j.value("origin_a", t.origin_a);
    if (t.origin_b.empty()) j.null("origin_b");
    else j.value("origin_b", t.origin_b);
    j.begin_array("hunks");
    for (const auto& h : t.hunks) {
      j.begin_object()
          .value("a_start", static_cast<uint64_t>(h.a_start))
          .value("a_count", static_cast<uint64_t>(h.a_count))
          .value("b_start", static_cast<uint64_t>(h.b_start))
          .value("b_count", static_cast<uint64_t>(h.b_count));
      j.begin_array("lines");
      for (const auto& l : h.lines) {
        j.begin_object().value("op", std::string(1, l.op));
        if (l.a_line) j.value("a_line", static_cast<uint64_t>(l.a_line));
        else j.null("a_line");
        if (l.b_line) j.value("b_line", static_cast<uint64_t>(l.b_line));
        else j.null("b_line");
        j.value("text", l.text).end_object();
      }
      j.end_array().end_object();
    }
    j.end_array().end_object();
  }
  j.end_array();

  const TokenizerDiff& k = d.tokenizer;
  j.begin_object("tokenizer").value("compared", k.compared);
  j.value("model_a", k.model_a).value("model_b", k.model_b);
  j.value("vocab_size_a", k.vocab_a).value("vocab_size_b", k.vocab_b);
  j.value("merges_a", k.merges_a).value("merges_b", k.merges_b);
  auto tokens = [&](const char* key, const std::vector<TokenChange>& v) {
    j.value(std::string(key) + "_count", static_cast<uint64_t>(v.size()));
    j.begin_array(key);
    for (size_t i = 0; i < v.size() && i < kJsonCap; ++i) {
      j.begin_object().value("token", v[i].token);
      if (v[i].id_a >= 0) j.value("id_a", v[i].id_a);
      else j.null("id_a");
      if (v[i].id_b >= 0) j.value("id_b", v[i].id_b);
      else j.null("id_b");
      j.end_object();
    }
    j.end_array();
  };
  tokens("added", k.added);
  tokens("removed", k.removed);
  tokens("renumbered", k.renumbered);
  j.begin_array("special_tokens");
  for (const auto& s : k.special) {
    j.begin_object().value("name", s.name);
    if (s.a.empty()) j.null("a");
    else j.value("a", s.a);
    if (s.b.empty()) j.null("b");
    else j.value("b", s.b);
    j.end_object();
  }
  j.end_array().end_object();

  j.begin_object("tensors");
  for (auto kind : {TensorDiff::Added, TensorDiff::Removed, TensorDiff::Reshaped, TensorDiff::Retyped,
                    TensorDiff::Moved, TensorDiff::ContentChanged}) {
    uint64_t n = 0;
    j.begin_array(tensor_change_name(kind));
    for (const auto& t : d.tensors) {
      if (t.kind != kind || n++ >= kJsonCap) continue;
      j.begin_object().value("name", t.name);
      auto info = [&](const char* suffix, const TensorInfo& i) {
        j.value(std::string("dtype") + suffix, i.dtype).value(std::string("file") + suffix, i.file);
        j.begin_array(std::string("shape") + suffix);
        for (auto x : i.shape) j.value("", x);
        j.end_array();
      };
      if (kind != TensorDiff::Added) info("_a", t.a);
      if (kind != TensorDiff::Removed) info("_b", t.b);
      j.end_object();
    }
    j.end_array();
    j.value(std::string(tensor_change_name(kind)) + "_count", n);
  }
  j.value("unchanged", d.tensors_unchanged).end_object();

  if (!d.numeric_compared) {
    j.null("values");
  } else {
    j.begin_object("values");
    j.value("compared", uint64_t(d.numeric.size() + d.numeric_identical)).value("equal", d.numeric_identical);
    j.value("differ_count", uint64_t(d.numeric.size()));
    j.begin_array("differ");
    uint64_t n = 0;
    for (const auto& x : d.numeric) {
      if (n++ >= kJsonCap) break;
      j.begin_object().value("name", x.name).value("encoding_a", x.encoding_a).value("encoding_b", x.encoding_b);
      j.begin_array("shape");
      for (auto s : x.shape) j.value("", s);
      j.end_array();
      if (!x.error.empty()) {
        j.value("error", x.error).end_object();
        continue;
      }
      j.null("error").value("elements", x.elements).value("nonfinite", x.nonfinite);
      j.precise("max_abs_diff", x.max_abs).value("max_abs_diff_index", x.max_abs_at).precise("rel_l2", x.rel_l2);
      if (x.cosine) j.precise("cosine", *x.cosine);
      else j.null("cosine");
      j.precise("rms_a", x.a_rms).precise("rms_b", x.b_rms).end_object();
    }
    j.end_array();
    j.begin_array("not_compared");
    for (const auto& [name, why] : d.numeric_skipped) j.begin_object().value("name", name).value("reason", why).end_object();
    j.end_array().end_object();
  }

  j.begin_array("notes");
  for (const auto& n : d.notes) j.value("", n);
  j.end_array();
  j.end_object();
  return j.str();
}

}  // namespace ckpt::diff
