// GG: GGUF structure as ggml's gguf.cpp reads it (plus the overflow and truncation gaps it
// misses), the metadata values llama.cpp's loader rejects or aborts on, and split sets
// (`PREFIX-0000k-of-0000n.gguf`) as llama_model_loader assembles them (specs/gguf.md §1, §3, §6).
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>

#include "checks/family.h"
#include "ckpt/gguf_arch.h"
#include "model/gguf_load.h"

namespace ckpt::checks {

namespace {

using gguf::Rule;
using gguf::ValueType;

// The 1-based shard number a split file's name carries (0 when not named as a split).
uint32_t gguf_name_number(const std::string& file) {
  const auto s = gguf_load::parse_split_name(file);
  return s ? s->no : 0;
}

constexpr std::array<CheckInfo, 40> kCodes{{
    {"GG001", Severity::error, "GGUF file could not be read"},
    {"GG002", Severity::error, "file ends inside the GGUF header"},
    {"GG003", Severity::error, "not a GGUF file (bad magic)"},
    {"GG004", Severity::error, "big-endian (byte-swapped) GGUF"},
    {"GG005", Severity::error, "unsupported GGUF version"},
    {"GG006", Severity::error, "tensor or key/value count out of range"},
    {"GG007", Severity::error, "metadata or tensor infos run past the end of the file"},
    {"GG008", Severity::error, "empty metadata key"},
    {"GG009", Severity::error, "duplicate metadata key"},
    {"GG010", Severity::error, "invalid metadata value type (or a nested array)"},
    {"GG011", Severity::error, "metadata array longer than the file or gguf.cpp's limit"},
    {"GG012", Severity::error, "general.alignment is not a u32"},
    {"GG013", Severity::error, "general.alignment is not a non-zero power of two"},
    {"GG014", Severity::error, "tensor name longer than 63 bytes"},
    {"GG015", Severity::error, "duplicate tensor name"},
    {"GG016", Severity::error, "tensor with more than 4 dimensions"},
    {"GG017", Severity::error, "negative tensor dimension"},
    {"GG018", Severity::error, "tensor element count overflows int64"},
    {"GG019", Severity::error, "tensor type id outside the ggml type table"},
    {"GG020", Severity::error, "tensor type removed from GGUF"},
    {"GG021", Severity::error, "tensor row not a multiple of its type's block size"},
    {"GG022", Severity::error, "tensor byte size overflows 64 bits"},
    {"GG023", Severity::error, "tensor offset differs from the running padded sum"},
    {"GG024", Severity::error, "data section starts past the end of the file"},
    {"GG025", Severity::error, "file truncated: tensor data past the end of the file"},
    {"GG026", Severity::warning, "final padding of the data section missing"},
    {"GG027", Severity::info, "bytes after the data section"},
    {"GG028", Severity::warning, "bool value other than 0 or 1"},
    {"GG029", Severity::error, "metadata larger than ckpt reads"},
    {"GG030", Severity::error, "general.architecture missing or not a string"},
    {"GG031", Severity::error, "metadata key stored with a type llama.cpp refuses"},
    {"GG032", Severity::error, "hyperparameter value llama.cpp aborts on"},
    {"GG033", Severity::error, "per-layer array length differs from block_count"},
    {"GG034", Severity::error, "required hyperparameter missing"},
    {"GG035", Severity::error, "general.file_type declares a quantization no weight tensor has"},
    {"GG036", Severity::warning, "general.file_type value unknown"},
    {"GG040", Severity::error, "split file missing"},
    {"GG041", Severity::error, "split metadata inconsistent with the split files"},
    {"GG042", Severity::error, "tensor stored in more than one split file"},
    {"GG043", Severity::error, "split.tensors.count differs from the tensors found"},
}};

const char* code_for(Rule r) {
  switch (r) {
    case Rule::ReadFailed: return "GG001";
    case Rule::TruncatedHeader: return "GG002";
    case Rule::BadMagic: return "GG003";
    case Rule::ByteSwapped: return "GG004";
    case Rule::UnsupportedVersion: return "GG005";
    case Rule::CountOutOfRange: return "GG006";
    case Rule::Truncated: return "GG007";
    case Rule::EmptyKey: return "GG008";
    case Rule::DuplicateKey: return "GG009";
    case Rule::InvalidValueType: return "GG010";
    case Rule::ArrayTooLong: return "GG011";
    case Rule::AlignmentType: return "GG012";
    case Rule::AlignmentInvalid: return "GG013";
    case Rule::NameTooLong: return "GG014";
    case Rule::DuplicateTensor: return "GG015";
    case Rule::TooManyDims: return "GG016";
    case Rule::NegativeDim: return "GG017";
    case Rule::ElementsOverflow: return "GG018";
    case Rule::InvalidTensorType: return "GG019";
    case Rule::RemovedTensorType: return "GG020";
    case Rule::RowNotBlockMultiple: return "GG021";
    case Rule::SizeOverflow: return "GG022";
    case Rule::OffsetMismatch: return "GG023";
    case Rule::DataPastEof: return "GG024";
    case Rule::TensorDataTruncated: return "GG025";
    case Rule::PaddingMissing: return "GG026";
    case Rule::TrailingBytes: return "GG027";
    case Rule::BoolNotZeroOne: return "GG028";
    case Rule::HeaderTooLarge: return "GG029";
    case Rule::Count_: break;
  }
  return "GG001";
}
static_assert(static_cast<int>(Rule::Count_) == 29, "map every reader rule to a code");

Severity severity_for(Rule r) {
  if (r == Rule::TrailingBytes) return Severity::info;
  if (r == Rule::PaddingMissing || r == Rule::BoolNotZeroOne) return Severity::warning;
  return Severity::error;
}

const char* hint_for(Rule r) {
  switch (r) {
    case Rule::ReadFailed: return "check permissions and the disk";
    case Rule::TruncatedHeader:
    case Rule::Truncated:
    case Rule::TensorDataTruncated:
      return "an interrupted download or copy (or a raw byte chunk such as *.gguf.part1of2); re-download the file";
    case Rule::BadMagic: return "not a GGUF file (an HTML error page, a raw chunk, or another format)";
    case Rule::ByteSwapped: return "convert it with gguf-py's gguf_convert_endian.py, or use the little-endian upload";
    case Rule::UnsupportedVersion: return "re-convert with a current llama.cpp (convert_hf_to_gguf.py writes version 3)";
    case Rule::PaddingMissing:
      return "llama.cpp's mmap loader does not need the last tensor's padding, but gguf.cpp's full read (no_alloc=false) fails; a writer that skips it is non-conforming";
    case Rule::TrailingBytes: return "not read by any loader; bytes appended after the model can carry a payload";
    case Rule::BoolNotZeroOne: return "gguf.cpp reads any non-zero byte as true; other readers may reject the file";
    case Rule::HeaderTooLarge: return "real GGUF headers are tens of MB; this file is corrupt or hostile";
    case Rule::RowNotBlockMultiple:
      return "a quantizer wrote a block type that does not fit the row; re-quantize (llama-quantize falls back to a type that fits)";
    case Rule::RemovedTensorType:
      return "Q4_0_4_4/Q4_0_4_8/Q4_0_8_8 and IQ4_NL_x_y were removed (llama.cpp PR #10446): use Q4_0/IQ4_NL, which are repacked at load";
    case Rule::InvalidTensorType:
      return "a type id from a fork (ik_llama.cpp, a BitNet fork) or a newer ggml; mainline llama.cpp refuses it";
    default: return "the file is corrupt or hostile: gguf.cpp refuses it (or, for overflows, misreads it); do not load it";
  }
}

constexpr size_t kMaxPerCode = 10;  // per file

void check_file(const Shard& sh, FindingSink& out) {
  std::map<std::string, size_t> emitted;
  for (const auto& p : sh.gguf->problems) {
    const char* code = code_for(p.rule);
    if (++emitted[code] > kMaxPerCode) continue;
    std::string msg = p.detail;
    if (p.offset) msg += " (byte " + std::to_string(p.offset) + ")";
    out.add(code, severity_for(p.rule), std::move(msg), sh.file, p.tensor, hint_for(p.rule));
  }
  for (const auto& [code, n] : emitted)
    if (n > kMaxPerCode)
      out.add(code, Severity::error, std::to_string(n - kMaxPerCode) + " more " + code + " problems in this file", sh.file);
}

// ---- hyperparameters (specs/gguf.md §3.1, §3.3, §3.4) -------------------------

enum class Want { U32, F32, String, Bool, U32OrArray };

struct KeyRule {
  std::string_view suffix;  // after "{arch}."
  Want want;
};

// The {arch}.* keys llama_model_base::load_hparams reads for every architecture, with the
// exact type get_key demands (no widening).
constexpr KeyRule kBaseKeys[] = {
    {"context_length", Want::U32},
    {"embedding_length", Want::U32},
    {"block_count", Want::U32},
    {"feed_forward_length", Want::U32OrArray},
    {"attention.head_count", Want::U32OrArray},
    {"attention.head_count_kv", Want::U32OrArray},
    {"attention.key_length", Want::U32},
    {"attention.value_length", Want::U32},
    {"rope.dimension_count", Want::U32},
    {"rope.freq_base", Want::F32},
    {"rope.scaling.type", Want::String},
    {"rope.scaling.factor", Want::F32},
    {"rope.scaling.original_context_length", Want::U32},
    {"rope.scaling.finetuned", Want::Bool},
    {"expert_count", Want::U32},
    {"expert_used_count", Want::U32},
};

// Keys the modelled architectures' own loaders read (src/models/<arch>.cpp); other
// architectures may give these names other meanings, so they are judged only for these.
constexpr KeyRule kModelledArchKeys[] = {
    {"attention.key_length_mla", Want::U32},
    {"attention.value_length_mla", Want::U32},
    {"attention.q_lora_rank", Want::U32},
    {"attention.kv_lora_rank", Want::U32},
    {"attention.sliding_window", Want::U32},
    {"attention.layer_norm_rms_epsilon", Want::F32},
    {"rope.freq_base_swa", Want::F32},
    {"expert_feed_forward_length", Want::U32},
    {"expert_shared_count", Want::U32},
    {"leading_dense_block_count", Want::U32},
    {"nextn_predict_layers", Want::U32},
    {"vocab_size", Want::U32},
    {"attn_logit_softcapping", Want::F32},
    {"final_logit_softcapping", Want::F32},
    {"expert_weights_scale", Want::F32},
    {"expert_weights_norm", Want::Bool},
};

bool type_ok(const gguf::Value& v, Want w) {
  switch (w) {
    case Want::U32: return v.type == ValueType::U32;
    case Want::F32: return v.type == ValueType::F32;
    case Want::String: return v.type == ValueType::STRING;
    case Want::Bool: return v.type == ValueType::BOOL;
    case Want::U32OrArray:
      return v.type == ValueType::U32 || (v.is_array() && (v.elem == ValueType::U32 || v.elem == ValueType::I32));
  }
  return false;
}

std::string_view want_text(Want w) {
  switch (w) {
    case Want::U32: return "u32";
    case Want::F32: return "f32";
    case Want::String: return "string";
    case Want::Bool: return "bool";
    case Want::U32OrArray: return "u32 (or an i32/u32 array, one per layer)";
  }
  return "";
}

void check_hparams(const Shard& sh, FindingSink& out) {
  const gguf::File& g = *sh.gguf;
  const gguf::KeyValue* arch_kv = g.find("general.architecture");
  if (!arch_kv || arch_kv->value.type != ValueType::STRING || arch_kv->value.str.empty()) {
    // Without any model key the file is a GGUF container of something else (an imatrix, a
    // control vector, a test vector): valid GGUF, only not a model llama.cpp can load.
    const bool model_like = arch_kv || std::any_of(g.kvs.begin(), g.kvs.end(), [](const gguf::KeyValue& kv) {
                              return kv.key.rfind("tokenizer.", 0) == 0 || kv.key.ends_with(".block_count");
                            });
    out.add("GG030", model_like ? Severity::error : Severity::warning,
            !arch_kv ? std::string("general.architecture is missing")
                     : "general.architecture is " + (arch_kv->value.type == ValueType::STRING ? std::string("empty") : "a " + arch_kv->value.type_text()),
            sh.file, "",
            model_like ? "llama.cpp throws \"unknown model architecture\"; the converter writes it as a string (e.g. \"llama\")"
                       : "the file has no model metadata at all: fine for GGUF data files, but llama.cpp cannot load it as a model");
    return;
  }
  const std::string arch(arch_kv->value.str);
  const std::string prefix = arch + ".";
  auto key = [&](std::string_view suffix) { return prefix + std::string(suffix); };
  auto check_types = [&](std::span<const KeyRule> rules) {
    for (const auto& rule : rules) {
      const gguf::KeyValue* kv = g.find(key(rule.suffix));
      if (kv && !type_ok(kv->value, rule.want))
        out.add("GG031", Severity::error,
                key(rule.suffix) + " is stored as " + kv->value.type_text() + "; llama.cpp reads it as " + std::string(want_text(rule.want)),
                sh.file, "",
                "llama.cpp's get_key demands the exact type (\"key has wrong type\"), even for optional keys; rewrite the key with the expected type");
    }
  };
  // Projectors (clip/mmproj) and adapters are not loaded as language models: their keys are
  // not llama_model_base's.
  const auto type = g.get_string("general.type");
  const bool language_model = arch != "clip" && !(type && (*type == "mmproj" || *type == "adapter" || *type == "imatrix"));
  if (language_model) check_types(kBaseKeys);
  if (gguf_arch::is_modelled(arch)) check_types(kModelledArchKeys);
  struct Fixed {
    std::string_view key;
    ValueType type;
  };
  static constexpr Fixed kFixed[] = {{"general.file_type", ValueType::U32}, {"general.quantization_version", ValueType::U32},
                                     {"split.no", ValueType::U16},        {"split.count", ValueType::U16},
                                     {"split.tensors.count", ValueType::I32}};
  for (const auto& f : kFixed)
    if (const auto* kv = g.find(f.key); kv && kv->value.type != f.type)
      out.add("GG031", Severity::error,
              std::string(f.key) + " is stored as " + kv->value.type_text() + ", expected " + std::string(gguf::value_type_name(f.type)),
              sh.file, "", "llama.cpp and gguf-split write and read this key with that exact type");

  if (!language_model) return;
  for (std::string_view req : {"context_length", "embedding_length", "block_count"})
    if (!g.find(key(req)))
      out.add("GG034", Severity::error, key(req) + " is missing", sh.file, "",
              "llama.cpp requires it for every architecture (\"key not found in model\"); re-convert the model");

  auto u32 = [&](std::string_view suffix) -> std::optional<uint64_t> {
    const auto* kv = g.find(key(suffix));
    if (!kv || kv->value.type != ValueType::U32) return std::nullopt;
    return kv->value.bits;
  };
  const auto layers = u32("block_count");
  if (layers && (*layers == 0 || *layers > 512))
    out.add("GG032", Severity::error, key("block_count") + " is " + std::to_string(*layers) + ", expected 1..512", sh.file, "",
            "llama.cpp aborts (GGML_ASSERT, LLAMA_MAX_LAYERS = 512) instead of reporting an error");
  const auto experts = u32("expert_count"), used = u32("expert_used_count");
  if (experts && *experts > 1024)
    out.add("GG032", Severity::error, key("expert_count") + " is " + std::to_string(*experts) + ", above LLAMA_MAX_EXPERTS 1024",
            sh.file, "", "llama.cpp aborts (GGML_ASSERT)");
  const uint64_t x = experts.value_or(0), u = used.value_or(0);
  if (u > x)
    out.add("GG032", Severity::error,
            key("expert_used_count") + " is " + std::to_string(u) + ", more than " + key("expert_count") + " " + std::to_string(x),
            sh.file, "", "llama.cpp aborts (GGML_ASSERT n_expert_used <= n_expert)");
  else if (x > 0 && u == 0)
    out.add("GG032", Severity::error, key("expert_count") + " is " + std::to_string(x) + " but " + key("expert_used_count") + " is 0 or absent",
            sh.file, "", "llama.cpp aborts (GGML_ASSERT n_expert_used > 0 when n_expert > 0)");
  if (const auto* kv = g.find(key("rope.scaling.type")); kv && kv->value.type == ValueType::STRING) {
    const std::string_view t = kv->value.str;
    if (t != "none" && t != "linear" && t != "yarn" && t != "longrope")
      out.add("GG032", Severity::error, key("rope.scaling.type") + " is \"" + std::string(t) + "\", expected none, linear, yarn or longrope",
              sh.file, "", "llama.cpp aborts (GGML_ASSERT rope_scaling_type_train != UNSPECIFIED)");
  }
  if (layers)
    for (std::string_view per_layer : {"feed_forward_length", "attention.head_count", "attention.head_count_kv"})
      if (const auto* kv = g.find(key(per_layer)); kv && kv->value.is_array() && kv->value.count != *layers)
        out.add("GG033", Severity::error,
                key(per_layer) + " has " + std::to_string(kv->value.count) + " entries but block_count is " + std::to_string(*layers),
                sh.file, "", "llama.cpp's get_key_or_arr demands exactly one entry per layer (\"key has wrong array length\")");
}

// ---- split sets (specs/gguf.md §6) ----------------------------------------------

std::optional<uint64_t> split_key(const gguf::File& g, std::string_view k) {
  const auto* kv = g.find(k);
  if (!kv) return std::nullopt;
  if (auto v = kv->value.as_uint()) return v;
  return std::nullopt;
}

void check_split(const Checkpoint& ck, const GgufModel& m, FindingSink& out) {
  const Shard* first = m.first(ck.gguf_shards);
  for (const auto& name : m.missing)
    out.add("GG040", Severity::error,
            "split file " + name + " is missing (" + std::to_string(m.missing.size()) + " of " + std::to_string(m.split_count) +
                " absent)",
            name, "", "llama.cpp fails \"failed to load GGUF split\"; download every shard of the set");
  if (m.split_count == 0) {  // a file not named as a split
    if (first && first->gguf->metadata_ok) {
      const auto count = split_key(*first->gguf, "split.count");
      if (count && *count > 1)
        out.add("GG041", Severity::error,
                "split.count is " + std::to_string(*count) + " but the file is not named PREFIX-0000k-of-0000n.gguf", first->file, "",
                "llama.cpp then hunts for shards and fails \"invalid split file\" (a requantized or cat-joined split, llama.cpp#6548, #9613); "
                "remove the split.* keys or restore the shard names");
    }
    return;
  }
  uint64_t found = 0;
  std::optional<uint64_t> declared_total;
  std::unordered_map<std::string_view, const Shard*> holder;
  size_t dup_reported = 0;
  for (size_t pos = 0; pos < m.shards.size(); ++pos) {
    const Shard& sh = ck.gguf_shards[m.shards[pos]];
    if (!sh.gguf->metadata_ok) continue;  // its structure findings say why
    const gguf::File& g = *sh.gguf;
    const auto name = gguf_name_number(sh.file);
    const auto count = split_key(g, "split.count");
    const auto no = split_key(g, "split.no");
    const auto total = split_key(g, "split.tensors.count");
    if (m.split_count > 1) {
      if (!count || *count != m.split_count)
        out.add("GG041", Severity::error,
                (count ? "split.count is " + std::to_string(*count) : std::string("split.count is missing")) + ", but the name says " +
                    std::to_string(m.split_count) + " files",
                sh.file, "", "the shards do not belong to one gguf-split run; re-download the set");
      if (!no || *no + 1 != name)
        out.add("GG041", Severity::error,
                (no ? "split.no is " + std::to_string(*no) : std::string("split.no is missing")) + ", but the file is shard " +
                    std::to_string(name) + " (split.no " + std::to_string(name - 1) + ")",
                sh.file, "", "llama.cpp fails \"invalid split file idx\"; a renamed or mixed-up shard");
    }
    if (total) {
      if (declared_total && *declared_total != *total)
        out.add("GG041", Severity::error,
                "split.tensors.count is " + std::to_string(*total) + " here but " + std::to_string(*declared_total) + " in the first shard",
                sh.file, "", "the shards come from different gguf-split runs");
      if (!declared_total) declared_total = total;
    }
    if (g.parsed) {
      found += g.tensors.size();
      for (const auto& t : g.tensors) {
        auto [it, fresh] = holder.emplace(t.name, &sh);
        if (!fresh && ++dup_reported <= kMaxPerCode)
          out.add("GG042", Severity::error, "tensor '" + std::string(t.name) + "' is stored in " + it->second->file + " and again here",
                  sh.file, t.name, "llama.cpp fails \"tensor is duplicated\"; a shard from another split run or a repeated shard");
      }
    }
  }
  const bool all_parsed = m.missing.empty() && std::all_of(m.shards.begin(), m.shards.end(), [&](uint32_t i) { return ck.gguf_shards[i].gguf->parsed; });
  if (m.split_count > 1 && first && first->gguf->metadata_ok && !declared_total)
    out.add("GG043", Severity::error, "split.tensors.count is missing", first->file, "",
            "llama.cpp requires it for a split model (int32, the total over every shard)");
  else if (declared_total && all_parsed && *declared_total != found)
    out.add("GG043", Severity::error,
            "split.tensors.count is " + std::to_string(*declared_total) + " but the " + std::to_string(m.shards.size()) + " shards hold " +
                std::to_string(found) + " tensors",
            first ? first->file : m.name, "", "llama.cpp fails \"corrupted model: N tensors expected but M found\"");
}

// ---- declared vs stored quantization (GG035, GG036) -------------------------------------
// general.file_type is llama_ftype, "the type of the majority of the tensors" (specs/gguf.md
// §3.2). llama-quantize mixes types inside one file (Q4_K_M keeps attn_v/ffn_down at Q6_K,
// output and token_embd differ, a row that does not divide the block falls back: Q4_K → Q5_0,
// Q5_K → Q5_1, Q6_K → Q8_0, Q2_K/Q3_K → Q4_0, IQ* → IQ4_NL, then F16), so a mix is no defect.
// What is one is a declaration that no weight matrix follows at all (int8 declared over
// int4-packed tensors): a reader of the declaration alone is wrong about every tensor.
struct FtypeInfo {
  uint32_t id;
  std::string_view name;
  std::string_view types;  // the ggml types the declaration's weight matrices are stored in, with fallbacks
};
constexpr std::string_view kIqTypes = "iq1_s iq1_m iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq4_nl iq4_xs";
constexpr FtypeInfo kFtypes[] = {
    {0, "ALL_F32", "f32"},
    {1, "MOSTLY_F16", "f16"},
    {2, "MOSTLY_Q4_0", "q4_0"},
    {3, "MOSTLY_Q4_1", "q4_1"},
    {7, "MOSTLY_Q8_0", "q8_0"},
    {8, "MOSTLY_Q5_0", "q5_0"},
    {9, "MOSTLY_Q5_1", "q5_1"},
    {10, "MOSTLY_Q2_K", "q2_k q4_0"},
    {11, "MOSTLY_Q3_K_S", "q3_k q4_0"},
    {12, "MOSTLY_Q3_K_M", "q3_k q4_0"},
    {13, "MOSTLY_Q3_K_L", "q3_k q4_0"},
    {14, "MOSTLY_Q4_K_S", "q4_k q5_0"},
    {15, "MOSTLY_Q4_K_M", "q4_k q5_0"},
    {16, "MOSTLY_Q5_K_S", "q5_k q5_1"},
    {17, "MOSTLY_Q5_K_M", "q5_k q5_1"},
    {18, "MOSTLY_Q6_K", "q6_k q8_0"},
    {19, "MOSTLY_IQ2_XXS", kIqTypes},
    {20, "MOSTLY_IQ2_XS", kIqTypes},
    {21, "MOSTLY_Q2_K_S", "q2_k q4_0"},
    {22, "MOSTLY_IQ3_XS", kIqTypes},
    {23, "MOSTLY_IQ3_XXS", kIqTypes},
    {24, "MOSTLY_IQ1_S", kIqTypes},
    {25, "MOSTLY_IQ4_NL", kIqTypes},
    {26, "MOSTLY_IQ3_S", kIqTypes},
    {27, "MOSTLY_IQ3_M", kIqTypes},
    {28, "MOSTLY_IQ2_S", kIqTypes},
    {29, "MOSTLY_IQ2_M", kIqTypes},
    {30, "MOSTLY_IQ4_XS", kIqTypes},
    {31, "MOSTLY_IQ1_M", kIqTypes},
    {32, "MOSTLY_BF16", "bf16"},
    {33, "MOSTLY_Q4_0_4_4 (removed)", "q4_0"},  // repacked at load time since their removal; stored as Q4_0
    {34, "MOSTLY_Q4_0_4_8 (removed)", "q4_0"},
    {35, "MOSTLY_Q4_0_8_8 (removed)", "q4_0"},
    {36, "MOSTLY_TQ1_0", "tq1_0 q4_0"},
    {37, "MOSTLY_TQ2_0", "tq2_0 q4_0"},
    {38, "MOSTLY_MXFP4_MOE", "mxfp4"},
    {39, "MOSTLY_NVFP4", "nvfp4"},
    {40, "MOSTLY_Q1_0", "q1_0"},
    {41, "MOSTLY_Q2_0", "q2_0 q4_0"},
};
constexpr uint32_t kFtypeGuessed = 1024;  // LLAMA_FTYPE_GUESSED: set by llama.cpp when it guessed

bool type_listed(std::string_view list, int32_t type) {
  const auto* info = gguf::ggml_type(type);
  if (!info) return false;
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t end = std::min(list.find(' ', pos), list.size());
    if (list.substr(pos, end - pos) == info->name) return true;
    pos = end + 1;
  }
  return false;
}

// The weight matrices the declaration speaks for: 2-D and larger, not the embedding or the
// output head (llama-quantize gives those their own types), and only those whose rows the
// declared type can hold (the rest fall back by rule).
bool judged_weight(const gguf::TensorInfo& t) {
  if (t.n_dims < 2) return false;
  const std::string_view n = t.name;
  if (n.size() < 7 || n.substr(n.size() - 7) != ".weight") return false;
  return n != "token_embd.weight" && n != "output.weight" && n.find("token_types") == std::string_view::npos &&
         n.find("position_embd") == std::string_view::npos;
}

void check_file_type(const Checkpoint& ck, const GgufModel& m, FindingSink& out) {
  const Shard* first = m.first(ck.gguf_shards);
  if (!first || !first->gguf->metadata_ok) return;
  const auto* kv = first->gguf->find("general.file_type");
  if (!kv || kv->value.type != ValueType::U32) return;  // absent is allowed; a wrong type is GG031
  const uint32_t raw = static_cast<uint32_t>(kv->value.bits);
  const uint32_t id = raw & ~kFtypeGuessed;
  const FtypeInfo* ft = nullptr;
  for (const auto& f : kFtypes)
    if (f.id == id) ft = &f;
  if (!ft) {
    out.add("GG036", Severity::warning,
            "general.file_type is " + std::to_string(raw) + ", not a llama_ftype ckpt knows (0-41 at " + std::string(gguf::kTypeTableRevision) +
                "): the declared quantization is not compared with the tensors",
            first->file, "", "a fork's own file type (ik_llama.cpp writes ids such as 148), or a corrupt header; llama.cpp prints it as unknown");
    return;
  }
  std::map<std::string, uint64_t> observed;  // type name -> judged tensors
  uint64_t judged = 0, matching = 0;
  const gguf::TensorInfo* example = nullptr;
  const Shard* example_shard = nullptr;
  // The declared base type's block: a row it cannot divide is stored in a fallback type.
  const auto base = gguf::ggml_type_from_name(ft->types.substr(0, ft->types.find(' ')));
  for (uint32_t i : m.shards) {
    const Shard& sh = ck.gguf_shards[i];
    if (!sh.gguf || !sh.gguf->parsed) return;  // structure errors first; judge only whole tables
    for (const auto& t : sh.gguf->tensors) {
      if (!judged_weight(t)) continue;
      if (base && t.ne[0] > 0 && !gguf::row_bytes(*base, static_cast<uint64_t>(t.ne[0]))) continue;
      const auto* info = gguf::ggml_type(t.type);
      if (!info) continue;
      ++judged;
      ++observed[std::string(info->name)];
      if (type_listed(ft->types, t.type)) ++matching;
      else if (!example) {
        example = &t;
        example_shard = &sh;
      }
    }
  }
  if (judged == 0 || matching > 0) return;
  std::vector<std::pair<uint64_t, std::string>> by_count;
  for (const auto& [name, n] : observed) by_count.push_back({n, name});
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::string seen;
  for (const auto& [n, name] : by_count) seen += (seen.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  std::string expected;
  for (char c : ft->types) expected += c == ' ' ? std::string("/") : std::string(1, c);
  out.add("GG035", Severity::error,
          "general.file_type declares " + std::string(ft->name) + " (" + std::to_string(raw) + ": weight matrices in " + expected +
              ") but none of the " + std::to_string(judged) + " weight matrices is: they are " + seen + " (e.g. " +
              std::string(example->name) + " is " + std::string(gguf::ggml_type(example->type)->name) + ")",
          example_shard->file, std::string(example->name),
          "the declaration describes a different file than the one on disk (a re-quantized file whose header was copied, or a "
          "tool that rewrote the metadata); tools that read only the declaration misreport size, speed and quality. Re-quantize, "
          "or set general.file_type to the type the tensors hold");
}

void run(const Checkpoint& ck, const VerifyOptions&, FindingSink& out) {
  for (const auto& sh : ck.gguf_shards) check_file(sh, out);
  for (const auto& m : ck.gguf_models) {
    const Shard* first = m.first(ck.gguf_shards);
    if (first && first->gguf->metadata_ok && (m.split_count <= 1 || gguf_name_number(first->file) == 1)) check_hparams(*first, out);
    check_split(ck, m, out);
    check_file_type(ck, m, out);
  }
}

}  // namespace

const FamilyDef kGgufFamily{"GG", kCodes, run};

}  // namespace ckpt::checks
