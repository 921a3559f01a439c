// HS for GGUF (`--deep`): NaN/Inf/all-zero scans of F32/F16/BF16/F64 tensors through the same
// data pass as safetensors (deep_scan.cpp), and the per-block scale check llama.cpp's
// --check-tensors does for quantized types: a block whose fp16 scale is NaN or Inf poisons
// every value it scales (specs/gguf.md §2.4).
#include <array>
#include <cstring>
#include <map>

#include "checks/deep_scan.h"
#include "checks/family.h"
#include "io/file.h"

namespace ckpt::checks {

namespace {

constexpr std::array<CheckInfo, 1> kCodes{{
    {"HS006", Severity::error, "quantized GGUF block scale is NaN or Inf"},
}};

constexpr uint64_t kMinZeroElements = 16;
constexpr size_t kMaxPerCode = 10;

std::optional<st::DType> float_dtype(int32_t type) {
  switch (type) {
    case 0: return st::DType::F32;
    case 1: return st::DType::F16;
    case 28: return st::DType::F64;
    case 30: return st::DType::BF16;
    default: return std::nullopt;
  }
}

struct ScaleField {
  uint32_t offset;
  uint8_t kind;  // 0 fp16, 1 f32, 2 e8m0 (0xFF is NaN)
};

// Scale fields per block (ggml-common.h layouts).
std::vector<ScaleField> scale_fields(int32_t type) {
  switch (type) {
    case 2: case 6: case 8: case 20: case 23: return {{0, 0}};     // q4_0 q5_0 q8_0 iq4_nl iq4_xs: d
    case 3: case 7: case 9: return {{0, 0}, {2, 0}};              // q4_1 q5_1 q8_1: d, m/s
    case 10: return {{80, 0}, {82, 0}};                           // q2_k: d, dmin after scales and qs
    case 11: return {{108, 0}};                                   // q3_k: d last
    case 12: case 13: return {{0, 0}, {2, 0}};                    // q4_k q5_k: d, dmin first
    case 14: return {{208, 0}};                                   // q6_k: d last
    case 15: return {{0, 1}};                                     // q8_k: f32 d
    case 16: case 17: case 18: case 21: case 22: case 34: case 35: return {{0, 0}};  // iq2_* iq3_* tq*_0: d first
    case 39: return {{0, 2}};                                     // mxfp4: e8m0 scale
    default: return {};
  }
}

bool bad_scale(const unsigned char* p, uint8_t kind) {
  if (kind == 0) return ((p[1] & 0x7c) == 0x7c);  // fp16 exponent all ones
  if (kind == 1) return ((p[3] & 0x7f) == 0x7f) && (p[2] & 0x80);  // f32 exponent all ones
  return p[0] == 0xFF;
}

std::string shape_text(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

void run(const Checkpoint& ck, const VerifyOptions& opts, FindingSink& out) {
  if (!opts.deep) return;
  // Float tensors: one job per file through the shared data pass.
  std::vector<deep::FileJob> jobs;
  std::vector<std::pair<const Shard*, std::vector<const gguf::TensorInfo*>>> owners;
  for (const auto& sh : ck.gguf_shards) {
    const gguf::File& g = *sh.gguf;
    if (!g.sizes_ok) continue;
    const FileEntry* fe = ck.file(sh.file);
    if (!fe || !fe->readable()) continue;
    deep::FileJob job;
    job.path = fe->abs;
    std::vector<const gguf::TensorInfo*> infos;
    for (const auto& t : g.tensors) {
      const auto dt = float_dtype(t.type);
      if (!dt || t.nbytes == 0 || g.data_start + t.offset + t.nbytes > g.file_size) continue;
      job.tensors.push_back({*dt, g.data_start + t.offset, t.nbytes});
      infos.push_back(&t);
    }
    if (job.tensors.empty()) continue;
    jobs.push_back(std::move(job));
    owners.push_back({&sh, std::move(infos)});
  }
  std::map<std::string, size_t> emitted;
  auto add = [&](const char* code, Severity sev, std::string msg, const std::string& file, std::string_view tensor, std::string hint) {
    if (++emitted[std::string(code) + file] > kMaxPerCode) return;
    out.add(code, sev, std::move(msg), file, tensor, std::move(hint));
  };
  if (!jobs.empty()) {
    const auto results = deep::run(jobs);
    for (size_t j = 0; j < results.size(); ++j) {
      const auto& [sh, infos] = owners[j];
      const auto& res = results[j];
      if (!res.error.empty()) {
        out.add("HS005", Severity::error, "cannot read tensor data: " + res.error, sh->file);
        continue;
      }
      for (size_t k = 0; k < infos.size(); ++k) {
        const auto& t = *infos[k];
        const auto& r = res.tensors[k];
        const std::string type(gguf::ggml_type(t.type)->name);
        if (r.nan)
          add("HS002", Severity::error, std::to_string(r.nan) + " of " + std::to_string(t.elements) + " " + type + " values are NaN (first at element " + std::to_string(r.first_nan) + ")",
              sh->file, t.name, "the weights are corrupt or a conversion overflowed; every output that reads them becomes NaN");
        if (r.inf)
          add("HS003", Severity::error, std::to_string(r.inf) + " of " + std::to_string(t.elements) + " " + type + " values are Inf (first at element " + std::to_string(r.first_inf) + ")",
              sh->file, t.name, "an overflow in conversion (e.g. F32 to F16); re-convert from the source weights");
        const std::string_view n = t.name;
        const bool plausible = n.find("bias") != std::string_view::npos;
        if (!r.nonzero && r.elements == t.elements && t.elements >= kMinZeroElements && !plausible)
          add("HS004", Severity::warning, "all " + std::to_string(t.elements) + " " + type + " values of shape " + shape_text(t) + " are zero", sh->file,
              t.name, "a zero-filled download or a failed conversion; the layer computes nothing");
      }
    }
  }
  // Quantized tensors: the scale field of every block, read in large sequential chunks.
  for (const auto& sh : ck.gguf_shards) {
    const gguf::File& g = *sh.gguf;
    if (!g.sizes_ok) continue;
    const FileEntry* fe = ck.file(sh.file);
    if (!fe || !fe->readable()) continue;
    io::ReadOnlyFile file;
    if (!file.open(fe->abs, true).empty()) continue;
    std::vector<unsigned char> buf;
    for (const auto& t : g.tensors) {
      const auto fields = scale_fields(t.type);
      if (fields.empty() || t.nbytes == 0 || g.data_start + t.offset + t.nbytes > g.file_size) continue;
      const uint32_t bb = gguf::ggml_type(t.type)->block_bytes;
      const uint64_t blocks = t.nbytes / bb;
      const uint64_t per_read = std::max<uint64_t>(1, (4u << 20) / bb);
      uint64_t bad = 0, first_bad = deep::kNone;
      for (uint64_t b = 0; b < blocks; b += per_read) {
        const uint64_t n = std::min(per_read, blocks - b);
        buf.resize(n * bb);
        std::string err;
        const int64_t got = file.read_at(g.data_start + t.offset + b * bb, buf.data(), n * bb, &err);
        if (got != static_cast<int64_t>(n * bb)) {
          out.add("HS005", Severity::error, "cannot read the data of " + std::string(t.name) + ": " + (err.empty() ? "short read" : err), sh.file, t.name);
          break;
        }
        for (uint64_t i = 0; i < n; ++i)
          for (const auto& f : fields)
            if (bad_scale(&buf[i * bb + f.offset], f.kind)) {
              if (first_bad == deep::kNone) first_bad = b + i;
              ++bad;
              break;
            }
      }
      if (bad) {
        const uint32_t per_block = gguf::ggml_type(t.type)->block;
        add("HS006", Severity::error,
            std::to_string(bad) + " of " + std::to_string(blocks) + " " + std::string(gguf::ggml_type(t.type)->name) +
                " blocks have a NaN or Inf scale (first: block " + std::to_string(first_bad) + ", elements " +
                std::to_string(first_bad * per_block) + ".." + std::to_string(first_bad * per_block + per_block - 1) + ")",
            sh.file, t.name,
            "each such block turns its " + std::to_string(per_block) +
                " values into NaN; llama.cpp's --check-tensors rejects the file. Re-quantize from the source weights");
      }
    }
  }
}

}  // namespace

const FamilyDef kGgufDeepFamily{"GGUF HS", kCodes, run};

}  // namespace ckpt::checks
