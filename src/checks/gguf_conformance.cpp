// AR for GGUF: the tensor set and shapes llama.cpp requests for the file's architecture and
// `{arch}.*` hyperparameters (src/arch/gguf_tensors.cpp), against the tensor infos of every
// shard. An architecture ckpt does not model gets a warning, never a guessed error.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "checks/family.h"
#include "ckpt/gguf_arch.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 6> kCodes{{
    {"AR020", Severity::warning, "GGUF architecture not modelled: tensor set not checked"},
    {"AR021", Severity::error, "GGUF tensor llama.cpp requires is missing"},
    {"AR022", Severity::error, "GGUF tensor llama.cpp does not request"},
    {"AR023", Severity::error, "GGUF tensor shape differs from the hyperparameters"},
    {"AR024", Severity::error, "GGUF expert tensor disagrees with expert_count"},
    {"AR025", Severity::warning, "GGUF conformance not checked: hyperparameters unusable"},
}};

constexpr size_t kMaxListed = 10;

std::string dims(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// A row of the format-neutral table (shape outermost first) and its shard.
struct Stored {
  const TensorEntry* entry;
  const Shard* shard;
};

// The row's dimensions in GGUF ne order (innermost first), as llama.cpp compares them.
std::vector<uint64_t> shape_of(const TensorEntry& t) {
  std::vector<uint64_t> ne(t.shape.begin(), t.shape.end());
  std::reverse(ne.begin(), ne.end());
  return ne;
}

// llama.cpp's check_tensor_dims: every expected ne[i] matches, every further dimension is 1.
bool shape_matches(const TensorEntry& t, const std::vector<uint64_t>& want) {
  const auto ne = shape_of(t);
  for (size_t d = 0; d < std::max(ne.size(), want.size()); ++d) {
    const uint64_t have = d < ne.size() ? ne[d] : 1, w = d < want.size() ? want[d] : 1;
    if (have != w) return false;
  }
  return true;
}

void check_model(const Checkpoint& ck, const GgufModel& m, FindingSink& out) {
  const Shard* first = m.first(ck.gguf_shards);
  if (!first || !m.missing.empty()) return;  // GG040 says why
  for (uint32_t i : m.shards)
    if (!ck.gguf_shards[i].gguf->parsed) return;  // GG says why
  const gguf::File& g = *first->gguf;
  const auto arch = g.get_string("general.architecture");
  if (!arch) return;  // GG030
  const auto type = g.get_string("general.type");
  if (*arch == "clip" || (type && (*type == "mmproj" || *type == "adapter"))) return;  // projectors, adapters
  if (!gguf_arch::is_modelled(*arch)) {
    std::string known;
    for (auto a : gguf_arch::modelled_architectures()) known += (known.empty() ? "" : ", ") + std::string(a);
    out.add("AR020", Severity::warning,
            "architecture \"" + std::string(*arch) + "\" is not modelled by ckpt: its tensor names and shapes are not checked (structure, metadata and tokenizer are)",
            first->file, "", "ckpt models " + known);
    return;
  }
  uint64_t n_tokens = 0;
  if (const auto* t = g.find("tokenizer.ggml.tokens"); t && t->value.elem == gguf::ValueType::STRING) n_tokens = t->value.strings.size();
  std::string why;
  const auto hp = gguf_arch::read_hparams(g, n_tokens, &why);
  if (!hp) {
    out.add("AR025", Severity::warning, "tensor set not checked: " + why, first->file, "",
            "see the GG findings on the hyperparameters");
    return;
  }
  std::unordered_map<std::string_view, Stored> stored;
  for (uint32_t i : m.shards)
    for (const auto& t : ck.gguf_shards[i].header.tensors) stored.emplace(t.name, Stored{&t, &ck.gguf_shards[i]});
  const auto expected = gguf_arch::expected_tensors(*hp);
  // The form of each alternative group the file uses: the one with most tensors present.
  std::map<std::string, std::map<uint8_t, int>> present_by_form;
  for (const auto& x : expected)
    if (!x.group.empty()) present_by_form[x.group][x.form] += stored.count(x.name) ? 1 : 0;
  std::map<std::string, uint8_t> chosen;
  for (const auto& [group, forms] : present_by_form) {
    uint8_t best = 0;
    int most = -1;
    for (const auto& [form, n] : forms)
      if (n > most) most = n, best = form;
    chosen[group] = most > 0 ? best : 0;
  }
  std::unordered_map<std::string_view, bool> judged;  // names the expected set accounts for
  size_t missing = 0, misshapen = 0;
  std::string missing_list;
  for (const auto& x : expected) {
    if (!x.group.empty() && chosen[x.group] != x.form) continue;
    auto it = stored.find(x.name);
    if (it == stored.end()) {
      if (x.need == gguf_arch::Need::optional || x.form_optional) continue;
      if (++missing <= kMaxListed) missing_list += (missing_list.empty() ? "" : ", ") + x.name;
      continue;
    }
    judged[it->first] = true;
    const auto& t = *it->second.entry;
    if (shape_matches(t, x.ne)) continue;
    if (++misshapen > kMaxListed) continue;
    const auto ne = shape_of(t);
    const bool experts = x.name.find("_exps.") != std::string::npos && x.ne.size() >= 2 && ne.size() == x.ne.size() &&
                         ne.back() != x.ne.back();
    if (experts)
      out.add("AR024", Severity::error,
              x.name + " holds " + std::to_string(ne.back()) + " experts but " + hp->arch + ".expert_count is " +
                  std::to_string(hp->X) + " (shape " + dims(shape_of(t)) + ", expected " + dims(x.ne) + ")",
              it->second.shard->file, x.name, "llama.cpp fails \"tensor has wrong shape\"; expert_count and the stored experts must agree");
    else
      out.add("AR023", Severity::error,
              x.name + " has shape " + dims(shape_of(t)) + ", expected " + dims(x.ne) + " from the " + hp->arch + ".* hyperparameters",
              it->second.shard->file, x.name,
              x.name == "token_embd.weight" || x.name == "output.weight"
                  ? "the second dimension is the token count of tokenizer.ggml.tokens (see TK024)"
                  : "llama.cpp fails \"tensor has wrong shape\"; the hyperparameters and the tensors come from different models or a broken converter");
  }
  if (missing)
    out.add("AR021", Severity::error,
            std::to_string(missing) + " tensor(s) llama.cpp requires are missing: " + missing_list + (missing > kMaxListed ? ", ..." : ""),
            first->file, "", "llama.cpp fails \"missing tensor\"; the file is incomplete or was converted for another architecture");
  if (misshapen > kMaxListed)
    out.add("AR023", Severity::error, std::to_string(misshapen - kMaxListed) + " more tensors with unexpected shapes", first->file);
  // Everything else is unexpected: llama.cpp counts the tensors ("wrong number of tensors").
  const uint64_t n_layer = hp->L - hp->nextn;
  size_t unexpected = 0;
  std::string unexpected_list;
  const Shard* where = nullptr;
  for (uint32_t i : m.shards)
    for (const auto& t : ck.gguf_shards[i].header.tensors) {
      if (judged.count(t.name)) continue;
      if (t.name.rfind("blk.", 0) == 0) {  // trailing NextN/MTP layers are loaded with TENSOR_SKIP: not judged
        const auto layer = std::strtoull(std::string(t.name.substr(4)).c_str(), nullptr, 10);
        if (layer >= n_layer) continue;
      }
      if (++unexpected <= kMaxListed) unexpected_list += (unexpected_list.empty() ? "" : ", ") + std::string(t.name);
      if (!where) where = &ck.gguf_shards[i];
    }
  if (unexpected) {
    const bool tied_head = unexpected_list.find("output.weight") != std::string::npos && (hp->arch == "gemma" || hp->arch == "gemma2");
    out.add("AR022", Severity::error,
            std::to_string(unexpected) + " tensor(s) that llama.cpp's " + hp->arch + " loader does not request: " + unexpected_list +
                (unexpected > kMaxListed ? ", ..." : ""),
            where->file, unexpected == 1 ? unexpected_list : std::string(),
            tied_head ? "gemma and gemma2 always tie the output to token_embd: an output.weight makes the load fail \"wrong number of tensors\""
                      : "llama.cpp fails \"wrong number of tensors; expected N, got M\" (llama.cpp#8761: an extra rope_freqs for an older runtime)");
  }
}

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  for (const auto& m : ck.gguf_models) check_model(ck, m, out);
}

}  // namespace

const FamilyDef kGgufConformanceFamily{"GGUF AR", kCodes, run};

}  // namespace ckpt::checks
