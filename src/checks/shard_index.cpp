// IX: the shard index (model.safetensors.index.json) against the shards on disk.
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>

#include "checks/family.h"
#include "checks/util.h"
#include "io/json_scan.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 13> kCodes{{
    {"IX001", Severity::error, "index names a shard that is not on disk"},
    {"IX002", Severity::error, "stray shard: a .safetensors file the index does not name"},
    {"IX003", Severity::error, "tensor stored in more than one shard"},
    {"IX004", Severity::error, "tensor lives in a different shard than the index says"},
    {"IX005", Severity::error, "index names a tensor that no shard holds"},
    {"IX006", Severity::error, "metadata.total_size differs from the bytes of the indexed tensors"},
    {"IX007", Severity::error, "several shards but no index"},
    {"IX008", Severity::error, "index path escapes the model directory"},
    {"IX009", Severity::error, "shard file names disagree with their numbering scheme"},
    {"IX010", Severity::error, "index file unreadable or malformed"},
    {"IX011", Severity::error, "shard holds a tensor the index does not list"},
    {"IX012", Severity::warning, "Mistral-native consolidated weights beside the Hugging Face shards"},
    {"IX013", Severity::error, "duplicate tensor name in the index"},
}};


bool is_consolidated(std::string_view rel) { return starts_with(rel, "consolidated") && ends_with(rel, ".safetensors"); }

// "model-00001-of-00003.safetensors" -> {prefix "model", index 1, total 3}
struct ShardName {
  std::string prefix;
  unsigned index = 0, total = 0;
  std::string total_text;  // as written, e.g. "00002"
};
std::optional<ShardName> parse_shard_name(std::string_view rel) {
  const std::string_view ext = ends_with(rel, ".bin") ? ".bin" : ".safetensors";  // pytorch_model-00001-of-00002.bin
  if (!ends_with(rel, ext)) return std::nullopt;
  std::string_view stem = rel.substr(0, rel.size() - ext.size());
  // stem = PREFIX "-" DIGITS "-of-" DIGITS
  auto digits_back = [](std::string_view s, size_t& n) {
    n = 0;
    while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[s.size() - 1 - n]))) ++n;
    return n > 0 && n <= 9;
  };
  size_t n_total, n_index;
  if (!digits_back(stem, n_total)) return std::nullopt;
  std::string_view total = stem.substr(stem.size() - n_total);
  stem.remove_suffix(n_total);
  if (!ends_with(stem, "-of-")) return std::nullopt;
  stem.remove_suffix(4);
  if (!digits_back(stem, n_index)) return std::nullopt;
  std::string_view index = stem.substr(stem.size() - n_index);
  stem.remove_suffix(n_index);
  if (!ends_with(stem, "-")) return std::nullopt;
  stem.remove_suffix(1);
  return ShardName{std::string(stem), static_cast<unsigned>(std::stoul(std::string(index))),
                   static_cast<unsigned>(std::stoul(std::string(total))), std::string(total)};
}

// Numbering problems inside one set of names; empty when consistent (1..N or 0-based 0..N).
std::vector<std::string> numbering_problems(const std::vector<std::string>& names, const std::string& what) {
  std::map<std::string, std::map<unsigned, std::set<unsigned>>> by_prefix;  // prefix -> total -> indices
  for (const auto& n : names)
    if (auto s = parse_shard_name(n)) by_prefix[s->prefix][s->total].insert(s->index);
  std::vector<std::string> problems;
  for (const auto& [prefix, totals] : by_prefix) {
    if (totals.size() > 1) {
      std::string t;
      for (const auto& [total, idx] : totals)
        t += (t.empty() ? "" : ", ") + std::to_string(idx.size()) + " named '-of-" + std::to_string(total) + "'";
      problems.push_back(what + " mix naming schemes for '" + prefix + "': " + t);
      continue;
    }
    const auto& [total, idx] = *totals.begin();
    bool one_based = idx.size() == total && *idx.begin() == 1 && *idx.rbegin() == total;
    bool zero_based = idx.size() == total + 1 && *idx.begin() == 0 && *idx.rbegin() == total;
    if (one_based || zero_based) continue;
    std::vector<std::string> missing;
    unsigned lo = idx.count(0) ? 0 : 1;
    for (unsigned i = lo; i <= total && missing.size() < 6; ++i)
      if (!idx.count(i)) missing.push_back(std::to_string(i));
    std::string extra;
    for (unsigned i : idx)
      if (i > total) extra += (extra.empty() ? "" : ", ") + std::to_string(i);
    std::string msg = what + " '" + prefix + "-XXXXX-of-" + std::to_string(total) + "': " + std::to_string(idx.size()) +
                      " file(s) for " + std::to_string(total) + " parts";
    if (!missing.empty()) msg += "; missing part(s) " + list_names(missing);
    if (!extra.empty()) msg += "; numbers beyond the total: " + extra;
    problems.push_back(msg);
  }
  return problems;
}

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  // Top-level shards on disk (whatever their state), excluding Mistral's native consolidated files.
  std::vector<std::string> disk_shards, consolidated;
  for (const auto& f : ck.files) {
    if (f.rel.find('/') != std::string::npos || !ends_with(f.rel, ".safetensors")) continue;
    (is_consolidated(f.rel) ? consolidated : disk_shards).push_back(f.rel);
  }
  // Without safetensors, the PyTorch shards the loader read (pytorch_model-0000k-of-0000n.bin) are the shards.
  const bool pytorch = disk_shards.empty() && consolidated.empty();
  if (pytorch)
    for (const auto& sh : ck.shards)
      if (sh.format == Format::pytorch && starts_with(sh.file, "pytorch_model")) disk_shards.push_back(sh.file);
  bool mistral_native = ck.file("params.json") != nullptr;

  if (!ck.index) {
    if (disk_shards.size() > 1) {
      out.add("IX007", Severity::error,
              std::to_string(disk_shards.size()) + (pytorch ? " .bin files but no pytorch_model.bin.index.json: "
                                                            : " .safetensors files but no *.safetensors.index.json: ") +
                  list_names(disk_shards),
              "", "",
              "transformers and vLLM need the index to know which shard holds which tensor; a stray shard or a lost "
              "index. Restore model.safetensors.index.json or remove the extra files");
    }
    for (const auto& p : numbering_problems(disk_shards, "shard files"))
      out.add("IX009", Severity::error, p, "", "", "a shard is missing, or shards of two exports are mixed");
    return;
  }

  const ShardIndex& idx = *ck.index;
  const std::string& ixf = idx.json.file;
  if (idx.json.error) {
    const auto& e = *idx.json.error;
    out.add("IX010", Severity::error,
            e.line ? "invalid JSON at line " + std::to_string(e.line) + ", column " + std::to_string(e.column) + ": " + e.message
                   : e.message,
            ixf, "", "loaders cannot map tensors to shards; re-download or regenerate the index");
    return;
  }
  if (!idx.schema_error.empty()) {
    out.add("IX010", Severity::error, idx.schema_error, ixf, "",
            "an index is {\"metadata\": {\"total_size\": N}, \"weight_map\": {tensor: shard file}}");
    return;
  }
  for (const auto& d : idx.json.duplicates) {
    if (d.path != "/weight_map") continue;
    out.add("IX013", Severity::error, "tensor \"" + d.key + "\" is listed more than once in weight_map", ixf, d.key,
            "parsers keep different copies of a duplicated key; regenerate the index");
  }

  // What each distinct shard name in the index resolves to, by its position in idx.files
  // (the loader interns the names, so no string is compared per entry below).
  struct Target {
    bool safe = false;
    const FileEntry* file = nullptr;
    const Shard* shard = nullptr;
    uint32_t shard_pos = UINT32_MAX;
    size_t mapped = 0;
  };
  std::vector<Target> targets(idx.files.size());
  for (size_t f = 0; f < idx.files.size(); ++f) {
    Target& tg = targets[f];
    tg.safe = is_safe_relative_path(idx.files[f]);
    if (!tg.safe) continue;
    tg.file = ck.file(idx.files[f]);
    tg.shard = ck.shard(idx.files[f]);
    if (tg.shard) tg.shard_pos = static_cast<uint32_t>(tg.shard - ck.shards.data());
  }
  auto target = [&](size_t k) -> Target& { return targets[idx.file_of[k]]; };

  // Shards the index names, in first-mention order, with their tensor counts.
  std::vector<std::string> named;
  std::vector<char> unsafe_reported(idx.files.size(), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    const auto [tensor, file] = idx.entry(k);
    Target& tg = target(k);
    if (!tg.safe) {
      if (!unsafe_reported[idx.file_of[k]]++)
        out.add("IX008", Severity::error,
                "weight_map sends " + std::string(tensor) + " to \"" + std::string(file) + "\", a path outside the model directory; ckpt did not open it",
                ixf, tensor,
                "a malicious or broken index: loaders that join this path open files outside the model (transformers#47176)");
      continue;
    }
    if (tg.mapped++ == 0) named.emplace_back(file);
  }
  std::set<std::string> named_set(named.begin(), named.end());
  auto mapped_count = [&](std::string_view file) -> size_t {
    for (size_t f = 0; f < idx.files.size(); ++f)
      if (idx.files[f] == file) return targets[f].mapped;
    return 0;
  };

  for (const auto& file : named) {
    const FileEntry* fe = ck.file(file);
    if (!fe) {
      out.add("IX001", Severity::error,
              "index maps " + std::to_string(mapped_count(file)) + " tensor(s) to " + file + ", which is not on disk", ixf, "",
              "an incomplete download (check --include patterns) or a stale index from another export");
    }
  }
  // Naming schemes: within the index, within the disk, and between them.
  for (const auto& p : numbering_problems(named, "index shard names"))
    out.add("IX009", Severity::error, p, ixf, "", "the index was edited or merged from two exports");
  for (const auto& p : numbering_problems(disk_shards, "shard files on disk"))
    out.add("IX009", Severity::error, p, "", "", "a shard is missing, or files of two exports are mixed");
  {
    std::set<std::string> idx_totals, disk_totals;
    for (const auto& n : named)
      if (auto s = parse_shard_name(n)) idx_totals.insert(s->total_text);
    for (const auto& n : disk_shards)
      if (auto s = parse_shard_name(n)) disk_totals.insert(s->total_text);
    bool any_named_missing = false;
    for (const auto& n : named) any_named_missing |= ck.file(n) == nullptr;
    if (any_named_missing && !disk_shards.empty() && idx_totals != disk_totals) {
      auto describe = [](const std::set<std::string>& t, const std::vector<std::string>& names) {
        if (t.empty()) return "unnumbered names (" + list_names(names, 3) + ")";
        std::string s;
        for (const auto& v : t) s += (s.empty() ? "'-of-" : ", '-of-") + v + "'";
        return s + " names";
      };
      out.add("IX009", Severity::error,
              "the index uses " + describe(idx_totals, named) + " but the files on disk use " + describe(disk_totals, disk_shards),
              ixf, "", "the index belongs to a different export than the shards (a stale index, mlx-swift-lm #554)");
    }
  }

  if (!consolidated.empty()) {
    out.add("IX012", mistral_native ? Severity::warning : Severity::error,
            list_names(consolidated) + " sit beside the indexed shards" +
                std::string(mistral_native ? " (Mistral-native format, with params.json)" : " without params.json"),
            consolidated[0], "",
            "index-driven loaders (transformers, vLLM) ignore them; loaders that glob *.safetensors load both copies. "
            "Download only one format if your loader globs");
  }

  // Tensor placement: every indexed tensor in exactly its mapped shard.
  size_t n_dup = 0, n_wrong = 0, n_absent = 0;
  constexpr size_t kMax = 20;
  // Bytes of every indexed tensor as stored in its mapped shard, for total_size below.
  uint64_t indexed_bytes = 0, weight_format_bytes = 0;
  bool all_indexed_found = true;
  // listed[shard][entry]: the index names this tensor (whichever shard it maps it to).
  std::vector<std::vector<char>> listed(ck.shards.size());
  for (size_t i = 0; i < ck.shards.size(); ++i) listed[i].assign(ck.shards[i].header.tensors.size(), 0);
  const auto& positions = ck.index_positions();
  const bool resolved = positions.size() == idx.size();
  for (size_t k = 0; k < idx.size(); ++k) {
    const auto [tensor, file] = idx.entry(k);
    const uint32_t pos = resolved ? positions[k] : ck.tensors_by_name.position(tensor);
    const bool found = pos != NameIndex::npos;
    const TensorTable::Locations locs = found ? ck.tensors_by_name.locations(pos) : TensorTable::Locations();
    for (const auto& loc : locs) listed[loc.shard][loc.entry] = 1;
    const Target& tg = target(k);
    if (!tg.safe || !tg.file) {
      all_indexed_found = false;
      continue;
    }
    std::vector<std::string> holders;
    bool in_mapped = false;
    for (const auto& loc : locs) {
      const bool is_mapped = loc.shard == tg.shard_pos;
      if (locs.size() > 1 || !is_mapped) holders.push_back(ck.shards[loc.shard].file);
      if (is_mapped && !in_mapped) {
        in_mapped = true;
        const st::TensorEntry& e = ck.entry(loc);
        if (e.end < e.begin) all_indexed_found = false;
        else {
          indexed_bytes += e.end - e.begin;
          if (tensor.size() >= 14 && io::equals_literal(tensor.substr(tensor.size() - 14), ".weight_format"))
            weight_format_bytes += e.end - e.begin;
        }
      }
    }
    if (!in_mapped) all_indexed_found = false;
    const Shard* mapped_shard = tg.shard;
    if (holders.size() > 1) {
      if (++n_dup <= kMax)
        out.add("IX003", Severity::error,
                "tensor is stored in " + std::to_string(holders.size()) + " shards (" + list_names(holders) +
                    "); the index maps it to " + std::string(file),
                std::string_view(in_mapped ? holders[0] == file ? holders[1] : holders[0] : holders[0]), tensor,
                "a superseded copy was left in another shard (#144): vLLM reads every key of every shard and fails "
                "or loads the wrong copy. Remove the stale copy");
    } else if (found && !in_mapped) {
      if (++n_wrong <= kMax)
        out.add("IX004", Severity::error, "index maps the tensor to " + std::string(file) + " but it is stored in " + holders[0], file,
                tensor, "the index and the shards come from different exports; loaders look in the wrong file");
    } else if (!found && mapped_shard && mapped_shard->header.parsed) {
      if (++n_absent <= kMax)
        out.add("IX005", Severity::error, "index maps the tensor to " + std::string(file) + " but no shard holds it", file, tensor,
                "a stale index or an incomplete export: the loader fails with a missing key");
    }
  }
  auto overflow = [&](const char* code, size_t n, const char* what) {
    if (n > kMax)
      out.add(code, Severity::error, std::to_string(n - kMax) + " more " + what + " not listed", ixf, "", "");
  };
  overflow("IX003", n_dup, "tensors stored in several shards");
  overflow("IX004", n_wrong, "tensors in the wrong shard");
  overflow("IX005", n_absent, "indexed tensors missing from their shards");

  // Stray shards: on disk, not named by the index.
  for (const auto& file : disk_shards) {
    if (named_set.count(file)) continue;
    const Shard* sh = ck.shard(file);
    std::vector<std::string> collide;
    size_t n = 0;
    if (sh) {
      n = sh->header.tensors.size();
      const auto& flags = listed[static_cast<size_t>(sh - ck.shards.data())];
      for (size_t i = 0; i < n; ++i)
        if (flags[i]) collide.emplace_back(sh->header.tensors[i].name);
    }
    std::string msg = file + " is not named by the index" +
                      (sh ? " (" + std::to_string(n) + " tensor(s)" +
                                (collide.empty() ? ", none of them indexed)"
                                                 : "; " + std::to_string(collide.size()) +
                                                       " collide with indexed tensors: " + list_names(collide) + ")")
                          : std::string());
    out.add("IX002", Severity::error, msg, file, collide.size() == 1 ? collide[0] : std::string(),
            collide.empty() ? "loaders that glob *.safetensors (mlx-swift-lm) load it and fail on its unknown tensors; "
                              "remove it or add it to the index"
                            : "a leftover from an earlier export: loaders that read every file see two versions of "
                              "the same tensor. Remove it");
  }
  // Tensors in indexed shards that the index does not list.
  size_t n_unlisted = 0;
  for (const auto& file : named) {
    const Shard* sh = ck.shard(file);
    if (!sh) continue;
    std::vector<std::string> unlisted;
    const auto& flags = listed[static_cast<size_t>(sh - ck.shards.data())];
    for (size_t i = 0; i < sh->header.tensors.size(); ++i)
      if (!flags[i]) unlisted.emplace_back(sh->header.tensors[i].name);
    if (unlisted.empty()) continue;
    n_unlisted += unlisted.size();
    out.add("IX011", Severity::error,
            std::to_string(unlisted.size()) + " tensor(s) in this shard are not in the index: " + list_names(unlisted), file,
            unlisted.size() == 1 ? unlisted[0] : std::string(),
            "loaders that read whole shards (vLLM) see keys the index hides; a stale tensor left by an edit. Remove "
            "them or add them to the index");
  }

  // total_size: bytes of every indexed tensor, as stored.
  if (idx.total_size) {
    const uint64_t sum = indexed_bytes;
    const bool complete = all_indexed_found;
    uint64_t declared = *idx.total_size;
    if (complete && declared != sum) {
      if (weight_format_bytes && declared + weight_format_bytes == sum) {
        // bitsandbytes int8 exports leave their one-byte weight_format tensors out of total_size.
      } else {
        uint64_t diff = declared > sum ? declared - sum : sum - declared;
        out.add("IX006", Severity::error,
                "metadata.total_size is " + std::to_string(declared) + " but the indexed tensors hold " +
                    std::to_string(sum) + " bytes (" + (declared > sum ? "over" : "under") + " by " + bytes_str(diff) + ")",
                ixf, "",
                declared == 0 ? "the index was written by hand or by a tool that does not fill total_size; regenerate it"
                              : "a stale index from another export, or shards replaced after the index was written");
      }
    }
  }
}

}  // namespace

const FamilyDef kIndexFamily{"IX", kCodes, run};

}  // namespace ckpt::checks
