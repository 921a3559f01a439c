// PT015-PT021: Meta's original layout — consolidated.NN.pth, one file per model-parallel rank,
// beside params.json (LLaMA 1/2/3 reference code, specs/pytorch-pickle.md §6). The reference
// loader globs *.pth, asserts their count equals the model-parallel size, torch.loads the rank's
// file and runs load_state_dict(strict=False) into a model built from ModelArgs(**params): a
// missing tensor stays randomly initialised and an extra one is silently ignored, so the files
// are judged here against each other and against params.json, from the pickles alone.
//
// How ranks split a tensor (fairscale's layers in llama/model.py, and the HF converter):
// ColumnParallel wq, wk, wv, w1, w3, output on dim 0; RowParallel wo, w2 on dim 1;
// tok_embeddings on dim 1 (Llama 1/2 ParallelEmbedding) or dim 0 (Llama 3
// VocabParallelEmbedding); norms (and rope.freqs) replicated. fairscale splits evenly, so every
// rank holds the same shape. Any other tensor is taken as replicated.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "checks/family.h"
#include "checks/util.h"
#include "io/file.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 7> kCodes{{
    {"PT015", Severity::error, "Meta layout: model-parallel rank files missing or misnumbered"},
    {"PT016", Severity::error, "Meta layout: params.json missing or unusable for ModelArgs"},
    {"PT017", Severity::error, "Meta layout: ranks hold different tensor names or dtypes"},
    {"PT018", Severity::error, "Meta layout: a tensor's per-rank shapes do not fit the model-parallel split"},
    {"PT019", Severity::error, "Meta layout: merged tensor shape does not match params.json"},
    {"PT020", Severity::error, "Meta layout: tensor the model needs is in no rank"},
    {"PT021", Severity::warning, "Meta layout: tensor the model does not have (ignored by strict=False)"},
}};

// consolidated.NN.pth -> NN (the reference code writes two digits; any decimal is accepted).
std::optional<int> rank_of(std::string_view rel) {
  constexpr std::string_view pre = "consolidated.", suf = ".pth";
  if (size_t slash = rel.rfind('/'); slash != std::string_view::npos) rel = rel.substr(slash + 1);
  if (!starts_with(rel, pre) || !ends_with(rel, suf)) return std::nullopt;
  std::string_view digits = rel.substr(pre.size(), rel.size() - pre.size() - suf.size());
  if (digits.empty() || digits.size() > 6) return std::nullopt;
  int n = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || p != digits.data() + digits.size()) return std::nullopt;
  return n;
}

std::string dims(const std::vector<int64_t>& v) {
  std::vector<uint64_t> u;
  for (auto d : v) u.push_back(static_cast<uint64_t>(std::max<int64_t>(d, 0)));
  return shape_str(u);
}

// How a tensor is distributed over the ranks.
enum class Split { Replicated, Dim0, Dim1, Embedding };

struct Role {
  Split split = Split::Replicated;
  bool known = false;  // a name Meta's model has (or rope.freqs, which it ignores)
  int layer = -1;      // layers.{i}.*
  std::string kind;    // "wq", "w2", "attention_norm", "tok_embeddings", ...
};

Role role_of(std::string_view name) {
  Role r;
  auto is = [&](std::string_view s) { return name == s; };
  if (is("tok_embeddings.weight")) return {Split::Embedding, true, -1, "tok_embeddings"};
  if (is("output.weight")) return {Split::Dim0, true, -1, "output"};
  if (is("norm.weight")) return {Split::Replicated, true, -1, "norm"};
  if (is("rope.freqs")) return {Split::Replicated, true, -1, "rope.freqs"};
  if (!starts_with(name, "layers.")) return r;
  std::string_view rest = name.substr(7);
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 6) return r;
  int layer = 0;
  auto [p, ec] = std::from_chars(rest.data(), rest.data() + dot, layer);
  if (ec != std::errc() || p != rest.data() + dot) return r;
  std::string_view leaf = rest.substr(dot + 1);
  static constexpr std::pair<std::string_view, Split> kLeaves[] = {
      {"attention.wq.weight", Split::Dim0},      {"attention.wk.weight", Split::Dim0},
      {"attention.wv.weight", Split::Dim0},      {"attention.wo.weight", Split::Dim1},
      {"feed_forward.w1.weight", Split::Dim0},   {"feed_forward.w3.weight", Split::Dim0},
      {"feed_forward.w2.weight", Split::Dim1},   {"attention_norm.weight", Split::Replicated},
      {"ffn_norm.weight", Split::Replicated},
  };
  for (const auto& [l, s] : kLeaves)
    if (leaf == l) {
      std::string_view kind = l.substr(0, l.size() - 7);  // drop ".weight"
      if (size_t d = kind.rfind('.'); d != std::string_view::npos) kind = kind.substr(d + 1);
      return {s, true, layer, std::string(kind)};
    }
  r.layer = layer;
  return r;
}

const char* split_words(Split s) {
  switch (s) {
    case Split::Dim0: return "split on dim 0 (column-parallel)";
    case Split::Dim1: return "split on dim 1 (row-parallel)";
    case Split::Embedding: return "split on dim 1 (Llama 1/2) or dim 0 (Llama 3)";
    case Split::Replicated: return "replicated on every rank";
  }
  return "";
}

// ModelArgs as params.json gives it; nullopt members are absent (or null).
struct Params {
  int64_t dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = -1, multiple_of = 256;
  std::optional<double> ffn_multiplier;
  bool usable = false;
  // The FeedForward hidden size llama/model.py computes.
  int64_t hidden() const {
    int64_t h = 4 * dim;
    h = static_cast<int64_t>(2.0 * static_cast<double>(h) / 3.0);
    if (ffn_multiplier) h = static_cast<int64_t>(*ffn_multiplier * static_cast<double>(h));
    return multiple_of * ((h + multiple_of - 1) / multiple_of);
  }
  int64_t head_dim() const { return dim / n_heads; }
};

// Reads params.json; says why it is unusable (out stays !usable) and returns the problems.
std::vector<std::string> read_params(const json::Value& v, Params& p) {
  std::vector<std::string> problems;
  if (!v.is_object()) return {"params.json is not a JSON object"};
  auto int_key = [&](const char* key, bool required, int64_t min, int64_t& dst) {
    const json::Value* x = v.find(key);
    if (!x || x->is_null()) {
      if (required) problems.push_back(std::string("'") + key + "' is missing");
      return;
    }
    if (!x->is_int() || x->as_int() < min) {
      problems.push_back(std::string("'") + key + "' is " + x->dump() + ", expected an integer >= " + std::to_string(min));
      return;
    }
    dst = x->as_int();
  };
  int_key("dim", true, 1, p.dim);
  int_key("n_layers", true, 1, p.n_layers);
  int_key("n_heads", true, 1, p.n_heads);
  int_key("n_kv_heads", false, 1, p.n_kv_heads);
  int_key("vocab_size", false, -1, p.vocab_size);
  int_key("multiple_of", false, 1, p.multiple_of);
  if (const json::Value* x = v.find("ffn_dim_multiplier"); x && !x->is_null()) {
    if (!x->is_number() || !(x->as_double() > 0) || !std::isfinite(x->as_double()))
      problems.push_back("'ffn_dim_multiplier' is " + x->dump() + ", expected a positive number or null");
    else
      p.ffn_multiplier = x->as_double();
  }
  if (problems.empty()) {
    if (!p.n_kv_heads) p.n_kv_heads = p.n_heads;  // ModelArgs: n_kv_heads None = n_heads
    if (p.dim % p.n_heads)
      problems.push_back("dim " + std::to_string(p.dim) + " is not a multiple of n_heads " + std::to_string(p.n_heads));
    else if (p.n_heads % p.n_kv_heads)
      problems.push_back("n_heads " + std::to_string(p.n_heads) + " is not a multiple of n_kv_heads " + std::to_string(p.n_kv_heads));
    else if (p.vocab_size == 0)
      problems.push_back("'vocab_size' is 0 (-1 means: from the tokenizer)");
  }
  p.usable = problems.empty();
  return problems;
}

struct RankFile {
  int rank;
  std::string file;
  const pt::FileScan* scan = nullptr;  // null or !weights_read: PT001-PT003 report it
  std::map<std::string, const pt::Tensor*> by_name;
};

// One directory of rank files: `dir` is "" for the model root, else "original/" and the like
// (Hugging Face repos of Meta models keep Meta's files in original/).
void judge(const Checkpoint& ck, const std::string& dir, std::vector<RankFile> ranks, const std::vector<std::string>& other_pth,
           FindingSink& out) {
  std::sort(ranks.begin(), ranks.end(), [](const RankFile& a, const RankFile& b) { return a.rank < b.rank; });
  const std::string& first = ranks.front().file;
  const std::string params_rel = dir + "params.json";

  // PT015: ranks 0..N-1, each once; nothing else matching the loader's *.pth glob.
  {
    std::vector<std::string> missing, doubled;
    const int top = ranks.back().rank;
    std::map<int, std::vector<std::string>> seen;
    for (const auto& r : ranks) seen[r.rank].push_back(r.file);
    for (int i = 0; i <= top && missing.size() < 64; ++i)
      if (!seen.count(i)) missing.push_back(dir + "consolidated." + std::string(i < 10 ? "0" : "") + std::to_string(i) + ".pth");
    for (const auto& [i, files] : seen)
      if (files.size() > 1) doubled.push_back(list_names(files));
    if (!missing.empty())
      out.add("PT015", Severity::error,
              std::to_string(ranks.size()) + " rank file(s) up to rank " + std::to_string(top) + " but " + list_names(missing) +
                  " is missing: the ranks must be consolidated.00.pth ... consolidated." +
                  std::to_string(top) + ".pth, one per model-parallel rank",
              first, "", "a download stopped early or a rank was deleted; the reference loader asserts the file count equals the model-parallel size and each rank loads its own file");
    for (const auto& d : doubled)
      out.add("PT015", Severity::error, "one rank number is spelled by several files: " + d, first, "",
              "the loader takes sorted(glob('*.pth')): the rank files then shift, and every later rank loads its neighbour's weights");
    if (!other_pth.empty())
      out.add("PT015", Severity::error,
              list_names(other_pth) + " sit beside the rank files: the reference loader takes sorted(glob('*.pth')), so they are counted and loaded as ranks",
              other_pth.front(), "", "move other .pth files out of the checkpoint directory");
  }

  // PT016: params.json (FS011 reports a top-level one that does not parse).
  Params params;
  const json::Value* pv = nullptr;
  json::ParseResult parsed;
  if (dir.empty()) {
    for (const auto& j : ck.other_json)
      if (j.file == "params.json" && j.ok()) pv = &j.value;
  }
  const FileEntry* pf = ck.file(params_rel);
  if (!pf)
    out.add("PT016", Severity::error, "the Meta layout has no " + params_rel + ": the reference loader builds ModelArgs(**json.load(params.json))",
            first, "", "download params.json with the weights (it holds dim, n_layers, n_heads, ...)");
  else if (!dir.empty()) {  // not a side file the loader reads at the root: parsed here
    std::string text;
    std::string err = pf->readable() ? io::read_file(pf->abs, 1u << 20, text) : "cannot be opened";
    if (err.empty()) {
      parsed = json::parse(text);
      if (parsed.ok()) pv = &parsed.value;
      else
        err = "line " + std::to_string(parsed.error->line) + ", column " + std::to_string(parsed.error->column) + ": " + parsed.error->message;
    }
    if (!err.empty())
      out.add("PT016", Severity::error, params_rel + " cannot be read as JSON: " + err, params_rel, "",
              "json.load fails before ModelArgs is built; download it again");
  }
  if (pv) {
    auto problems = read_params(*pv, params);
    for (const auto& p : problems)
      out.add("PT016", Severity::error, params_rel + ": " + p, params_rel, "",
              "ModelArgs gets a wrong or missing hyperparameter; the model is built with other shapes than the weights");
  }

  // The tensors of each readable rank.
  size_t readable = 0;
  for (auto& r : ranks) {
    for (const auto& s : ck.pickle_scans)
      if (s.file == r.file) r.scan = &s;
    if (!r.scan || !r.scan->weights_read) continue;
    ++readable;
    for (const auto& t : r.scan->tensors)
      if (t.problem.empty()) r.by_name.emplace(t.name, &t);
  }
  std::vector<const RankFile*> usable;
  for (const auto& r : ranks)
    if (!r.by_name.empty()) usable.push_back(&r);
  if (usable.empty()) return;  // PT001-PT013 say why
  const RankFile& base = *usable.front();
  const int64_t mp = static_cast<int64_t>(ranks.back().rank + 1);
  const bool all_ranks = readable == ranks.size() && static_cast<int64_t>(ranks.size()) == mp;

  // PT017: the same names and dtypes everywhere.
  std::set<std::string> everywhere, anywhere;  // names present on every / some usable rank
  for (const RankFile* r : usable)
    for (const auto& [name, t] : r->by_name) anywhere.insert(name);
  for (const auto& [name, t] : base.by_name) {
    bool all = true;
    for (const RankFile* r : usable) all &= r->by_name.count(name) > 0;
    if (all) everywhere.insert(name);
  }
  for (const RankFile* r : usable) {
    std::vector<std::string> lacks, extra, dtype;
    for (const auto& [name, t] : base.by_name)
      if (!r->by_name.count(name)) lacks.push_back(name);
    for (const auto& [name, t] : r->by_name) {
      auto b = base.by_name.find(name);
      if (b == base.by_name.end()) extra.push_back(name);
      else if (b->second->dtype != t->dtype) dtype.push_back(name + " (" + t->dtype + ", " + base.file + ": " + b->second->dtype + ")");
    }
    if (!lacks.empty())
      out.add("PT017", Severity::error,
              std::to_string(lacks.size()) + " tensor(s) of " + base.file + " are not in this rank: " + list_names(lacks), r->file, lacks.front(),
              "every rank holds its slice of every tensor; a rank from another export or a damaged save");
    if (!extra.empty())
      out.add("PT017", Severity::error,
              std::to_string(extra.size()) + " tensor(s) of this rank are not in " + base.file + ": " + list_names(extra), r->file, extra.front(),
              "every rank holds its slice of every tensor; a rank from another export or a damaged save");
    if (!dtype.empty())
      out.add("PT017", Severity::error, "dtype differs from " + base.file + " for " + list_names(dtype), r->file, "",
              "the ranks were saved by different exports; their slices cannot be one tensor");
  }

  // PT018, then the merged shapes against params.json (PT019-PT021).
  std::vector<std::string> missing, unexpected;
  for (const auto& name : everywhere) {
    const pt::Tensor& t0 = *base.by_name.at(name);
    const Role role = role_of(name);
    bool same = true;
    std::string differs;
    for (const RankFile* r : usable) {
      const pt::Tensor& t = *r->by_name.at(name);
      if (t.shape != t0.shape && same) {
        same = false;
        differs = r->file + " holds " + dims(t.shape) + ", " + base.file + " " + dims(t0.shape);
      }
    }
    const bool needs_2d = role.split != Split::Replicated;
    if (!same || (needs_2d && t0.shape.size() != 2)) {
      out.add("PT018", Severity::error,
              "tensor " + name + " is " + split_words(role.split) + ", so every rank holds the same shape" +
                  (needs_2d ? " of 2 dims" : "") + ": " + (same ? "it has " + dims(t0.shape) : differs),
              base.file, name, "fairscale splits each parallel layer evenly; ranks of different exports or model-parallel sizes were mixed");
      continue;
    }
    if (!role.known) {
      unexpected.push_back(name);
      continue;
    }
    if (!params.usable || !all_ranks) continue;  // merged shapes need params and every rank
    if (role.layer >= params.n_layers) {
      unexpected.push_back(name);
      continue;
    }
    if (role.kind == "rope.freqs") continue;  // not a model parameter: the model computes freqs_cis
    const int64_t dim = params.dim, hd = params.head_dim(), hidden = params.hidden();
    std::vector<int64_t> want;
    std::string why;
    if (role.kind == "wq") want = {params.n_heads * hd, dim}, why = "n_heads " + std::to_string(params.n_heads) + " x head_dim " + std::to_string(hd) + ", dim";
    else if (role.kind == "wk" || role.kind == "wv") want = {params.n_kv_heads * hd, dim}, why = "n_kv_heads " + std::to_string(params.n_kv_heads) + " x head_dim " + std::to_string(hd) + ", dim";
    else if (role.kind == "wo") want = {dim, params.n_heads * hd}, why = "dim, n_heads x head_dim";
    else if (role.kind == "w1" || role.kind == "w3") want = {hidden, dim}, why = "FeedForward hidden " + std::to_string(hidden) + " (from dim, multiple_of, ffn_dim_multiplier), dim";
    else if (role.kind == "w2") want = {dim, hidden}, why = "dim, FeedForward hidden " + std::to_string(hidden) + " (from dim, multiple_of, ffn_dim_multiplier)";
    else if (role.kind == "tok_embeddings" || role.kind == "output") want = {params.vocab_size, dim}, why = "vocab_size, dim";
    else want = {dim}, why = "dim";  // norms
    std::vector<int64_t> merged = t0.shape;
    std::string how;
    if (role.split == Split::Dim0) merged[0] *= mp;
    else if (role.split == Split::Dim1) merged[1] *= mp;
    else if (role.split == Split::Embedding && mp > 1) {
      // Llama 1/2 split the embedding dim, Llama 3 the vocabulary: take the one that gives dim columns.
      if (merged[1] * mp == dim) merged[1] *= mp, how = " (embedding dim split, Llama 1/2)";
      else if (merged[1] == dim) merged[0] *= mp, how = " (vocabulary split, Llama 3)";
      else merged[1] *= mp;
    }
    if (params.vocab_size < 0 && (role.kind == "tok_embeddings" || role.kind == "output")) want[0] = merged[0];  // -1: from the tokenizer
    if (merged != want)
      out.add("PT019", Severity::error,
              "tensor " + name + ": " + std::to_string(mp) + " rank(s) of " + dims(t0.shape) + ", " + split_words(role.split) +
                  ", merge to " + dims(merged) + how + "; params.json implies " + dims(want) + " (" + why + ")",
              base.file, name, "params.json belongs to another model size, or the ranks were re-split; load_state_dict fails with a size mismatch");
  }
  // Names params.json implies.
  if (params.usable && all_ranks) {
    auto need = [&](const std::string& n) {
      if (!anywhere.count(n)) missing.push_back(n);
    };
    need("tok_embeddings.weight");
    need("norm.weight");
    need("output.weight");
    for (int64_t i = 0; i < params.n_layers && missing.size() < 10000; ++i)
      for (const char* leaf : {"attention.wq.weight", "attention.wk.weight", "attention.wv.weight", "attention.wo.weight",
                               "feed_forward.w1.weight", "feed_forward.w2.weight", "feed_forward.w3.weight",
                               "attention_norm.weight", "ffn_norm.weight"})
        need("layers." + std::to_string(i) + "." + leaf);
  }
  if (!missing.empty())
    out.add("PT020", Severity::error,
            std::to_string(missing.size()) + " tensor(s) a " + std::to_string(params.n_layers) + "-layer model built from params.json needs are in no rank: " +
                list_names(missing),
            base.file, missing.front(), "load_state_dict(strict=False) leaves them randomly initialised and the model generates garbage; the ranks were cut or params.json describes another model");
  if (!unexpected.empty())
    out.add("PT021", Severity::warning,
            std::to_string(unexpected.size()) + " tensor(s) are not parameters of Meta's model" +
                (params.usable ? " with " + std::to_string(params.n_layers) + " layers" : std::string()) + ": " + list_names(unexpected),
            base.file, unexpected.front(), "load_state_dict(strict=False) ignores them silently; a converted or merged checkpoint under Meta's names, or params.json has too few n_layers");
}

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  struct Dir {
    std::vector<RankFile> ranks;
    std::vector<std::string> other_pth;
  };
  std::map<std::string, Dir> dirs;
  for (const auto& f : ck.files) {
    if (!ends_with(f.rel, ".pth")) continue;
    const size_t slash = f.rel.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : f.rel.substr(0, slash + 1);
    if (auto r = rank_of(f.rel)) dirs[dir].ranks.push_back({*r, f.rel});
    else dirs[dir].other_pth.push_back(f.rel);
  }
  for (auto& [dir, d] : dirs)
    if (!d.ranks.empty()) judge(ck, dir, std::move(d.ranks), d.other_pth, out);
}

}  // namespace

const FamilyDef kMetaLayoutFamily{"PT (Meta layout)", kCodes, run};

}  // namespace ckpt::checks
