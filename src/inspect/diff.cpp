// diff(): two Checkpoint models compared part by part (see diff.h).
#include "inspect/diff.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "ckpt/gguf.h"
#include "ckpt/jinja.h"
#include "hub/hash.h"

namespace ckpt::diff {

namespace fs = std::filesystem;

namespace {

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

// Files holding weights: compared by blob name, else by size (and SHA-256 with --deep). Other
// files are small side files, compared by content whenever their sizes match.
bool is_weight_file(std::string_view p) {
  for (std::string_view e : {".safetensors", ".bin", ".gguf", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx",
                             ".npz", ".pkl"})
    if (ends_with(p, e)) return true;
  return false;
}
constexpr uint64_t kSideFileMax = 64ull << 20;

// The cache blob a snapshot entry links to ("../../blobs/<etag>"), or "".
std::string blob_of(const FileEntry& f) {
  if (!f.is_symlink) return "";
  fs::path t(f.link_text);
  if (t.parent_path().filename() != "blobs") return "";
  return t.filename().string();
}

// Whether two files of `size` bytes hold the same bytes (read in 1 MiB chunks, stops at the
// first difference). nullopt on a read error.
std::optional<bool> same_bytes(const fs::path& x, const fs::path& y, uint64_t size) {
  std::ifstream fx(x, std::ios::binary), fy(y, std::ios::binary);
  if (!fx || !fy) return std::nullopt;
  std::vector<char> bx(1 << 20), by(1 << 20);
  uint64_t left = size;
  while (left) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, bx.size()));
    if (!fx.read(bx.data(), static_cast<std::streamsize>(n)) || !fy.read(by.data(), static_cast<std::streamsize>(n)))
      return std::nullopt;
    if (std::memcmp(bx.data(), by.data(), n) != 0) return false;
    left -= n;
  }
  return true;
}

std::string sha256_range(const fs::path& p, uint64_t from, uint64_t to, std::string* error) {
  hub::detail::Hasher h(hub::detail::EtagKind::sha256, 0);
  if (!hub::detail::hash_file_range(p, h, from, to, error)) return "";
  return h.hex_digest();
}

// Runs jobs on up to `threads` threads.
void run_parallel(size_t n, unsigned threads, const std::function<void(size_t)>& job) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<size_t>(threads, n));
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) job(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) job(i);
    });
  for (auto& th : pool) th.join();
}

std::string pointer_escape(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

void json_diff(const std::string& file, const std::string& path, const json::Value* a, const json::Value* b,
               std::vector<ValueDiff>& out, const std::set<std::string>& skip_top = {}) {
  if (a && b && *a == *b) return;
  if (!a) {
    out.push_back({file, path.empty() ? "/" : path, Change::Added, "", b->dump()});
    return;
  }
  if (!b) {
    out.push_back({file, path.empty() ? "/" : path, Change::Removed, a->dump(), ""});
    return;
  }
  if (a->is_object() && b->is_object()) {
    for (const auto& [k, v] : a->as_object()) {
      if (path.empty() && skip_top.count(k)) continue;
      json_diff(file, path + "/" + pointer_escape(k), &v, b->find(k), out);
    }
    for (const auto& [k, v] : b->as_object()) {
      if (path.empty() && skip_top.count(k)) continue;
      if (!a->find(k)) json_diff(file, path + "/" + pointer_escape(k), nullptr, &v, out);
    }
    return;
  }
  if (a->is_array() && b->is_array()) {
    const auto &x = a->as_array(), &y = b->as_array();
    for (size_t i = 0; i < std::max(x.size(), y.size()); ++i)
      json_diff(file, path + "/" + std::to_string(i), i < x.size() ? &x[i] : nullptr, i < y.size() ? &y[i] : nullptr,
                out);
    return;
  }
  out.push_back({file, path.empty() ? "/" : path, Change::Changed, a->dump(), b->dump()});
}

// ---- tokenizer ------------------------------------------------------------------------------

struct TokView {
  bool ok = false;
  std::string model;
  std::unordered_map<std::string, int64_t> ids;
  std::unordered_map<std::string, bool> special;  // added tokens' "special" flag
  uint64_t merges = 0;
  std::string error;
};

TokView read_tokenizer(const Checkpoint& ck) {
  TokView t;
  if (!ck.tokenizer.present) return t;
  if (ck.tokenizer.error) {
    t.error = ck.tokenizer.file + ": " + ck.tokenizer.error->message;
    return t;
  }
  auto r = json::parse(ck.tokenizer.text);
  if (!r.ok()) {
    t.error = ck.tokenizer.file + ": " + r.error->message;
    return t;
  }
  const json::Value& doc = r.value;
  const json::Value* model = doc.find("model");
  if (model && model->is_object()) {
    t.model = model->get_string("type").value_or("");
    if (const json::Value* v = model->find("vocab")) {
      if (v->is_object()) {
        if (t.model.empty()) t.model = model->find("merges") ? "BPE" : "WordLevel";
        for (const auto& [tok, id] : v->as_object())
          if (id.is_int()) t.ids[tok] = id.as_int();
      } else if (v->is_array()) {  // Unigram: [[piece, score], ...], the id is the position
        if (t.model.empty()) t.model = "Unigram";
        int64_t i = 0;
        for (const auto& e : v->as_array()) {
          if (e.is_array() && !e.as_array().empty() && e.as_array()[0].is_string()) t.ids[e.as_array()[0].as_string()] = i;
          ++i;
        }
      }
    }
    if (const json::Value* m = model->find("merges"); m && m->is_array()) t.merges = m->as_array().size();
  }
  if (const json::Value* added = doc.find("added_tokens"); added && added->is_array())
    for (const auto& e : added->as_array()) {
      auto content = e.get_string("content");
      auto id = e.get_int("id");
      if (!content || !id) continue;
      t.ids[*content] = *id;
      t.special[*content] = e.get_bool("special").value_or(false);
    }
  t.ok = true;
  return t;
}

std::string token_string(const json::Value* v) {
  if (!v || v->is_null()) return "";
  if (v->is_string()) return v->as_string();
  if (v->is_object())
    if (auto c = v->get_string("content")) return *c;
  return v->dump();
}

void special_tokens(const Checkpoint& a, const Checkpoint& b, const TokView& ta, const TokView& tb,
                    std::vector<SpecialChange>& out) {
  auto with_id = [](const std::string& tok, const TokView& t) {
    if (tok.empty()) return tok;
    auto it = t.ids.find(tok);
    return it == t.ids.end() || !t.ok ? tok : tok + " (" + std::to_string(it->second) + ")";
  };
  const json::Value* tca = a.tokenizer_config.ok() ? &a.tokenizer_config.value : nullptr;
  const json::Value* tcb = b.tokenizer_config.ok() ? &b.tokenizer_config.value : nullptr;
  for (const char* k : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"}) {
    std::string x = with_id(token_string(tca ? tca->find(k) : nullptr), ta);
    std::string y = with_id(token_string(tcb ? tcb->find(k) : nullptr), tb);
    if (x != y) out.push_back({k, x, y});
  }
  {
    auto list = [](const json::Value* tc) {
      std::string s;
      const json::Value* v = tc ? tc->find("additional_special_tokens") : nullptr;
      if (v && v->is_array())
        for (const auto& e : v->as_array()) s += (s.empty() ? "" : ", ") + token_string(&e);
      return s;
    };
    std::string x = list(tca), y = list(tcb);
    if (x != y) out.push_back({"additional_special_tokens", x, y});
  }
  for (auto [file, ja, jb] : {std::tuple{"generation_config", &a.generation_config, &b.generation_config},
                              std::tuple{"config", &a.config, &b.config}}) {
    for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"}) {
      const json::Value* x = ja->ok() ? ja->value.find(k) : nullptr;
      const json::Value* y = jb->ok() ? jb->value.find(k) : nullptr;
      std::string sx = x ? x->dump() : "", sy = y ? y->dump() : "";
      if (sx != sy) out.push_back({std::string(file) + "." + k, sx, sy});
    }
  }
  if (ta.ok && tb.ok) {
    std::vector<std::string> names;
    for (const auto& [tok, sp] : ta.special)
      if (auto it = tb.special.find(tok); it != tb.special.end() && it->second != sp) names.push_back(tok);
    std::sort(names.begin(), names.end());
    for (const auto& tok : names)
      out.push_back({tok + " special", ta.special.at(tok) ? "true" : "false", tb.special.at(tok) ? "true" : "false"});
  }
}

// ---- templates ------------------------------------------------------------------------------

jinja::Discovery templates_of(const Checkpoint& ck) {
  jinja::DiscoveryInput in;
  for (const auto& t : ck.templates)
    if (t.ok()) in.jinja_files.emplace_back(t.file, t.text);
  if (ck.tokenizer_config.ok()) in.tokenizer_config = &ck.tokenizer_config.value;
  if (ck.chat_template_json.ok()) in.chat_template_json = &ck.chat_template_json.value;
  jinja::Discovery d = jinja::discover_templates(in);
  // a GGUF carries its templates in the metadata (llama.cpp reads tokenizer.chat_template, and
  // tokenizer.chat_template.<name> for named ones)
  if (d.templates.empty() && !ck.gguf_models.empty())
    if (const Shard* s = ck.gguf_models.front().first(ck.gguf_shards); s && s->gguf)
      for (const auto& kv : s->gguf->kvs) {
        if (kv.value.type != gguf::ValueType::STRING) continue;
        const std::string_view key = kv.key, base = "tokenizer.chat_template";
        if (key == base)
          d.templates.push_back({"default", s->file, "GGUF " + std::string(base), std::string(kv.value.str)});
        else if (key.size() > base.size() + 1 && key.substr(0, base.size() + 1) == std::string(base) + ".")
          d.templates.push_back({std::string(key.substr(base.size() + 1)), s->file, "GGUF " + std::string(key),
                                 std::string(kv.value.str)});
      }
  return d;
}

TensorInfo info_of(const Checkpoint::WeightTensor& w) {
  TensorInfo i;
  i.dtype = std::string(st::dtype_name(w.entry->dtype));
  i.file = w.shard->file;
  i.shape.assign(w.entry->shape.begin(), w.entry->shape.end());
  return i;
}

// The tensors a loader sees on one side: the weight map (safetensors, pickles), then the
// tensors of every GGUF model as the GGUF names them.
class TensorTable {
 public:
  explicit TensorTable(const Checkpoint& ck) : w_(ck.weights()) {
    for (const auto& s : ck.gguf_shards)
      for (const auto& e : s.header.tensors)
        if (!w_.count(e.name) && gguf_.emplace(e.name, Checkpoint::WeightTensor{&e, &s}).second)
          gguf_rows_.push_back({e.name, {&e, &s}});
  }
  std::optional<Checkpoint::WeightTensor> find(std::string_view n) const {
    if (auto it = w_.find(n); it != w_.end()) return (*it).second;
    if (auto it = gguf_.find(n); it != gguf_.end()) return it->second;
    return std::nullopt;
  }
  template <class F>
  void each(F&& f) const {
    for (const auto& [n, t] : w_) f(n, t);
    for (const auto& [n, t] : gguf_rows_) f(n, t);
  }
  size_t size() const { return w_.size() + gguf_rows_.size(); }

 private:
  const Checkpoint::WeightMap& w_;
  std::unordered_map<std::string_view, Checkpoint::WeightTensor> gguf_;
  std::vector<std::pair<std::string_view, Checkpoint::WeightTensor>> gguf_rows_;
};

// The metadata of a side's first GGUF model as a JSON object (key -> value; chat templates
// excluded: they are diffed as templates). Arrays of more than
// 64 elements (the vocabulary, scores, merges) stand as a summary with a content hash, so a
// changed token list shows as one changed key, not thousands.
json::Value gguf_metadata(const Checkpoint& ck) {
  json::Object o;
  if (ck.gguf_models.empty()) return o;
  const Shard* s = ck.gguf_models.front().first(ck.gguf_shards);
  if (!s || !s->gguf) return o;
  auto scalar = [](const gguf::Value& v) -> json::Value {
    switch (v.type) {
      case gguf::ValueType::STRING: return std::string(v.str);
      case gguf::ValueType::BOOL: return v.bits != 0;
      case gguf::ValueType::F32:
      case gguf::ValueType::F64: return v.as_float().value_or(0.0);
      default:
        if (auto i = v.as_int()) return *i;
        if (auto u = v.as_uint()) return std::to_string(*u);
        return nullptr;
    }
  };
  for (const auto& kv : s->gguf->kvs) {
    if (kv.key.substr(0, 23) == "tokenizer.chat_template") continue;  // the templates' own diff shows them
    const gguf::Value& v = kv.value;
    json::Value out;
    if (!v.is_array()) {
      out = scalar(v);
    } else if (v.count <= 64) {
      json::Array arr;
      for (uint64_t i = 0; i < v.count; ++i) {
        if (v.elem == gguf::ValueType::STRING) arr.emplace_back(i < v.strings.size() ? std::string(v.strings[i]) : "");
        else if (v.elem == gguf::ValueType::F32 || v.elem == gguf::ValueType::F64) arr.emplace_back(v.float_at(i).value_or(0.0));
        else if (auto x = v.int_at(i)) arr.emplace_back(*x);
        else arr.emplace_back(std::to_string(v.uint_at(i).value_or(0)));
      }
      out = std::move(arr);
    } else {
      uint64_t h = 1469598103934665603ull;  // FNV-1a over the elements as stored
      auto mix = [&](std::string_view bytes) {
        for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
        h = (h ^ 0xFF) * 1099511628211ull;
      };
      if (v.elem == gguf::ValueType::STRING)
        for (auto sv : v.strings) mix(sv);
      else
        mix(v.raw);
      char buf[17];
      std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
      out = v.type_text() + " of " + std::to_string(v.count) + " (content " + buf + ")";
    }
    o.push_back({std::string(kv.key), std::move(out)});
  }
  return o;
}

Side side_of(const Checkpoint& ck) {
  Side s;
  s.target = ck.target;
  s.root = ck.root.string();
  if (ck.cache) {
    s.repo = ck.cache->repo_id;
    s.commit = ck.cache->commit;
  }
  s.files = ck.files.size();
  s.tensors = TensorTable(ck).size();
  return s;
}

}  // namespace

std::string_view change_name(Change c) {
  switch (c) {
    case Change::Added: return "added";
    case Change::Removed: return "removed";
    case Change::Changed: return "changed";
  }
  return "changed";
}

std::string_view tensor_change_name(TensorDiff::Kind k) {
  switch (k) {
    case TensorDiff::Added: return "added";
    case TensorDiff::Removed: return "removed";
    case TensorDiff::Reshaped: return "reshaped";
    case TensorDiff::Retyped: return "retyped";
    case TensorDiff::Moved: return "moved";
    case TensorDiff::ContentChanged: return "content_changed";
  }
  return "changed";
}

bool Diff::identical() const {
  const auto& t = tokenizer;
  return files.empty() && values.empty() && templates.empty() && tensors.empty() && t.added.empty() &&
         t.removed.empty() && t.renumbered.empty() && t.special.empty() && t.model_a == t.model_b &&
         t.merges_a == t.merges_b;
}

Diff diff(const Checkpoint& a, const Checkpoint& b, const Options& opts) {
  Diff d;
  d.a = side_of(a);
  d.b = side_of(b);

  // ---- files
  std::map<std::string, const FileEntry*> fa, fb;
  for (const auto& f : a.files) fa[f.rel] = &f;
  for (const auto& f : b.files) fb[f.rel] = &f;
  std::set<std::string> all;
  for (const auto& [k, v] : fa) all.insert(k);
  for (const auto& [k, v] : fb) all.insert(k);
  struct HashJob {
    size_t diff_index;  // into pending
    const FileEntry *x, *y;
  };
  std::vector<FileDiff> pending;  // equal-size files to compare by content
  std::vector<HashJob> jobs;
  bool any_blob_basis = false, all_blob_basis = true, any_sha = false;
  for (const auto& rel : all) {
    auto ia = fa.find(rel), ib = fb.find(rel);
    const FileEntry* x = ia == fa.end() ? nullptr : ia->second;
    const FileEntry* y = ib == fb.end() ? nullptr : ib->second;
    FileDiff f;
    f.path = rel;
    if (x) f.size_a = x->size, f.blob_a = blob_of(*x);
    if (y) f.size_b = y->size, f.blob_b = blob_of(*y);
    const bool weight = is_weight_file(rel);
    if (weight) ++d.weight_files;
    if (!x || !y) {
      f.change = x ? Change::Removed : Change::Added;
      if (weight) d.weights_identical = false;
      d.files.push_back(std::move(f));
      continue;
    }
    if (!f.blob_a.empty() && !f.blob_b.empty()) {
      f.basis = "blob";
      if (weight) any_blob_basis = true;
      if (f.blob_a == f.blob_b) {
        ++d.files_unchanged;
      } else {
        if (weight) d.weights_identical = false;
        d.files.push_back(std::move(f));
      }
      continue;
    }
    if (weight) all_blob_basis = false;
    if (!x->readable() || !y->readable()) {
      f.basis = "unreadable";
      if (x->readable() != y->readable() || f.size_a != f.size_b) {
        if (weight) d.weights_identical = false;
        d.files.push_back(std::move(f));
      } else {
        d.files_not_compared.push_back(rel);
      }
      continue;
    }
    if (f.size_a != f.size_b) {
      f.basis = "size";
      if (weight) d.weights_identical = false;
      d.files.push_back(std::move(f));
      continue;
    }
    if (weight && !opts.deep) {
      d.files_not_compared.push_back(rel);
      continue;
    }
    if (!weight && f.size_a > kSideFileMax && !opts.deep) {
      d.files_not_compared.push_back(rel);
      continue;
    }
    if (!weight) {  // a side file: compare the bytes
      f.basis = "content";
      auto same = same_bytes(x->abs, y->abs, f.size_a);
      if (!same) d.notes.push_back("could not read " + rel + " on both sides");
      if (same && *same) ++d.files_unchanged;
      else d.files.push_back(std::move(f));
      continue;
    }
    f.basis = "sha256";
    any_sha = true;
    jobs.push_back({pending.size(), x, y});
    pending.push_back(std::move(f));
  }
  std::vector<std::string> errors(jobs.size());
  if (opts.progress_total)
    for (const auto& j : jobs) opts.progress_total->fetch_add(j.x->size + j.y->size);
  run_parallel(jobs.size() * 2, opts.threads, [&](size_t i) {
    const HashJob& j = jobs[i / 2];
    FileDiff& f = pending[j.diff_index];
    const FileEntry* e = i % 2 ? j.y : j.x;
    std::string err;
    std::string h = sha256_range(e->abs, 0, e->size, &err);
    if (opts.progress_done) opts.progress_done->fetch_add(e->size);
    (i % 2 ? f.sha_b : f.sha_a) = h;
    if (h.empty()) errors[i / 2] = e->rel + ": " + err;
  });
  for (size_t k = 0; k < jobs.size(); ++k) {
    FileDiff& f = pending[jobs[k].diff_index];
    if (!errors[k].empty()) d.notes.push_back("could not hash " + errors[k]);
    if (f.sha_a == f.sha_b && !f.sha_a.empty()) {
      ++d.files_unchanged;
    } else {
      d.weights_identical = false;
      d.files.push_back(std::move(f));
    }
  }
  std::sort(d.files.begin(), d.files.end(), [](const FileDiff& x, const FileDiff& y) { return x.path < y.path; });
  if (d.weight_files) {
    if (all_blob_basis && any_blob_basis) d.weights_basis = "blobs";
    else if (any_sha) d.weights_basis = "sha256";
    else d.weights_basis = "size and header";
  }

  // ---- JSON side files
  auto jd = [&](const JsonFile& x, const JsonFile& y, const std::string& name, const std::set<std::string>& skip = {}) {
    static const json::Value kEmpty = json::Object{};
    if (!x.present && !y.present) return;
    if ((x.present && !x.ok()) || (y.present && !y.ok())) {
      d.notes.push_back(name + " does not parse on " + std::string(x.present && !x.ok() ? "A" : "B") +
                        ": its keys are not compared");
      return;
    }
    json_diff(name, "", x.present ? &x.value : &kEmpty, y.present ? &y.value : &kEmpty, d.values, skip);
  };
  jd(a.config, b.config, "config.json");
  jd(a.generation_config, b.generation_config, "generation_config.json");
  jd(a.tokenizer_config, b.tokenizer_config, "tokenizer_config.json", {"chat_template"});
  {
    std::map<std::string, std::pair<const JsonFile*, const JsonFile*>> other;
    for (const auto& j : a.other_json) other[j.file].first = &j;
    for (const auto& j : b.other_json) other[j.file].second = &j;
    static const JsonFile kAbsent;
    for (const auto& [name, p] : other) jd(p.first ? *p.first : kAbsent, p.second ? *p.second : kAbsent, name);
  }
  if (a.index || b.index) {
    const json::Value* ma = a.index && a.index->json.ok() ? a.index->json.value.find("metadata") : nullptr;
    const json::Value* mb = b.index && b.index->json.ok() ? b.index->json.value.find("metadata") : nullptr;
    std::string fa_name = a.index ? a.index->json.file : "", fb_name = b.index ? b.index->json.file : "";
    if (ma || mb) json_diff(fa_name.empty() ? fb_name : fa_name, "/metadata", ma, mb, d.values);
  }

  if (!a.gguf_models.empty() || !b.gguf_models.empty()) {
    const json::Value ma = gguf_metadata(a), mb = gguf_metadata(b);
    json_diff("GGUF metadata", "", &ma, &mb, d.values);
  }

  // ---- chat templates
  {
    jinja::Discovery da = templates_of(a), db = templates_of(b);
    std::map<std::string, std::pair<const jinja::TemplateSource*, const jinja::TemplateSource*>> by_name;
    for (const auto& t : da.templates) by_name[t.name].first = &t;
    for (const auto& t : db.templates) by_name[t.name].second = &t;
    for (const auto& [name, p] : by_name) {
      const auto *x = p.first, *y = p.second;
      if (x && y && x->text == y->text) {
        if (x->origin != y->origin)
          d.notes.push_back("chat template '" + name + "' is unchanged but now comes from " + y->origin + " (was " +
                            x->origin + ")");
        continue;
      }
      TemplateDiff t;
      t.name = name;
      t.change = !x ? Change::Added : !y ? Change::Removed : Change::Changed;
      if (x) t.origin_a = x->origin;
      if (y) t.origin_b = y->origin;
      t.hunks = line_diff(x ? x->text : "", y ? y->text : "", opts.context);
      d.templates.push_back(std::move(t));
    }
  }

  // ---- tokenizer
  {
    TokView ta = read_tokenizer(a), tb = read_tokenizer(b);
    for (const auto* t : {&ta, &tb})
      if (!t->error.empty()) d.notes.push_back("tokenizer not compared: " + t->error);
    TokenizerDiff& t = d.tokenizer;
    if (ta.ok && tb.ok) {
      t.compared = true;
      t.model_a = ta.model;
      t.model_b = tb.model;
      t.vocab_a = ta.ids.size();
      t.vocab_b = tb.ids.size();
      t.merges_a = ta.merges;
      t.merges_b = tb.merges;
      for (const auto& [tok, id] : ta.ids) {
        auto it = tb.ids.find(tok);
        if (it == tb.ids.end()) t.removed.push_back({tok, id, -1});
        else if (it->second != id) t.renumbered.push_back({tok, id, it->second});
      }
      for (const auto& [tok, id] : tb.ids)
        if (!ta.ids.count(tok)) t.added.push_back({tok, -1, id});
      auto by_id = [](const TokenChange& x, const TokenChange& y) {
        int64_t ix = x.id_a >= 0 ? x.id_a : x.id_b, iy = y.id_a >= 0 ? y.id_a : y.id_b;
        return ix != iy ? ix < iy : x.token < y.token;
      };
      std::sort(t.added.begin(), t.added.end(), by_id);
      std::sort(t.removed.begin(), t.removed.end(), by_id);
      std::sort(t.renumbered.begin(), t.renumbered.end(), by_id);
    } else if (ta.ok != tb.ok && (a.tokenizer.present != b.tokenizer.present)) {
      d.notes.push_back(std::string("tokenizer.json is only in ") + (ta.ok ? "A" : "B"));
    }
    special_tokens(a, b, ta, tb, t.special);
  }

  // ---- tensors
  {
    // lookups go through each side's name index (NameIndex over the entries' hashed names)
    const TensorTable ta(a), tb(b);
    struct ContentJob {
      std::string name;
      Checkpoint::WeightTensor x, y;
      std::string ha, hb;
    };
    std::vector<ContentJob> content;
    std::set<std::string> changed_files;
    for (const auto& f : d.files)
      if (f.change == Change::Changed) changed_files.insert(f.path);
    std::set<std::string> changed_names;
    uint64_t common = 0;
    ta.each([&](std::string_view name, const Checkpoint::WeightTensor& w) {
      const auto other = tb.find(name);
      if (!other) {
        d.tensors.push_back({std::string(name), TensorDiff::Removed, info_of(w), {}});
        return;
      }
      const Checkpoint::WeightTensor y = *other;
      ++common;
      const bool same_shape = w.entry->shape == y.entry->shape, same_type = w.entry->dtype == y.entry->dtype;
      bool changed = false;
      if (!same_shape) d.tensors.push_back({std::string(name), TensorDiff::Reshaped, info_of(w), info_of(y)}), changed = true;
      if (!same_type) d.tensors.push_back({std::string(name), TensorDiff::Retyped, info_of(w), info_of(y)}), changed = true;
      // a tensor of a single-file GGUF is where it always is, whatever the file is called
      const bool single_gguf = w.shard->format == Format::gguf && y.shard->format == Format::gguf &&
                               a.gguf_shards.size() == 1 && b.gguf_shards.size() == 1;
      if (w.shard->file != y.shard->file && !single_gguf)
        d.tensors.push_back({std::string(name), TensorDiff::Moved, info_of(w), info_of(y)}), changed = true;
      if (changed) changed_names.insert(std::string(name));
      // with --deep, the bytes of tensors whose files differ (or moved) are compared
      if (opts.deep && same_shape && same_type &&
          (w.shard->file != y.shard->file || changed_files.count(w.shard->file)))
        content.push_back({std::string(name), w, y, "", ""});
    });
    tb.each([&](std::string_view name, const Checkpoint::WeightTensor& w) {
      if (!ta.find(name)) d.tensors.push_back({std::string(name), TensorDiff::Added, {}, info_of(w)});
    });
    if (!content.empty()) {
      if (opts.progress_total)
        for (const auto& j : content) opts.progress_total->fetch_add((j.x.entry->end - j.x.entry->begin) * 2);
      run_parallel(content.size() * 2, opts.threads, [&](size_t i) {
        ContentJob& j = content[i / 2];
        const Checkpoint& ck = i % 2 ? b : a;
        const auto& w = i % 2 ? j.y : j.x;
        const FileEntry* fe = ck.file(w.shard->file);
        std::string err;
        const uint64_t base = w.shard->header.data_start();
        std::string h = fe ? sha256_range(fe->abs, base + w.entry->begin, base + w.entry->end, &err) : "";
        (i % 2 ? j.hb : j.ha) = h.empty() ? "?" + err : h;
        if (opts.progress_done) opts.progress_done->fetch_add(j.x.entry->end - j.x.entry->begin);
      });
      for (auto& j : content)
        if (j.ha != j.hb) {
          d.tensors.push_back({j.name, TensorDiff::ContentChanged, info_of(j.x), info_of(j.y)});
          changed_names.insert(j.name);
        }
    }
    d.tensors_unchanged = common - changed_names.size();
    if (!d.tensors.empty()) d.weights_identical = false;  // the headers say so, whatever the sizes
    if (opts.deep) {
      // values: every weight whose stored form differs (another encoding, or bytes that changed)
      std::set<std::string> differs;
      for (const auto& t : d.tensors)
        if (t.kind == TensorDiff::ContentChanged || t.kind == TensorDiff::Retyped || t.kind == TensorDiff::Reshaped)
          differs.insert(t.name);
      compare_values(a, b, differs, opts, d);
    }
    std::stable_sort(d.tensors.begin(), d.tensors.end(), [](const TensorDiff& x, const TensorDiff& y) {
      return x.kind != y.kind ? x.kind < y.kind : x.name < y.name;
    });
  }
  return d;
}

}  // namespace ckpt::diff
