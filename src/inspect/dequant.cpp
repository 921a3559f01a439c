// Row decoders for every Layout of dequant.h. Each reads the bytes of the rows it is asked for
// (and the companions' matching slices) by positioned reads into reusable buffers, so memory is
// bounded by the tile, whatever the tensor's size.
#include "inspect/dequant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "format/float_decode.h"
#include "io/file.h"

namespace ckpt::diff::dequant {

namespace {

uint64_t cdiv(uint64_t a, uint64_t b) { return b ? (a + b - 1) / b : 0; }

// Reads byte ranges of one Part, relative to its first byte.
class PartBytes {
 public:
  bool open(const Part& p, std::string& error) {
    part_ = &p;
    std::string e = file_.open(p.file, true);
    if (!e.empty()) {
      error = p.file.string() + ": " + e;
      return false;
    }
    return true;
  }
  bool read(uint64_t at, uint64_t n, void* out, std::string& error) const {
    if (at + n > part_->nbytes) {
      error = part_->name + ": bytes [" + std::to_string(at) + ", " + std::to_string(at + n) +
              ") asked of a tensor of " + std::to_string(part_->nbytes) + " bytes";
      return false;
    }
    std::string e;
    const int64_t got = file_.read_at(part_->offset + at, out, n, &e);
    if (got < 0 || uint64_t(got) != n) {
      error = part_->file.string() + ": tensor " + part_->name + " needs bytes [" +
              std::to_string(part_->offset + at) + ", " + std::to_string(part_->offset + at + n) +
              ") of the file" + (got < 0 ? ": " + e : ", which ends at byte " + std::to_string(file_.size()));
      return false;
    }
    return true;
  }
  template <class T>
  bool read_vec(uint64_t at, uint64_t count, std::vector<T>& out, std::string& error) const {
    out.resize(count);
    return read(at, count * sizeof(T), out.data(), error);
  }
  const Part& part() const { return *part_; }

 private:
  const Part* part_ = nullptr;
  io::ReadOnlyFile file_;
};

uint32_t element_bytes(DType d) { return dtype_bits(d) / 8; }

// Float values of `count` elements of dtype d at p (little-endian).
bool decode_floats(DType d, const uint8_t* p, uint64_t count, float* out) {
  switch (d) {
    case DType::F32:
      std::memcpy(out, p, count * 4);
      return true;
    case DType::F64:
      for (uint64_t i = 0; i < count; ++i) {
        double v;
        std::memcpy(&v, p + i * 8, 8);
        out[i] = float(v);
      }
      return true;
    case DType::F16:
      for (uint64_t i = 0; i < count; ++i) out[i] = floats::from_f16(uint16_t(p[2 * i] | (p[2 * i + 1] << 8)));
      return true;
    case DType::BF16:
      for (uint64_t i = 0; i < count; ++i) out[i] = floats::from_bf16(uint16_t(p[2 * i] | (p[2 * i + 1] << 8)));
      return true;
    case DType::F8_E4M3:
      for (uint64_t i = 0; i < count; ++i) out[i] = floats::from_e4m3(p[i]);
      return true;
    case DType::F8_E5M2:
      for (uint64_t i = 0; i < count; ++i) out[i] = floats::from_e5m2(p[i]);
      return true;
    case DType::F8_E8M0:
      for (uint64_t i = 0; i < count; ++i) out[i] = floats::from_e8m0(p[i]);
      return true;
    default:
      return false;
  }
}

// Reads `count` float elements of a Part starting at element `first` into out.
bool read_floats(const PartBytes& pb, uint64_t first, uint64_t count, std::vector<uint8_t>& raw, float* out,
                 std::string& error) {
  const uint32_t es = element_bytes(pb.part().dtype);
  raw.resize(count * es);
  if (!pb.read(first * es, count * es, raw.data(), error)) return false;
  if (!decode_floats(pb.part().dtype, raw.data(), count, out)) {
    error = pb.part().name + ": dtype " + std::string(dtype_name(pb.part().dtype)) + " is not a float scale";
    return false;
  }
  return true;
}

// The b-bit unsigned value at bit position `bit` of a little-endian bitstream of 32-bit words
// (the word after the one it starts in must be readable when it straddles).
inline uint32_t bits_at(const uint32_t* words, uint64_t bit, int b) {
  const uint64_t w = bit >> 5;
  const unsigned off = unsigned(bit & 31);
  uint64_t v = words[w] >> off;
  if (off + unsigned(b) > 32) v |= uint64_t(words[w + 1]) << (32 - off);
  return uint32_t(v & ((1ull << b) - 1));
}
// b-bit field number `index` of such a bitstream.
inline uint32_t field(const uint32_t* words, uint64_t index, int b) { return bits_at(words, index * uint64_t(b), b); }
// Field `index` when each word holds 32/b whole fields (older compressed-tensors layouts).
inline uint32_t field_per_word(const uint32_t* words, uint64_t index, int b) {
  const uint64_t per = 32 / uint64_t(b);
  return (words[index / per] >> ((index % per) * uint64_t(b))) & ((1u << b) - 1);
}

// A scale (or zero point) tensor applied per (row, column group): scalar, one per row, or a
// [rows_of_scale, groups] grid, with leading (expert) dims folded into rows.
struct ScaleGrid {
  enum Kind { Scalar, PerRow, Grid, Block } kind = Scalar;
  uint64_t cols = 0;  // grid columns
};

class FloatReader : public RowReader {
 public:
  explicit FloatReader(const Weight& w) : w_(w) {}
  bool open(std::string& e) { return data_.open(w_.parts[0], e); }
  bool read(uint64_t r0, uint64_t n, float* out, std::string& e) override {
    return read_floats(data_, r0 * w_.cols, n * w_.cols, raw_, out, e);
  }

 private:
  const Weight& w_;
  PartBytes data_;
  std::vector<uint8_t> raw_;
};

// MLX affine: w = scale * q + bias per group of `group` columns.
class MlxAffineReader : public RowReader {
 public:
  explicit MlxAffineReader(const Weight& w) : w_(w) {}
  bool open(std::string& e) {
    words_per_row_ = w_.parts[0].shape.back();
    groups_ = w_.parts[1].shape.back();
    return data_.open(w_.parts[0], e) && scales_.open(w_.parts[1], e) && biases_.open(w_.parts[2], e);
  }
  bool read(uint64_t r0, uint64_t n, float* out, std::string& e) override {
    words_.assign(n * words_per_row_ + 1, 0);  // +1: a field may straddle into the next word
    if (!data_.read(r0 * words_per_row_ * 4, n * words_per_row_ * 4, words_.data(), e)) return false;
    s_.resize(n * groups_);
    b_.resize(n * groups_);
    if (!read_floats(scales_, r0 * groups_, n * groups_, raw_, s_.data(), e)) return false;
    if (!read_floats(biases_, r0 * groups_, n * groups_, raw_, b_.data(), e)) return false;
    for (uint64_t r = 0; r < n; ++r) {
      const uint32_t* row = words_.data() + r * words_per_row_;
      const float* s = s_.data() + r * groups_;
      const float* b = b_.data() + r * groups_;
      float* o = out + r * w_.cols;
      for (uint64_t g = 0, j = 0; j < w_.cols; ++g) {
        const float sg = s[g], bg = b[g];
        const uint64_t end = std::min(w_.cols, j + w_.group);
        if (w_.bits == 4 || w_.bits == 8 || w_.bits == 2) {  // whole fields per word
          const unsigned b_ = unsigned(w_.bits), per = 32 / b_, mask = (1u << b_) - 1;
          for (; j < end; ++j) o[j] = sg * float((row[j / per] >> ((j % per) * b_)) & mask) + bg;
        } else {
          for (; j < end; ++j) o[j] = sg * float(field(row, j, w_.bits)) + bg;
        }
      }
    }
    return true;
  }

 private:
  const Weight& w_;
  PartBytes data_, scales_, biases_;
  uint64_t words_per_row_ = 0, groups_ = 0;
  std::vector<uint32_t> words_;
  std::vector<float> s_, b_;
  std::vector<uint8_t> raw_;
};

// Shared by the compressed-tensors int layouts: the scale per (row, group), the optional zero
// point and the optional activation-order group index.
class GroupedScales {
 public:
  bool open(const Weight& w, size_t scale_part, std::string& e) {
    w_ = &w;
    const Part& s = w.parts[scale_part];
    uint64_t n = 1;
    for (auto d : s.shape) n *= d;
    if (n == 1) kind_ = ScaleGrid::Scalar;
    else if (s.shape.back() == 1) kind_ = ScaleGrid::PerRow;
    else kind_ = ScaleGrid::Grid;
    groups_ = kind_ == ScaleGrid::Grid ? s.shape.back() : 1;
    if (!scale_.open(s, e)) return false;
    size_t next = scale_part + 1;
    if (w.has_zero) {
      zero_part_ = next++;
      if (!zero_.open(w.parts[zero_part_], e)) return false;
    }
    if (w.has_gidx) {
      const Part& gp = w.parts[next];
      PartBytes gb;
      if (!gb.open(gp, e) || !gb.read_vec(0, w.cols, gidx_, e)) return false;
      for (int32_t g : gidx_)
        if (g < 0 || uint64_t(g) >= std::max<uint64_t>(groups_, 1)) {
          e = gp.name + ": group index " + std::to_string(g) + " outside the " + std::to_string(groups_) + " scale groups";
          return false;
        }
    }
    return true;
  }
  // Scales (and zero points) of rows [r0, r0+n): s[r * groups + g].
  bool load(uint64_t r0, uint64_t n, std::string& e) {
    s_.resize(n * groups_);
    if (kind_ == ScaleGrid::Scalar) {
      float v;
      if (!read_floats(scale_, 0, 1, raw_, &v, e)) return false;
      std::fill(s_.begin(), s_.end(), v);
    } else if (!read_floats(scale_, r0 * groups_, n * groups_, raw_, s_.data(), e)) {
      return false;
    }
    if (w_->has_zero) return load_zero(r0, n, e);
    return true;
  }
  uint64_t group_of(uint64_t col) const {
    if (!gidx_.empty()) return uint64_t(gidx_[col]);
    return groups_ == 1 ? 0 : std::min(groups_ - 1, col / w_->group);
  }
  float scale(uint64_t r, uint64_t g) const { return s_[r * groups_ + g]; }
  float zero(uint64_t r, uint64_t g) const { return z_.empty() ? 0.f : z_[r * groups_ + g]; }
  uint64_t groups() const { return groups_; }

 private:
  bool load_zero(uint64_t r0, uint64_t n, std::string& e) {
    const Part& zp = w_->parts[zero_part_];
    z_.assign(n * groups_, 0.f);
    if (zp.dtype == DType::I32 && w_->layout == Layout::CtPacked) {
      // packed along dim 0 (rows), offset binary: [.., cdiv(O*b, 32), groups]
      const uint64_t O = w_->shape.size() >= 2 ? w_->shape[w_->shape.size() - 2] : w_->rows;
      const uint64_t zrows = zp.shape.size() >= 2 ? zp.shape[zp.shape.size() - 2] : 1;
      const int32_t off = 1 << (w_->bits - 1);
      for (uint64_t r = r0; r < r0 + n; ++r) {
        const uint64_t e_idx = r / O, o = r % O;
        std::vector<uint32_t> col(zrows + 1, 0);
        for (uint64_t g = 0; g < groups_; ++g) {
          // the words of column g of slice e_idx (strided by `groups_`)
          for (uint64_t k = 0; k < zrows; ++k)
            if (!zero_.read(((e_idx * zrows + k) * groups_ + g) * 4, 4, &col[k], e)) return false;
          const uint32_t u = w_->dense_bits ? field(col.data(), o, w_->bits) : field_per_word(col.data(), o, w_->bits);
          z_[(r - r0) * groups_ + g] = float(int32_t(u) - off);
        }
      }
      return true;
    }
    // unpacked zero points: same grid as the scales, integer or float
    const uint32_t es = element_bytes(zp.dtype);
    raw_.resize(n * groups_ * es);
    const uint64_t first = kind_ == ScaleGrid::Scalar ? 0 : r0 * groups_;
    const uint64_t count = kind_ == ScaleGrid::Scalar ? 1 : n * groups_;
    if (!zero_.read(first * es, count * es, raw_.data(), e)) return false;
    for (uint64_t i = 0; i < count; ++i) {
      float v = 0;
      const uint8_t* p = raw_.data() + i * es;
      switch (zp.dtype) {
        case DType::I8: v = float(int8_t(p[0])); break;
        case DType::U8: v = float(p[0]); break;
        case DType::I32: {
          int32_t x;
          std::memcpy(&x, p, 4);
          v = float(x);
          break;
        }
        default:
          if (!decode_floats(zp.dtype, p, 1, &v)) {
            e = zp.name + ": zero point dtype " + std::string(dtype_name(zp.dtype)) + " is not read";
            return false;
          }
      }
      if (kind_ == ScaleGrid::Scalar) std::fill(z_.begin(), z_.end(), v);
      else z_[i] = v;
    }
    return true;
  }

  const Weight* w_ = nullptr;
  ScaleGrid::Kind kind_ = ScaleGrid::Scalar;
  uint64_t groups_ = 1;
  size_t zero_part_ = 0;
  PartBytes scale_, zero_;
  std::vector<int32_t> gidx_;
  std::vector<float> s_, z_;
  std::vector<uint8_t> raw_;
};

// compressed-tensors pack-quantized: offset-binary b-bit fields along the row, w = (q - z) * s.
class CtPackedReader : public RowReader {
 public:
  explicit CtPackedReader(const Weight& w) : w_(w) {}
  bool open(std::string& e) {
    words_per_row_ = w_.parts[0].shape.back();
    return data_.open(w_.parts[0], e) && scales_.open(w_, 1, e);
  }
  bool read(uint64_t r0, uint64_t n, float* out, std::string& e) override {
    words_.assign(n * words_per_row_ + 1, 0);
    if (!data_.read(r0 * words_per_row_ * 4, n * words_per_row_ * 4, words_.data(), e)) return false;
    if (!scales_.load(r0, n, e)) return false;
    const int32_t off = 1 << (w_.bits - 1);
    for (uint64_t r = 0; r < n; ++r) {
      const uint32_t* row = words_.data() + r * words_per_row_;
      float* o = out + r * w_.cols;
      for (uint64_t j = 0; j < w_.cols; ++j) {
        const uint32_t u = w_.dense_bits ? field(row, j, w_.bits) : field_per_word(row, j, w_.bits);
        const uint64_t g = scales_.group_of(j);
        o[j] = (float(int32_t(u) - off) - scales_.zero(r, g)) * scales_.scale(r, g);
      }
    }
    return true;
  }

 private:
  const Weight& w_;
  PartBytes data_;
  GroupedScales scales_;
  uint64_t words_per_row_ = 0;
  std::vector<uint32_t> words_;
};

// compressed-tensors int-quantized / naive: int8 values, w = (q - z) * s.
class IntScaledReader : public RowReader {
 public:
  explicit IntScaledReader(const Weight& w) : w_(w) {}
  bool open(std::string& e) { return data_.open(w_.parts[0], e) && scales_.open(w_, 1, e); }
  bool read(uint64_t r0, uint64_t n, float* out, std::string& e) override {
    q_.resize(n * w_.cols);
    if (!data_.read(r0 * w_.cols, n * w_.cols, q_.data(), e)) return false;
    if (!scales_.load(r0, n, e)) return false;
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t j = 0; j < w_.cols; ++j) {
        const uint64_t g = scales_.group_of(j);
        out[r * w_.cols + j] = (float(q_[r * w_.cols + j]) - scales_.zero(r, g)) * scales_.scale(r, g);
      }
    return true;
  }

 private:
  const Weight& w_;
  PartBytes data_;
  GroupedScales scales_;
  std::vector<int8_t> q_;
};

// FP8 (or any float) values times a scale that is a scalar, one per row, or one per
// block_rows x block_cols block (DeepSeek's weight_scale_inv).
class FloatScaledReader : public RowReader {
 public:
  explicit FloatScaledReader(const Weight& w) : w_(w) {}
  bool open(std::string& e) {
    const Part& s = w_.parts[1];
    uint64_t n = 1;
    for (auto d : s.shape) n *= d;
    if (n == 1) kind_ = ScaleGrid::Scalar;
    else if (w_.block_rows) kind_ = ScaleGrid::Block;
    else kind_ = ScaleGrid::PerRow;
    O_ = w_.shape.size() >= 2 ? w_.shape[w_.shape.size() - 2] : w_.rows;
    if (kind_ == ScaleGrid::Block) {
      block_grid_rows_ = cdiv(O_, w_.block_rows);
      block_grid_cols_ = cdiv(w_.cols, w_.block_cols);
    }
    return data_.open(w_.parts[0], e) && scale_.open(s, e);
  }
  bool read(uint64_t r0, uint64_t n, float* out, std::string& e) override {
    if (!read_floats(data_, r0 * w_.cols, n * w_.cols, raw_, out, e)) return false;
    if (kind_ == ScaleGrid::Scalar) {
      float s;
      if (!read_floats(scale_, 0, 1, raw_, &s, e)) return false;
      for (uint64_t i = 0; i < n * w_.cols; ++i) out[i] *= s;
      return true;
    }
    if (kind_ == ScaleGrid::PerRow) {
      s_.resize(n);
      if (!read_floats(scale_, r0, n, raw_, s_.data(), e)) return false;
      for (uint64_t r = 0; r < n; ++r)
        for (uint64_t j = 0; j < w_.cols; ++j) out[r * w_.cols + j] *= s_[r];
      return true;
    }
    for (uint64_t r = r0; r < r0 + n; ++r) {
      const uint64_t slice = r / O_, brow = (r % O_) / w_.block_rows;
      const uint64_t first = (slice * block_grid_rows_ + brow) * block_grid_cols_;
      if (first != loaded_first_) {
        s_.resize(block_grid_cols_);
        if (!read_floats(scale_, first, block_grid_cols_, raw_, s_.data(), e)) return false;
        loaded_first_ = first;
      }
      float* o = out + (r - r0) * w_.cols;
      for (uint64_t j = 0; j < w_.cols; ++j) o[j] *= s_[j / w_.block_cols];
    }
    return true;
  }

 private:
  const Weight& w_;
  PartBytes data_, scale_;
  ScaleGrid::Kind kind_ = ScaleGrid::Scalar;
  uint64_t O_ = 0, block_grid_rows_ = 0, block_grid_cols_ = 0, loaded_first_ = UINT64_MAX;
  std::vector<float> s_;
  std::vector<uint8_t> raw_;
};

// bitsandbytes LLM.int8: w = q * SCB[row] / 127.
class BnbInt8Reader : public RowReader {
 public:
  explicit BnbInt8Reader(const Weight& w) : w_(w) {}
  bool open(std::string& e) { return data_.open(w_.parts[0], e) && scb_.open(w_.parts[1], e); }
  bool read(uint64_t r0, uint64_t n, float* out, std::string& e) override {
    q_.resize(n * w_.cols);
    s_.resize(n);
    if (!data_.read(r0 * w_.cols, n * w_.cols, q_.data(), e)) return false;
    if (!read_floats(scb_, r0, n, raw_, s_.data(), e)) return false;
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t j = 0; j < w_.cols; ++j) out[r * w_.cols + j] = float(q_[r * w_.cols + j]) * s_[r] / 127.f;
    return true;
  }

 private:
  const Weight& w_;
  PartBytes data_, scb_;
  std::vector<int8_t> q_;
  std::vector<float> s_;
  std::vector<uint8_t> raw_;
};

// GPTQ: qweight [P, O] packs the input dim; logical rows are qweight's columns, so a tile of
// rows reads one short run per packed row (and per group for scales and zero points).
class GptqReader : public RowReader {
 public:
  explicit GptqReader(const Weight& w) : w_(w) {}
  bool open(std::string& e) {
    P_ = w_.parts[0].shape[0];
    G_ = w_.parts[2].shape[0];
    Z_ = w_.parts[1].shape[1];
    if (!data_.open(w_.parts[0], e) || !zeros_.open(w_.parts[1], e) || !scales_.open(w_.parts[2], e)) return false;
    if (w_.has_gidx) {
      PartBytes gb;
      if (!gb.open(w_.parts[3], e) || !gb.read_vec(0, w_.cols, gidx_, e)) return false;
      for (int32_t g : gidx_)
        if (g < 0 || uint64_t(g) >= G_) {
          e = w_.parts[3].name + ": group index " + std::to_string(g) + " outside the " + std::to_string(G_) + " groups";
          return false;
        }
    }
    return true;
  }
  bool read(uint64_t o0, uint64_t n, float* out, std::string& e) override {
    const uint64_t O = w_.rows, I = w_.cols;
    // packed words of columns [o0, o0+n), one run per packed row: q_[p * n + c]
    q_.assign(P_ * n + n, 0);
    for (uint64_t p = 0; p < P_; ++p)
      if (!data_.read((p * O + o0) * 4, n * 4, q_.data() + p * n, e)) return false;
    // scales of those columns per group: s_[g * n + c]
    s_.resize(G_ * n);
    for (uint64_t g = 0; g < G_; ++g)
      if (!read_floats(scales_, g * O + o0, n, raw_, s_.data() + g * n, e)) return false;
    // zero points: the words holding fields [o0, o0+n) of each group's row
    const uint64_t w0 = (o0 * uint64_t(w_.bits)) / 32, w1 = std::min(Z_, cdiv((o0 + n) * uint64_t(w_.bits), 32));
    z_.assign((w1 - w0 + 1) * G_, 0);
    for (uint64_t g = 0; g < G_; ++g)
      if (w1 > w0 && !zeros_.read((g * Z_ + w0) * 4, (w1 - w0) * 4, z_.data() + g * (w1 - w0 + 1), e)) return false;
    std::vector<uint32_t> column(P_ + 1, 0);
    for (uint64_t c = 0; c < n; ++c) {
      for (uint64_t p = 0; p < P_; ++p) column[p] = q_[p * n + c];
      float* o = out + c * I;
      for (uint64_t i = 0; i < I; ++i) {
        const uint64_t g = gidx_.empty() ? std::min(G_ - 1, i / w_.group) : uint64_t(gidx_[i]);
        const uint64_t zbit = (o0 + c) * uint64_t(w_.bits) - w0 * 32;
        const uint32_t z = bits_at(z_.data() + g * (w1 - w0 + 1), zbit, w_.bits);
        const float zero = float(z) + (w_.zeros_minus_one ? 1.f : 0.f);
        o[i] = s_[g * n + c] * (float(field(column.data(), i, w_.bits)) - zero);
      }
    }
    return true;
  }

 private:
  const Weight& w_;
  PartBytes data_, zeros_, scales_;
  uint64_t P_ = 0, G_ = 0, Z_ = 0;
  std::vector<int32_t> gidx_;
  std::vector<uint32_t> q_, z_;
  std::vector<float> s_;
  std::vector<uint8_t> raw_;
};

// AWQ gemm: qweight [I, O/8], each word 8 outputs in the order 0,2,4,6,1,3,5,7; w = (q - z) * s.
class AwqGemmReader : public RowReader {
 public:
  explicit AwqGemmReader(const Weight& w) : w_(w) {}
  bool open(std::string& e) {
    return data_.open(w_.parts[0], e) && zeros_.open(w_.parts[1], e) && scales_.open(w_.parts[2], e);
  }
  bool read(uint64_t o0, uint64_t n, float* out, std::string& e) override {
    static constexpr int kNibbleOf[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // output j sits in nibble kNibbleOf[j]
    const uint64_t O = w_.rows, I = w_.cols, W = O / 8, G = w_.parts[2].shape[0];
    const uint64_t c0 = o0 / 8, c1 = cdiv(o0 + n, 8), nc = c1 - c0;
    q_.resize(I * nc);
    for (uint64_t i = 0; i < I; ++i)
      if (!data_.read((i * W + c0) * 4, nc * 4, q_.data() + i * nc, e)) return false;
    z_.resize(G * nc);
    s_.resize(G * n);
    for (uint64_t g = 0; g < G; ++g) {
      if (!zeros_.read((g * W + c0) * 4, nc * 4, z_.data() + g * nc, e)) return false;
      if (!read_floats(scales_, g * O + o0, n, raw_, s_.data() + g * n, e)) return false;
    }
    for (uint64_t c = 0; c < n; ++c) {
      const uint64_t o = o0 + c, word = o / 8 - c0;
      const unsigned shift = unsigned(kNibbleOf[o % 8]) * 4;
      float* dst = out + c * I;
      for (uint64_t i = 0; i < I; ++i) {
        const uint64_t g = std::min(G - 1, i / w_.group);
        const float q = float((q_[i * nc + word] >> shift) & 0xF), z = float((z_[g * nc + word] >> shift) & 0xF);
        dst[i] = (q - z) * s_[g * n + c];
      }
    }
    return true;
  }

 private:
  const Weight& w_;
  PartBytes data_, zeros_, scales_;
  std::vector<uint32_t> q_, z_;
  std::vector<float> s_;
  std::vector<uint8_t> raw_;
};

// ---- GGUF block types (ggml-common.h block structs; specs/gguf.md section 2.1) ----

inline float f16_at(const uint8_t* p) { return floats::from_f16(uint16_t(p[0] | (p[1] << 8))); }

// Q4_K / Q5_K: 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min in 12 bytes.
inline void scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// One block of type t at p into y[block elements]. false for a type not decoded.
bool decode_block(DType t, const uint8_t* p, float* y) {
  switch (t) {
    case DType::Q4_0: {
      const float d = f16_at(p);
      const uint8_t* qs = p + 2;
      for (int j = 0; j < 16; ++j) {
        y[j] = float(int(qs[j] & 0xF) - 8) * d;
        y[j + 16] = float(int(qs[j] >> 4) - 8) * d;
      }
      return true;
    }
    case DType::Q4_1: {
      const float d = f16_at(p), m = f16_at(p + 2);
      const uint8_t* qs = p + 4;
      for (int j = 0; j < 16; ++j) {
        y[j] = float(qs[j] & 0xF) * d + m;
        y[j + 16] = float(qs[j] >> 4) * d + m;
      }
      return true;
    }
    case DType::Q5_0:
    case DType::Q5_1: {
      const bool has_min = t == DType::Q5_1;
      const float d = f16_at(p), m = has_min ? f16_at(p + 2) : 0.f;
      const uint8_t* h = p + (has_min ? 4 : 2);
      const uint32_t qh = uint32_t(h[0]) | (uint32_t(h[1]) << 8) | (uint32_t(h[2]) << 16) | (uint32_t(h[3]) << 24);
      const uint8_t* qs = h + 4;
      const int bias = has_min ? 0 : 16;
      for (int j = 0; j < 16; ++j) {
        const int lo = int(qs[j] & 0xF) | int(((qh >> j) & 1) << 4);
        const int hi = int(qs[j] >> 4) | int(((qh >> (j + 16)) & 1) << 4);
        y[j] = float(lo - bias) * d + m;
        y[j + 16] = float(hi - bias) * d + m;
      }
      return true;
    }
    case DType::Q8_0: {
      const float d = f16_at(p);
      for (int j = 0; j < 32; ++j) y[j] = float(int8_t(p[2 + j])) * d;
      return true;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool five = t == DType::Q5_K;
      const float d = f16_at(p), dmin = f16_at(p + 2);
      const uint8_t* scales = p + 4;
      const uint8_t* qh = p + 16;
      const uint8_t* ql = five ? p + 48 : p + 16;
      int is = 0;
      uint8_t u1 = 1, u2 = 2;
      for (int j = 0; j < 256; j += 64) {
        uint8_t sc, mn;
        scale_min_k4(is, scales, sc, mn);
        const float d1 = d * sc, m1 = dmin * mn;
        scale_min_k4(is + 1, scales, sc, mn);
        const float d2 = d * sc, m2 = dmin * mn;
        for (int l = 0; l < 32; ++l) y[j + l] = d1 * float((ql[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l) y[j + 32 + l] = d2 * float((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
        ql += 32;
        is += 2;
        u1 = uint8_t(u1 << 2);
        u2 = uint8_t(u2 << 2);
      }
      return true;
    }
    case DType::Q6_K: {
      const uint8_t* ql = p;
      const uint8_t* qh = p + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(p + 192);
      const float d = f16_at(p + 208);
      for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[n + l] = d * float(sc[is]) * float(q1);
          y[n + l + 32] = d * float(sc[is + 2]) * float(q2);
          y[n + l + 64] = d * float(sc[is + 4]) * float(q3);
          y[n + l + 96] = d * float(sc[is + 6]) * float(q4);
        }
        ql += 64;
        qh += 32;
        sc += 8;
      }
      return true;
    }
    default:
      return false;
  }
}

class GgufBlockReader : public RowReader {
 public:
  explicit GgufBlockReader(const Weight& w) : w_(w) {}
  bool open(std::string& e) {
    const DTypeInfo& t = dtype_info(w_.parts[0].dtype);
    block_elems_ = t.block_elems;
    block_bytes_ = t.block_bytes;
    row_bytes_ = w_.cols / block_elems_ * block_bytes_;
    return data_.open(w_.parts[0], e);
  }
  bool read(uint64_t r0, uint64_t n, float* out, std::string& e) override {
    raw_.resize(n * row_bytes_);
    if (!data_.read(r0 * row_bytes_, n * row_bytes_, raw_.data(), e)) return false;
    const uint64_t blocks = n * w_.cols / block_elems_;
    for (uint64_t b = 0; b < blocks; ++b)
      if (!decode_block(w_.parts[0].dtype, raw_.data() + b * block_bytes_, out + b * block_elems_)) {
        e = w_.parts[0].name + ": " + std::string(dtype_name(w_.parts[0].dtype)) + " blocks are not decoded";
        return false;
      }
    return true;
  }

 private:
  const Weight& w_;
  PartBytes data_;
  uint64_t block_elems_ = 1, block_bytes_ = 0, row_bytes_ = 0;
  std::vector<uint8_t> raw_;
};

template <class R>
std::unique_ptr<RowReader> make(const Weight& w, std::string& e) {
  auto r = std::make_unique<R>(w);
  if (!r->open(e)) return nullptr;
  return r;
}

}  // namespace

bool gguf_block_decodable(DType t) {
  switch (t) {
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q8_0:
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

bool float_decodable(DType t) {
  switch (t) {
    case DType::F32: case DType::F64: case DType::F16: case DType::BF16: case DType::F8_E4M3: case DType::F8_E5M2:
      return true;
    default:
      return false;
  }
}

std::unique_ptr<RowReader> open_reader(const Weight& w, std::string& e) {
  switch (w.layout) {
    case Layout::Float: return make<FloatReader>(w, e);
    case Layout::MlxAffine: return make<MlxAffineReader>(w, e);
    case Layout::CtPacked: return make<CtPackedReader>(w, e);
    case Layout::IntScaled: return make<IntScaledReader>(w, e);
    case Layout::FloatScaled: return make<FloatScaledReader>(w, e);
    case Layout::BnbInt8: return make<BnbInt8Reader>(w, e);
    case Layout::GPTQ: return make<GptqReader>(w, e);
    case Layout::AwqGemm: return make<AwqGemmReader>(w, e);
    case Layout::GgufBlocks: return make<GgufBlockReader>(w, e);
  }
  e = "unknown layout";
  return nullptr;
}

}  // namespace ckpt::diff::dequant
