// The row decoders of `ckpt diff --deep` on packed bytes built here value by value: fields that
// straddle 32-bit words (3-bit), GPTQ's transposed packing with act-order group indexes and v1
// zero points, AWQ's nibble order, a DeepSeek block-scale grid, GGUF blocks, and files that end
// early (an error naming the file and byte range, never a crash).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "format/float_decode.h"
#include "inspect/dequant.h"
#include "test_support.h"

namespace ckpt::test {
namespace {

namespace fs = std::filesystem;
using diff::dequant::Layout;
using diff::dequant::Part;
using diff::dequant::Weight;

// Appends raw bytes of `v` to a file's contents; returns the Part for them.
struct Blob {
  fs::path file;
  std::string bytes;
  template <class T>
  Part add(const std::string& name, DType d, std::vector<uint64_t> shape, const std::vector<T>& v) {
    Part p;
    p.name = name;
    p.dtype = d;
    p.shape = std::move(shape);
    p.file = file;
    p.offset = bytes.size();
    p.nbytes = v.size() * sizeof(T);
    bytes.append(reinterpret_cast<const char*>(v.data()), p.nbytes);
    return p;
  }
  void write() const { std::ofstream(file, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size())); }
};

// Packs b-bit values LSB first into a dense stream of 32-bit words.
std::vector<uint32_t> pack_dense(const std::vector<uint32_t>& vals, int b, uint64_t words) {
  std::vector<uint32_t> w(words, 0);
  for (size_t i = 0; i < vals.size(); ++i)
    for (int k = 0; k < b; ++k)
      if (vals[i] >> k & 1) {
        const uint64_t bit = i * uint64_t(b) + uint64_t(k);
        w[bit / 32] |= 1u << (bit % 32);
      }
  return w;
}

std::vector<float> read_all(const Weight& w) {
  std::string err;
  auto r = diff::dequant::open_reader(w, err);
  EXPECT_TRUE(r) << err;
  std::vector<float> out(w.rows * w.cols, NAN);
  if (r) {
    EXPECT_TRUE(r->read(0, w.rows, out.data(), err)) << err;
  }
  return out;
}

uint16_t bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return uint16_t(x >> 16);  // the test's values are exact in bf16
}

TEST(Dequant, MlxThreeBitFieldsStraddleWords) {
  TempDir tmp;
  Blob b{tmp / "w.bin", {}};
  const uint64_t O = 2, I = 64, g = 32;  // 64 3-bit values = 6 words per row
  std::vector<uint32_t> q(O * I);
  for (uint64_t i = 0; i < q.size(); ++i) q[i] = uint32_t((i * 5 + 3) % 8);
  std::vector<uint32_t> words;
  for (uint64_t r = 0; r < O; ++r) {
    auto row = pack_dense(std::vector<uint32_t>(q.begin() + long(r * I), q.begin() + long((r + 1) * I)), 3, 6);
    words.insert(words.end(), row.begin(), row.end());
  }
  std::vector<uint16_t> scales = {bf16(0.5f), bf16(0.25f), bf16(2.0f), bf16(1.0f)};
  std::vector<uint16_t> biases = {bf16(-1.0f), bf16(0.0f), bf16(0.5f), bf16(-4.0f)};
  Weight w;
  w.name = "m.weight";
  w.shape = {O, I};
  w.rows = O;
  w.cols = I;
  w.layout = Layout::MlxAffine;
  w.bits = 3;
  w.group = g;
  w.parts = {b.add("m.weight", DType::U32, {O, 6}, words), b.add("m.scales", DType::BF16, {O, 2}, scales),
             b.add("m.biases", DType::BF16, {O, 2}, biases)};
  b.write();
  auto v = read_all(w);
  for (uint64_t r = 0; r < O; ++r)
    for (uint64_t j = 0; j < I; ++j) {
      const size_t k = r * 2 + j / g;
      const float want = floats::from_bf16(scales[k]) * float(q[r * I + j]) + floats::from_bf16(biases[k]);
      ASSERT_EQ(v[r * I + j], want) << r << "," << j;
    }
}

TEST(Dequant, GptqActOrderAndV1Zeros) {
  TempDir tmp;
  Blob b{tmp / "w.bin", {}};
  const uint64_t O = 16, I = 16, G = 2, bits = 4;
  std::vector<int32_t> gidx(I);
  for (uint64_t i = 0; i < I; ++i) gidx[i] = int32_t((i * 7 % I) / 8);  // a permutation of i / 8
  std::vector<uint32_t> q(I * O), zeros(G * O);
  for (uint64_t i = 0; i < I * O; ++i) q[i] = uint32_t((i * 11 + 1) % 16);
  for (uint64_t k = 0; k < G * O; ++k) zeros[k] = uint32_t((k * 3) % 15);  // stored: z - 1
  // qweight [I*b/32, O]: column o packs q[i, o] along i
  std::vector<uint32_t> qweight(I * bits / 32 * O, 0);
  for (uint64_t i = 0; i < I; ++i)
    for (uint64_t o = 0; o < O; ++o) qweight[(i / 8) * O + o] |= q[i * O + o] << ((i % 8) * 4);
  std::vector<uint32_t> qzeros;
  for (uint64_t k = 0; k < G; ++k) {
    auto row = pack_dense(std::vector<uint32_t>(zeros.begin() + long(k * O), zeros.begin() + long((k + 1) * O)), 4, 2);
    qzeros.insert(qzeros.end(), row.begin(), row.end());
  }
  std::vector<float> scales(G * O);
  for (uint64_t k = 0; k < G * O; ++k) scales[k] = 0.125f * float(k + 1);
  Weight w;
  w.name = "m.weight";
  w.shape = {O, I};
  w.rows = O;
  w.cols = I;
  w.layout = Layout::GPTQ;
  w.bits = 4;
  w.group = 8;
  w.zeros_minus_one = true;
  w.has_gidx = true;
  w.parts = {b.add("m.qweight", DType::I32, {I / 8, O}, qweight), b.add("m.qzeros", DType::I32, {G, O / 8}, qzeros),
             b.add("m.scales", DType::F32, {G, O}, scales), b.add("m.g_idx", DType::I32, {I}, gidx)};
  b.write();
  auto v = read_all(w);
  for (uint64_t o = 0; o < O; ++o)
    for (uint64_t i = 0; i < I; ++i) {
      const uint64_t g = uint64_t(gidx[i]);
      const float want = scales[g * O + o] * (float(q[i * O + o]) - float(zeros[g * O + o] + 1));
      ASSERT_EQ(v[o * I + i], want) << o << "," << i;
    }
}

TEST(Dequant, AwqGemmNibbleOrder) {
  TempDir tmp;
  Blob b{tmp / "w.bin", {}};
  const uint64_t O = 8, I = 4, g = 4;
  static constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // nibble k holds output kOrder[k]
  std::vector<uint32_t> q(I * O);
  for (uint64_t i = 0; i < q.size(); ++i) q[i] = uint32_t(i % 16);
  std::vector<uint32_t> qweight(I, 0), qzeros(1, 0);
  for (uint64_t i = 0; i < I; ++i)
    for (int k = 0; k < 8; ++k) qweight[i] |= q[i * O + uint64_t(kOrder[k])] << (4 * k);
  for (int k = 0; k < 8; ++k) qzeros[0] |= uint32_t(kOrder[k]) << (4 * k);  // zero of output j is j
  std::vector<uint16_t> scales(O);
  for (uint64_t o = 0; o < O; ++o) scales[o] = uint16_t(0x3C00 + o * 0x100);  // f16 1.0, 1.25, ...
  Weight w;
  w.name = "m.weight";
  w.shape = {O, I};
  w.rows = O;
  w.cols = I;
  w.layout = Layout::AwqGemm;
  w.bits = 4;
  w.group = g;
  w.parts = {b.add("m.qweight", DType::I32, {I, 1}, qweight), b.add("m.qzeros", DType::I32, {1, 1}, qzeros),
             b.add("m.scales", DType::F16, {1, O}, scales)};
  b.write();
  auto v = read_all(w);
  for (uint64_t o = 0; o < O; ++o)
    for (uint64_t i = 0; i < I; ++i)
      ASSERT_EQ(v[o * I + i], (float(q[i * O + o]) - float(o)) * floats::from_f16(scales[o])) << o << "," << i;
}

TEST(Dequant, Fp8BlockScalesOverStackedExperts) {
  TempDir tmp;
  Blob b{tmp / "w.bin", {}};
  const uint64_t E = 2, O = 3, I = 5;  // blocks of 2 x 2: a 2 x 3 grid per expert, ragged at the edges
  std::vector<uint8_t> w8(E * O * I);
  for (uint64_t i = 0; i < w8.size(); ++i) w8[i] = uint8_t(0x30 + i);  // positive normal E4M3 codes
  std::vector<float> sinv(E * 2 * 3);
  for (uint64_t k = 0; k < sinv.size(); ++k) sinv[k] = float(k + 1);
  Weight w;
  w.name = "m.weight";
  w.shape = {E, O, I};
  w.rows = E * O;
  w.cols = I;
  w.layout = Layout::FloatScaled;
  w.block_rows = 2;
  w.block_cols = 2;
  w.parts = {b.add("m.weight", DType::F8_E4M3, {E, O, I}, w8), b.add("m.weight_scale_inv", DType::F32, {E, 2, 3}, sinv)};
  b.write();
  auto v = read_all(w);
  for (uint64_t e = 0; e < E; ++e)
    for (uint64_t o = 0; o < O; ++o)
      for (uint64_t i = 0; i < I; ++i) {
        const uint64_t at = (e * O + o) * I + i;
        ASSERT_EQ(v[at], floats::from_e4m3(w8[at]) * sinv[(e * 2 + o / 2) * 3 + i / 2]) << e << o << i;
      }
}

TEST(Dequant, GgufQ8AndQ4Blocks) {
  TempDir tmp;
  Blob b{tmp / "w.bin", {}};
  // one Q8_0 row of 32 and one Q4_0 row of 32
  std::vector<uint8_t> q8(34), q4(18);
  const uint16_t half = 0x3800;  // f16 0.5
  std::memcpy(q8.data(), &half, 2);
  for (int j = 0; j < 32; ++j) q8[2 + size_t(j)] = uint8_t(int8_t(j - 16));
  std::memcpy(q4.data(), &half, 2);
  for (int j = 0; j < 16; ++j) q4[2 + size_t(j)] = uint8_t(j | ((15 - j) << 4));
  Weight w8;
  w8.name = "a";
  w8.shape = {1, 32};
  w8.rows = 1;
  w8.cols = 32;
  w8.layout = Layout::GgufBlocks;
  w8.parts = {b.add("a", DType::Q8_0, {1, 32}, q8)};
  Weight w4 = w8;
  w4.parts = {b.add("b", DType::Q4_0, {1, 32}, q4)};
  b.write();
  auto v8 = read_all(w8), v4 = read_all(w4);
  for (int j = 0; j < 32; ++j) ASSERT_EQ(v8[size_t(j)], 0.5f * float(j - 16));
  for (int j = 0; j < 16; ++j) {
    ASSERT_EQ(v4[size_t(j)], 0.5f * float(j - 8));
    ASSERT_EQ(v4[size_t(j) + 16], 0.5f * float(15 - j - 8));
  }
}

// The bit-level half decoder against the definition (sign, 2^(e-15) * 1.m, subnormals 2^-14 * 0.m).
TEST(Dequant, HalfDecodingIsExactForEveryBitPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t e = (h >> 10) & 31, m = h & 1023;
    float want = e == 0 ? std::ldexp(float(m), -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(float(m | 1024), int(e) - 25);
    if (h & 0x8000) want = -want;
    const float got = floats::from_f16(uint16_t(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &want, 4);
    std::memcpy(&b, &got, 4);
    ASSERT_EQ(a, b) << std::hex << h;
  }
}

TEST(Dequant, FileThatEndsEarlyIsAnErrorNamingTheBytes) {
  TempDir tmp;
  Blob b{tmp / "w.bin", {}};
  std::vector<uint16_t> vals(64, 0x3C00);
  Weight w;
  w.name = "t";
  w.shape = {8, 8};
  w.rows = 8;
  w.cols = 8;
  w.layout = Layout::Float;
  w.parts = {b.add("t", DType::F16, {8, 8}, vals)};
  b.bytes.resize(100);  // the tensor needs 128
  b.write();
  std::string err;
  auto r = diff::dequant::open_reader(w, err);
  ASSERT_TRUE(r) << err;
  std::vector<float> out(64);
  EXPECT_FALSE(r->read(0, 8, out.data(), err));
  EXPECT_NE(err.find("w.bin"), std::string::npos) << err;
  EXPECT_NE(err.find("[0, 128)"), std::string::npos) << err;
  EXPECT_NE(err.find("ends at byte 100"), std::string::npos) << err;
}

}  // namespace
}  // namespace ckpt::test
