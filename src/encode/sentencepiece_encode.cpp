// tokenizer.model (SentencePiece ModelProto) encoder for BPE models, as sentencepiece's
// bpe_model.cc encodes: identity normalisation (+ whitespace escaping / dummy prefix / extra
// whitespace removal), user-defined pieces matched whole, then the adjacent pair whose
// concatenation is the highest-scoring piece is merged first (leftmost on ties).
#include <algorithm>
#include <cstring>
#include <queue>
#include <unordered_map>

#include "ckpt/encode.h"
#include "ckpt/json.h"
#include "encode/common.h"

namespace ckpt::encode {
namespace {

constexpr size_t kMaxPieces = 4'000'000;
const std::string kSpace = "\xE2\x96\x81";  // U+2581

struct Reader {
  std::string_view d;
  size_t p = 0;
  bool ok = true;
  bool done() const { return p >= d.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int s = 0; s < 64; s += 7) {
      if (p >= d.size()) {
        ok = false;
        return 0;
      }
      unsigned char c = static_cast<unsigned char>(d[p++]);
      v |= static_cast<uint64_t>(c & 0x7F) << s;
      if (!(c & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  // Reads one field: number, wire type; len-delimited data in `bytes`, numbers in `num`.
  bool field(uint32_t& number, uint32_t& wire, uint64_t& num, std::string_view& bytes) {
    uint64_t tag = varint();
    if (!ok) return false;
    number = static_cast<uint32_t>(tag >> 3);
    wire = static_cast<uint32_t>(tag & 7);
    if (number == 0) return ok = false;
    switch (wire) {
      case 0: num = varint(); return ok;
      case 1:
        if (d.size() - p < 8) return ok = false;
        std::memcpy(&num, d.data() + p, 8);
        p += 8;
        return true;
      case 2: {
        uint64_t len = varint();
        if (!ok || len > d.size() - p) return ok = false;
        bytes = d.substr(p, len);
        p += len;
        return true;
      }
      case 5: {
        if (d.size() - p < 4) return ok = false;
        uint32_t v;
        std::memcpy(&v, d.data() + p, 4);
        num = v;
        p += 4;
        return true;
      }
      default: return ok = false;
    }
  }
};

enum PieceType { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6 };

struct Piece {
  std::string text;
  float score = 0;
  int type = NORMAL;
};

class SpmEncoder final : public Encoder {
 public:
  std::vector<Piece> pieces;
  std::unordered_map<std::string, uint32_t> normal;    // NORMAL / USER_DEFINED / UNUSED
  std::unordered_map<std::string, uint32_t> reserved;  // UNKNOWN / CONTROL / BYTE
  std::vector<std::string> user_defined;
  size_t max_user_len = 0;
  int model_type = 1;
  bool byte_fallback = false, treat_ws_suffix = false;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2;
  bool add_dummy_prefix = true, remove_extra_ws = true, escape_ws = true;
  std::string norm_name;
  bool add_bos = true, add_eos = false;
  int byte_ids[256];
  detail::ByteTrie trie;       // NORMAL / USER_DEFINED / UNUSED pieces (Unigram)
  detail::ByteTrie user_trie;  // USER_DEFINED pieces (BPE: matched whole, never merged)
  float min_score = 0, max_score = 0;

  // unigram_model.cc EncodeOptimized: Viterbi; user-defined pieces score length * max - 0.1,
  // unknown characters min - 10; UNUSED pieces are not candidates.
  void unigram_pieces(const std::string& norm, std::vector<std::pair<size_t, size_t>>& out) const {
    struct Node {
      float score = 0;
      int64_t start = -1;
      int64_t id = -1;
    };
    std::vector<Node> best(norm.size() + 1);
    const float unk_score = min_score - 10.0f;
    size_t pos = 0;
    while (pos < norm.size()) {
      size_t mblen = detail::utf8_len(norm, pos);
      if (!mblen) mblen = 1;
      const float here = best[pos].score;
      bool single = false;
      trie.prefixes(norm, pos, [&](size_t len, uint32_t id) {
        const Piece& p = pieces[id];
        if (p.type == UNUSED) return;
        Node& t = best[pos + len];
        if (p.type == USER_DEFINED) {
          double cand = (static_cast<double>(static_cast<float>(len) * max_score) - 0.1) + static_cast<double>(here);
          if (t.start < 0 || cand > static_cast<double>(t.score))
            t = {static_cast<float>(cand), static_cast<int64_t>(pos), id};
        } else {
          float cand = p.score + here;
          if (t.start < 0 || cand > t.score) t = {cand, static_cast<int64_t>(pos), id};
        }
        if (len == mblen) single = true;
      });
      if (!single) {
        Node& t = best[pos + mblen];
        float cand = unk_score + here;
        if (t.start < 0 || cand > t.score) t = {cand, static_cast<int64_t>(pos), unk_id};
      }
      pos += mblen;
    }
    size_t end = norm.size();
    while (end > 0) {
      size_t start = static_cast<size_t>(best[end].start);
      out.emplace_back(start, end - start);
      end = start;
    }
    std::reverse(out.begin(), out.end());
  }

  int64_t piece_id(std::string_view s) const {
    std::string k(s);
    if (auto it = normal.find(k); it != normal.end()) return it->second;
    if (auto it = reserved.find(k); it != reserved.end()) return it->second;
    return -1;
  }

  std::string normalize(std::string_view text) const {
    std::string s;
    if (remove_extra_ws) {
      // strip leading/trailing spaces, collapse runs of spaces to one
      bool prev_space = true;
      for (char c : text) {
        if (c == ' ') {
          if (prev_space) continue;
          prev_space = true;
        } else {
          prev_space = false;
        }
        s += c;
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
    } else {
      s = text;
    }
    if (s.empty()) return s;
    std::string out;
    const std::string space = escape_ws ? kSpace : " ";
    if (add_dummy_prefix && !treat_ws_suffix) out += space;
    for (char c : s) {
      if (c == ' ') out += space;
      else out += c;
    }
    if (add_dummy_prefix && treat_ws_suffix) out += space;
    return out;
  }

  bool encode(std::string_view text, bool add_special, std::vector<uint32_t>& ids, std::string& error) const override {
    ids.clear();
    if (size_t bad = detail::first_invalid_utf8(text); bad != std::string_view::npos) {
      error = "text is not valid UTF-8 at byte " + std::to_string(bad);
      return false;
    }
    if (add_special && add_bos && bos_id >= 0) ids.push_back(static_cast<uint32_t>(bos_id));
    std::string norm = normalize(text);
    if (model_type == 1) {
      std::vector<std::pair<size_t, size_t>> spans;
      unigram_pieces(norm, spans);
      bool last_unk = false;
      const std::unordered_map<std::string, std::pair<std::string, std::string>> none;
      for (auto [b, l] : spans)
        if (!emit(std::string_view(norm).substr(b, l), none, ids, error, 0, last_unk)) return false;
      if (add_special && add_eos && eos_id >= 0) ids.push_back(static_cast<uint32_t>(eos_id));
      return true;
    }
    struct Sym {
      size_t begin, len;
      int prev, next;
      bool freeze;
    };
    std::vector<Sym> syms;
    size_t i = 0;
    while (i < norm.size()) {
      size_t len = 0;
      bool freeze = false;
      if (max_user_len) {
        user_trie.prefixes(norm, i, [&](size_t l, uint32_t) {
          len = l;  // longest user-defined piece at i
          freeze = true;
        });
      }
      if (!len) {
        len = detail::utf8_len(norm, i);
        if (!len) len = 1;
      }
      syms.push_back({i, len, static_cast<int>(syms.size()) - 1, -1, freeze});
      i += len;
    }
    int n = static_cast<int>(syms.size());
    for (int k = 0; k + 1 < n; ++k) syms[k].next = k + 1;
    struct Cand {
      float score;
      int left, right;
      size_t size;
    };
    auto worse = [](const Cand& a, const Cand& b) {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    };
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> q(worse);
    std::unordered_map<std::string, std::pair<std::string, std::string>> rev_merge;
    auto consider = [&](int l, int r) {
      if (l < 0 || r < 0 || syms[l].freeze || syms[r].freeze) return;
      std::string_view cat(norm.data() + syms[l].begin, syms[l].len + syms[r].len);
      auto it = normal.find(std::string(cat));
      if (it == normal.end()) return;
      q.push({pieces[it->second].score, l, r, cat.size()});
      if (pieces[it->second].type == UNUSED)
        rev_merge[std::string(cat)] = {std::string(norm.data() + syms[l].begin, syms[l].len),
                                       std::string(norm.data() + syms[r].begin, syms[r].len)};
    };
    for (int k = 0; k + 1 < n; ++k) consider(k, k + 1);
    while (!q.empty()) {
      Cand c = q.top();
      q.pop();
      Sym& L = syms[c.left];
      Sym& R = syms[c.right];
      if (L.len == 0 || R.len == 0 || L.len + R.len != c.size || L.next != c.right) continue;
      L.len += R.len;
      L.next = R.next;
      if (R.next >= 0) syms[R.next].prev = c.left;
      R.len = 0;
      consider(L.prev, c.left);
      consider(c.left, L.next);
    }
    bool last_unk = false;
    for (int k = n ? 0 : -1; k >= 0; k = syms[k].next) {
      std::string_view w(norm.data() + syms[k].begin, syms[k].len);
      if (!emit(w, rev_merge, ids, error, 0, last_unk)) return false;
    }
    if (add_special && add_eos && eos_id >= 0) ids.push_back(static_cast<uint32_t>(eos_id));
    return true;
  }

  // Emits piece w; an UNUSED piece is split back into the pair it was merged from (resegment).
  bool emit(std::string_view w, const std::unordered_map<std::string, std::pair<std::string, std::string>>& rev,
            std::vector<uint32_t>& ids, std::string& error, int depth, bool& last_unk) const {
    int64_t id = piece_id(w);
    if (id >= 0 && pieces[static_cast<size_t>(id)].type == UNUSED && depth < 1000) {
      auto it = rev.find(std::string(w));
      if (it != rev.end())
        return emit(it->second.first, rev, ids, error, depth + 1, last_unk) &&
               emit(it->second.second, rev, ids, error, depth + 1, last_unk);
    }
    if (id >= 0 && pieces[static_cast<size_t>(id)].type != UNKNOWN) {
      ids.push_back(static_cast<uint32_t>(id));
      last_unk = false;
      return true;
    }
    if (byte_fallback) {
      bool all = true;
      for (unsigned char c : w)
        if (byte_ids[c] < 0) all = false;
      if (all) {
        for (unsigned char c : w) ids.push_back(static_cast<uint32_t>(byte_ids[c]));
        last_unk = false;
        return true;
      }
    }
    if (unk_id < 0 || static_cast<size_t>(unk_id) >= pieces.size()) {
      error = "no piece for '" + std::string(w) + "' and no unk piece";
      return false;
    }
    // sentencepiece merges a run of unknown pieces into one unk
    if (!last_unk) ids.push_back(static_cast<uint32_t>(unk_id));
    last_unk = true;
    return true;
  }

  std::string describe() const override {
    return std::string("tokenizer.model: SentencePiece ") + (model_type == 1 ? "Unigram" : "BPE") + ", " + std::to_string(pieces.size()) + " pieces";
  }
};

bool fail(std::string& error, const std::string& m) {
  error = "tokenizer.model: " + m;
  return false;
}

}  // namespace

std::unique_ptr<Encoder> load_sentencepiece(std::string_view model, std::string_view tokenizer_config,
                                            std::string& error) {
  auto enc = std::make_unique<SpmEncoder>();
  std::string precompiled;
  bool have_norm_spec = false;
  Reader r{model};
  uint32_t num, wire;
  uint64_t v;
  std::string_view bytes;
  while (!r.done()) {
    if (!r.field(num, wire, v, bytes)) return fail(error, "malformed protobuf"), nullptr;
    if (num == 1 && wire == 2) {
      if (enc->pieces.size() >= kMaxPieces) return fail(error, "more than 4000000 pieces"), nullptr;
      Piece p;
      Reader pr{bytes};
      while (!pr.done()) {
        if (!pr.field(num, wire, v, bytes)) return fail(error, "malformed piece"), nullptr;
        if (num == 1 && wire == 2) p.text = bytes;
        else if (num == 2 && wire == 5) {
          uint32_t u = static_cast<uint32_t>(v);
          std::memcpy(&p.score, &u, 4);
        } else if (num == 3 && wire == 0) p.type = static_cast<int>(v);
      }
      if (p.type < 1 || p.type > 6) return fail(error, "piece with unknown type " + std::to_string(p.type)), nullptr;
      enc->pieces.push_back(std::move(p));
    } else if (num == 2 && wire == 2) {
      Reader tr{bytes};
      while (!tr.done()) {
        if (!tr.field(num, wire, v, bytes)) return fail(error, "malformed trainer_spec"), nullptr;
        if (wire != 0) continue;
        int64_t iv = static_cast<int32_t>(static_cast<uint32_t>(v));
        switch (num) {
          case 3: enc->model_type = static_cast<int>(iv); break;
          case 24: enc->treat_ws_suffix = v != 0; break;
          case 35: enc->byte_fallback = v != 0; break;
          case 40: enc->unk_id = iv; break;
          case 41: enc->bos_id = iv; break;
          case 42: enc->eos_id = iv; break;
          default: break;
        }
      }
    } else if (num == 3 && wire == 2) {
      have_norm_spec = true;
      Reader nr{bytes};
      while (!nr.done()) {
        if (!nr.field(num, wire, v, bytes)) return fail(error, "malformed normalizer_spec"), nullptr;
        if (num == 1 && wire == 2) enc->norm_name = bytes;
        else if (num == 2 && wire == 2) precompiled = bytes;
        else if (num == 3 && wire == 0) enc->add_dummy_prefix = v != 0;
        else if (num == 4 && wire == 0) enc->remove_extra_ws = v != 0;
        else if (num == 5 && wire == 0) enc->escape_ws = v != 0;
      }
    }
  }
  (void)have_norm_spec;
  if (enc->pieces.empty()) return fail(error, "no pieces"), nullptr;
  if (enc->model_type != 1 && enc->model_type != 2)
    return fail(error, std::string("model type ") + (enc->model_type == 1 ? "Unigram" : enc->model_type == 3 ? "Word" : enc->model_type == 4 ? "Char" : std::to_string(enc->model_type)) +
                           " is not supported for encoding"),
           nullptr;
  if (!precompiled.empty() && enc->norm_name != "identity")
    return fail(error, "normalizer '" + enc->norm_name + "' (precompiled charsmap) is not supported for encoding"),
           nullptr;
  for (int b = 0; b < 256; ++b) enc->byte_ids[b] = -1;
  bool have_normal = false;
  for (size_t id = 0; id < enc->pieces.size(); ++id) {
    const Piece& p = enc->pieces[id];
    if (detail::first_invalid_utf8(p.text) != std::string_view::npos)
      return fail(error, "piece " + std::to_string(id) + " is not valid UTF-8"), nullptr;
    bool is_normal = p.type == NORMAL || p.type == USER_DEFINED || p.type == UNUSED;
    auto& map = is_normal ? enc->normal : enc->reserved;
    auto& other = is_normal ? enc->reserved : enc->normal;
    if (other.count(p.text) || !map.emplace(p.text, static_cast<uint32_t>(id)).second)
      return fail(error, "duplicate piece '" + p.text + "'"), nullptr;
    if (is_normal) enc->trie.add(p.text, static_cast<uint32_t>(id));
    if (p.type == NORMAL) {
      if (!(p.score == p.score)) return fail(error, "piece " + std::to_string(id) + " has a NaN score"), nullptr;
      enc->min_score = have_normal ? std::min(enc->min_score, p.score) : p.score;
      enc->max_score = have_normal ? std::max(enc->max_score, p.score) : p.score;
      have_normal = true;
    }
    if (p.type == USER_DEFINED) {
      enc->max_user_len = std::max(enc->max_user_len, p.text.size());
      enc->user_trie.add(p.text, static_cast<uint32_t>(id));
    }
    if (p.type == BYTE) {
      unsigned b;
      char tail;
      if (p.text.size() == 6 && std::sscanf(p.text.c_str(), "<0x%2X>%c", &b, &tail) == 1 && b < 256)
        enc->byte_ids[b] = static_cast<int>(id);
    }
  }
  auto bad_id = [&](int64_t id) { return id >= static_cast<int64_t>(enc->pieces.size()); };
  if (bad_id(enc->unk_id) || bad_id(enc->bos_id) || bad_id(enc->eos_id))
    return fail(error, "unk/bos/eos id beyond the piece count"), nullptr;
  if (!tokenizer_config.empty()) {
    auto cfg = json::parse(tokenizer_config);
    if (!cfg.ok()) return fail(error, "tokenizer_config.json: " + cfg.error->message), nullptr;
    if (auto b = cfg.value.get_bool("add_bos_token")) enc->add_bos = *b;
    if (auto b = cfg.value.get_bool("add_eos_token")) enc->add_eos = *b;
  }
  return enc;
}

}  // namespace ckpt::encode
