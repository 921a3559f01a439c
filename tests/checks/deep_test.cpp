// HS (verify --deep): the bit-pattern kernels against independent oracles, the parallel pass
// against a brute-force scan with tiny reads, and every HS code end to end on checkpoints
// written in a TempDir (plain directories, sparse files, truncated files, HF cache layouts
// with sha256 and git-sha1 etags, --local-dir metadata). Digests come from `sha256sum` and
// `git hash-object`, never from ckpt's own hasher.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "builders.h"
#include "checks/deep_scan.h"

namespace ckpt::ftest {
namespace {

using st::DType;
namespace deep = checks::deep;
using test::run_ckpt;
using test::run_program;

// ---- helpers -----------------------------------------------------------------------------

template <class U>
std::vector<std::byte> bytes_of(const std::vector<U>& v) {
  std::vector<std::byte> b(v.size() * sizeof(U));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<std::byte> f32(std::vector<float> v) { return bytes_of(v); }
std::vector<std::byte> u16(std::vector<uint16_t> v) { return bytes_of(v); }
std::vector<std::byte> u8(std::vector<uint8_t> v) { return bytes_of(v); }

// A filled F32 tensor of n values 0.5, 1.5, ... (no zero, no special value).
std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.5f + static_cast<float>(i % 1000);
  return v;
}

void write_tensors(const fs::path& p, std::vector<st::TensorToWrite> ts) {
  fs::create_directories(p.parent_path());
  ASSERT_EQ(st::write_file(p, std::move(ts)), "") << p;
}

std::vector<Finding> deep_verify(const fs::path& dir) {
  VerifyOptions o;
  o.deep = true;
  return run_checks(load_ok(dir), o);
}
std::vector<Finding> deep_verify(const std::string& target) {
  VerifyOptions o;
  o.deep = true;
  return run_checks(load_ok(target), o);
}
std::vector<Finding> deep_verify(const char* target) { return deep_verify(std::string(target)); }

std::string first_word(const std::string& s) { return s.substr(0, s.find_first_of(" \n")); }

std::string sha256sum(const fs::path& p) {
  auto r = run_program({"sha256sum", p.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return first_word(r.out);
}
std::string git_blob_sha1(const fs::path& p) {
  auto r = run_program({"git", "hash-object", "--no-filters", p.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return first_word(r.out);
}

// Writes `content` as blobs/<digest> (digest of the content by the given tool) and links it.
std::string add_blob(CacheRepo& repo, const std::string& commit, const std::string& rel, const fs::path& content_file,
                     bool lfs) {
  std::string etag = lfs ? sha256sum(content_file) : git_blob_sha1(content_file);
  EXPECT_EQ(etag.size(), lfs ? 64u : 40u);
  fs::copy_file(content_file, repo.dir() / "blobs" / etag);
  repo.link(commit, rel, etag);
  return etag;
}

// Overwrites bytes in place (the cache corruption the HS001 check exists for).
void poke(const fs::path& p, uint64_t offset, const std::string& bytes) {
  FILE* f = std::fopen(p.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, static_cast<long>(offset), SEEK_SET);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

struct Cache {
  TempDir tmp;
  fs::path root = tmp / "hub";
  EnvGuard env{"HF_HUB_CACHE", root.string()};
  CacheRepo repo{root, "org/name"};
};

// ---- kernels -----------------------------------------------------------------------------

deep::ScanResult scan(DType d, const std::vector<std::byte>& b, uint64_t first_index = 0) {
  deep::ScanResult r;
  uint64_t n = b.size() / (st::dtype_bits(d) / 8);
  deep::scan_elements(d, b.data(), n, first_index, r);
  EXPECT_EQ(r.elements, n);
  return r;
}

TEST(hs_checks_kernels, f16_bit_patterns) {
  // +Inf, -Inf, quiet NaN, smallest NaN payload, all-ones NaN, max finite, ±0, 1.0
  auto r = scan(DType::F16, u16({0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x7BFF, 0x0000, 0x8000, 0x3C00}));
  EXPECT_EQ(r.inf, 2u);
  EXPECT_EQ(r.nan, 3u);
  EXPECT_EQ(r.first_inf, 0u);
  EXPECT_EQ(r.first_nan, 2u);
  EXPECT_TRUE(r.nonzero);
}

TEST(hs_checks_kernels, bf16_bit_patterns) {
  auto r = scan(DType::BF16, u16({0x3F80, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFC1}));
  EXPECT_EQ(r.inf, 2u);
  EXPECT_EQ(r.nan, 3u);
  EXPECT_EQ(r.first_inf, 2u);
  EXPECT_EQ(r.first_nan, 4u);
}

TEST(hs_checks_kernels, f8_e4m3fn_has_only_nan_0x7f_and_0xff) {
  // OCP FP8 E4M3 (float8_e4m3fn): no infinities; S.1111.111 is NaN, S.1111.110 is ±448.
  for (int b = 0; b < 256; ++b) {
    auto r = scan(DType::F8_E4M3, u8({static_cast<uint8_t>(b)}));
    EXPECT_EQ(r.nan, (b == 0x7F || b == 0xFF) ? 1u : 0u) << b;
    EXPECT_EQ(r.inf, 0u) << b;
    EXPECT_EQ(r.nonzero, b != 0x00 && b != 0x80) << b;
  }
}

TEST(hs_checks_kernels, f8_e5m2_matches_the_top_byte_of_f16) {
  // E5M2 is the upper byte of an IEEE half: classify through _Float16 as the oracle.
  for (int b = 0; b < 256; ++b) {
    uint16_t h = static_cast<uint16_t>(b << 8);
    _Float16 x;
    std::memcpy(&x, &h, 2);
    float f = static_cast<float>(x);
    auto r = scan(DType::F8_E5M2, u8({static_cast<uint8_t>(b)}));
    EXPECT_EQ(r.nan, std::isnan(f) ? 1u : 0u) << b;
    EXPECT_EQ(r.inf, std::isinf(f) ? 1u : 0u) << b;
  }
}

TEST(hs_checks_kernels, fnuz_and_e8m0_special_values) {
  for (DType d : {DType::F8_E4M3FNUZ, DType::F8_E5M2FNUZ}) {
    auto r = scan(d, u8({0x00, 0x7F, 0xFF, 0x80, 0x01}));
    EXPECT_EQ(r.nan, 1u);  // only 0x80
    EXPECT_EQ(r.first_nan, 3u);
    EXPECT_EQ(r.inf, 0u);
  }
  auto e = scan(DType::F8_E8M0, u8({0x00, 0x7F, 0xFE, 0xFF}));
  EXPECT_EQ(e.nan, 1u);
  EXPECT_EQ(e.first_nan, 3u);
  EXPECT_FALSE(deep::has_zero_value(DType::F8_E8M0));
  EXPECT_FALSE(deep::scannable(DType::I32));
  EXPECT_FALSE(deep::scannable(DType::F4));
}

// Random bit patterns, with the format's Inf/NaN patterns sprinkled in, across many blocks:
// the kernel against the C++ classification of the same bits as float / double / _Float16 /
// bf16-widened-to-float.
template <class U>
void random_against_oracle(DType d, std::function<float(U)> to_float, std::vector<U> specials, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t n : {1u, 255u, 256u, 257u, 1000u, 5000u}) {
    std::vector<U> v(n);
    for (auto& x : v) {
      x = static_cast<U>(rng());
      if (rng() % 4 == 0) x = specials[rng() % specials.size()];
    }
    uint64_t nan = 0, inf = 0, fn = deep::kNone, fi = deep::kNone;
    for (size_t i = 0; i < n; ++i) {
      float f = to_float(v[i]);
      if (std::isnan(f)) {
        ++nan;
        if (fn == deep::kNone) fn = i;
      } else if (std::isinf(f)) {
        ++inf;
        if (fi == deep::kNone) fi = i;
      }
    }
    auto r = scan(d, bytes_of(v), 0);
    EXPECT_EQ(r.nan, nan) << n;
    EXPECT_EQ(r.inf, inf) << n;
    EXPECT_EQ(r.first_nan, fn) << n;
    EXPECT_EQ(r.first_inf, fi) << n;
  }
}

TEST(hs_checks_kernels, random_patterns_match_float_classification) {
  random_against_oracle<uint32_t>(
      DType::F32, [](uint32_t x) { float f; std::memcpy(&f, &x, 4); return f; },
      {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0xFFFFFFFFu, 0x7F7FFFFFu}, 1);
  random_against_oracle<uint16_t>(
      DType::BF16, [](uint16_t x) { uint32_t w = uint32_t(x) << 16; float f; std::memcpy(&f, &w, 4); return f; },
      {0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFFF, 0x7F7F}, 2);
  random_against_oracle<uint16_t>(
      DType::F16, [](uint16_t x) { _Float16 h; std::memcpy(&h, &x, 2); return static_cast<float>(h); },
      {0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x7BFF}, 3);
  random_against_oracle<uint64_t>(
      DType::F64,
      [](uint64_t x) {
        double g; std::memcpy(&g, &x, 8);
        return std::isnan(g) ? NAN : std::isinf(g) ? static_cast<float>(g) : 0.0f;
      },
      {0x7FF0000000000000ull, 0xFFF0000000000000ull, 0x7FF8000000000000ull, 0x7FF0000000000001ull, ~0ull}, 4);
}

TEST(hs_checks_kernels, zero_detection_ignores_the_sign_bit) {
  EXPECT_FALSE(scan(DType::F32, f32({0.0f, -0.0f, 0.0f})).nonzero);
  EXPECT_TRUE(scan(DType::F32, f32({0.0f, 1e-45f})).nonzero);  // a denormal is not zero
  EXPECT_FALSE(scan(DType::BF16, u16(std::vector<uint16_t>(600, 0x8000))).nonzero);
}

// ---- the pass: tiny reads, several threads, misaligned data, against a brute-force scan ----

TEST(hs_checks_pass, chunk_boundaries_split_elements_and_results_match_a_whole_tensor_scan) {
  TempDir d;
  std::mt19937_64 rng(7);
  // An odd 13-byte prefix so every tensor is misaligned; mixed element sizes back to back.
  std::string bytes(13, 'h');
  std::vector<deep::TensorSpan> spans;
  const DType kinds[] = {DType::F32, DType::F16, DType::F8_E5M2, DType::F64, DType::BF16, DType::F8_E4M3};
  for (int t = 0; t < 24; ++t) {
    DType dt = kinds[t % 6];
    uint64_t es = st::dtype_bits(dt) / 8;
    uint64_t n = 1 + rng() % 700;
    spans.push_back({dt, bytes.size(), n * es});
    for (uint64_t i = 0; i < n * es; ++i) {
      uint8_t b = static_cast<uint8_t>(rng() & 0x3F);  // ordinary values...
      if (rng() % 97 == 0) b = 0xFF;                    // ...with the odd all-ones byte (NaN in every format)
      if (t == 5) b = 0;                                // one all-zero tensor
      bytes.push_back(static_cast<char>(b));
    }
  }
  bytes += "tail";
  write_text(d / "data.bin", bytes);

  std::vector<deep::ScanResult> expect(spans.size());
  for (size_t i = 0; i < spans.size(); ++i)
    deep::scan_elements(spans[i].dtype, reinterpret_cast<const std::byte*>(bytes.data()) + spans[i].offset,
                        spans[i].nbytes / (st::dtype_bits(spans[i].dtype) / 8), 0, expect[i]);
  uint64_t total_nan = 0;
  for (const auto& e : expect) total_nan += e.nan;
  ASSERT_GT(total_nan, 5u);
  EXPECT_FALSE(expect[5].nonzero);

  for (size_t read : {64u, 67u, 100u, 4096u, 1u << 20}) {
    for (unsigned threads : {1u, 2u, 3u}) {
      for (bool hashed : {false, true}) {
        deep::FileJob job{d / "data.bin", hashed ? hub::detail::EtagKind::sha256 : hub::detail::EtagKind::opaque, spans};
        deep::Options o;
        o.threads = threads;
        o.read_bytes = read;
        o.split_bytes = 300;  // many independent ranges
        deep::Stats stats;
        auto res = deep::run({job}, o, &stats);
        ASSERT_EQ(res.size(), 1u);
        EXPECT_EQ(res[0].error, "");
        if (hashed) {
          EXPECT_EQ(res[0].digest, sha256sum(d / "data.bin"));
          EXPECT_EQ(res[0].bytes_read, bytes.size());
        }
        for (size_t i = 0; i < spans.size(); ++i) {
          const auto& g = res[0].tensors[i];
          const auto& e = expect[i];
          SCOPED_TRACE("read " + std::to_string(read) + " threads " + std::to_string(threads) + " tensor " +
                       std::to_string(i) + (hashed ? " hashed" : ""));
          EXPECT_EQ(g.elements, e.elements);
          EXPECT_EQ(g.nan, e.nan);
          EXPECT_EQ(g.inf, e.inf);
          EXPECT_EQ(g.first_nan, e.first_nan);
          EXPECT_EQ(g.first_inf, e.first_inf);
          EXPECT_EQ(g.nonzero, e.nonzero);
        }
      }
    }
  }
}

TEST(hs_checks_pass, spans_past_the_end_of_the_file_scan_only_whole_elements_present) {
  TempDir d;
  write_text(d / "short.bin", std::string(10, '\x3f'));  // 2 whole F32 values and 2 stray bytes
  deep::FileJob job{d / "short.bin", hub::detail::EtagKind::opaque, {{DType::F32, 0, 400}, {DType::F32, 200, 8}}};
  deep::Options o;
  o.read_bytes = 64;
  auto res = deep::run({job}, o);
  EXPECT_EQ(res[0].error, "");
  EXPECT_EQ(res[0].tensors[0].elements, 2u);
  EXPECT_EQ(res[0].tensors[1].elements, 0u);
}

TEST(hs_checks_pass, HS005_read_errors_are_reported_not_fatal) {
  TempDir d;
  fs::create_directories(d / "dir");
  write_text(d / "ok.bin", "abc");
  deep::FileJob bad{d / "dir", hub::detail::EtagKind::sha256, {}};
  deep::FileJob gone{d / "missing", hub::detail::EtagKind::sha256, {}};
  deep::FileJob ok{d / "ok.bin", hub::detail::EtagKind::sha256, {}};
  auto res = deep::run({bad, gone, ok});
  EXPECT_TRUE(contains(res[0].error, "read failed")) << res[0].error;
  EXPECT_EQ(res[0].digest, "");
  EXPECT_TRUE(contains(res[1].error, "cannot open")) << res[1].error;
  EXPECT_EQ(res[2].error, "");
  EXPECT_EQ(res[2].digest, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");  // sha256("abc")
}

TEST(hs_checks, HS005_a_file_swapped_for_a_symlink_after_the_walk_is_not_followed) {
  TempDir d, outside;
  write_tensors(d / "model.safetensors", {{"w", DType::F32, {64}, f32(ramp(64))}});
  auto v = ramp(64);
  v[0] = NAN;
  write_tensors(outside / "other.safetensors", {{"w", DType::F32, {64}, f32(v)}});
  Checkpoint ck = load_ok(d.path());
  fs::remove(d / "model.safetensors");
  fs::create_symlink(outside / "other.safetensors", d / "model.safetensors");
  VerifyOptions o;
  o.deep = true;
  auto hs = only(run_checks(ck, o), {"HS"});
  ASSERT_EQ(hs.size(), 1u) << dump(hs);
  const Finding* f = find(hs, "HS005", "model.safetensors");
  ASSERT_NE(f, nullptr) << dump(hs);
  EXPECT_EQ(f->severity, Severity::error);
  EXPECT_TRUE(contains(f->message, "cannot open")) << f->message;
}

TEST(hs_checks_pass, git_blob_sha1_of_known_contents) {
  TempDir d;
  write_text(d / "empty", "");
  write_text(d / "hello", "hello\n");
  auto res = deep::run({{d / "empty", hub::detail::EtagKind::git_sha1, {}}, {d / "hello", hub::detail::EtagKind::git_sha1, {}}});
  EXPECT_EQ(res[0].digest, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");  // git's empty blob
  EXPECT_EQ(res[1].digest, "ce013625030ba8dba906f756967f9e9ca394464a");  // `echo hello | git hash-object --stdin`
}

// ---- HS002 / HS003: NaN and Inf -------------------------------------------------------------

TEST(hs_checks, clean_filled_checkpoint_has_no_hs_finding) {
  TempDir d;
  write_tensors(d / "model.safetensors", {{"a.weight", DType::F32, {4, 8}, f32(ramp(32))},
                                          {"b.bias", DType::F32, {8}, f32(std::vector<float>(8, 0.0f))},
                                          {"c.weight", DType::F16, {64}, u16(std::vector<uint16_t>(64, 0x3C00))}});
  auto all = deep_verify(d.path());
  EXPECT_TRUE(only(all, {"HS"}).empty()) << dump(all);
}

TEST(hs_checks, HS002_nan_in_f32_names_tensor_count_and_first_index) {
  TempDir d;
  auto v = ramp(12 * 100);
  v[3 * 100 + 7] = NAN;
  v[5 * 100] = -NAN;
  write_tensors(d / "model.safetensors", {{"layers.0.w", DType::F32, {12, 100}, f32(v)}, {"ok.weight", DType::F32, {64}, f32(ramp(64))}});
  // Opt-in: without --deep no data is read and nothing is reported.
  EXPECT_TRUE(only(verify(d.path()), {"HS"}).empty());
  auto all = deep_verify(d.path());
  auto hs = only(all, {"HS"});
  ASSERT_EQ(hs.size(), 1u) << dump(all);
  const Finding* f = find(hs, "HS002", "model.safetensors", "layers.0.w");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_EQ(f->severity, Severity::error);
  EXPECT_TRUE(contains(f->message, "2 of 1200 F32 values are NaN")) << f->message;
  EXPECT_TRUE(contains(f->message, "index [3, 7]")) << f->message;
}

TEST(hs_checks, HS003_inf_in_f16_hints_at_the_f16_range) {
  TempDir d;
  std::vector<uint16_t> h(300, 0x3C00);
  h[299] = 0xFC00;  // -Inf
  write_tensors(d / "model.safetensors", {{"mlp.down_proj.weight", DType::F16, {3, 100}, u16(h)}});
  auto hs = only(deep_verify(d.path()), {"HS"});
  ASSERT_EQ(hs.size(), 1u) << dump(hs);
  const Finding* f = find(hs, "HS003", "model.safetensors", "mlp.down_proj.weight");
  ASSERT_NE(f, nullptr) << dump(hs);
  EXPECT_TRUE(contains(f->message, "1 of 300 F16 values are +/-Inf, the first at index [2, 99]")) << f->message;
  EXPECT_TRUE(contains(f->hint, "65504")) << f->hint;
}

TEST(hs_checks, bf16_tensor_with_nan_and_inf_gets_both_codes) {
  TempDir d;
  std::vector<uint16_t> h(40, 0x3F80);
  h[1] = 0x7FC0;
  h[2] = 0x7F80;
  write_tensors(d / "model.safetensors", {{"w", DType::BF16, {40}, u16(h)}});
  auto hs = only(deep_verify(d.path()), {"HS"});
  EXPECT_NE(find(hs, "HS002", "model.safetensors", "w"), nullptr) << dump(hs);
  EXPECT_NE(find(hs, "HS003", "model.safetensors", "w"), nullptr) << dump(hs);
  EXPECT_TRUE(contains(find(hs, "HS002")->message, "index [1]")) << dump(hs);
}

TEST(hs_checks, f8_patterns_e4m3_nan_only_e5m2_inf_and_nan) {
  TempDir d;
  std::vector<uint8_t> e4(32, 0x38), e5(32, 0x3C), e4_clean(32, 0x7E);  // 0x7E = 448, the E4M3 maximum
  e4[9] = 0xFF;
  e5[4] = 0x7C;   // +Inf
  e5[20] = 0xFE;  // NaN
  write_tensors(d / "model.safetensors", {{"a.weight", DType::F8_E4M3, {32}, u8(e4)},
                                          {"b.weight", DType::F8_E5M2, {32}, u8(e5)},
                                          {"c.weight", DType::F8_E4M3, {32}, u8(e4_clean)},
                                          {"c.weight_scale_inv", DType::F32, {1}, f32({0.5f})},
                                          {"packed.qweight", DType::I32, {8}, bytes_of(std::vector<int32_t>(8, -1))}});
  auto hs = only(deep_verify(d.path()), {"HS"});
  const Finding* a = find(hs, "HS002", "model.safetensors", "a.weight");
  ASSERT_NE(a, nullptr) << dump(hs);
  EXPECT_TRUE(contains(a->message, "1 of 32 F8_E4M3 values are NaN, the first at index [9]")) << a->message;
  EXPECT_EQ(find(hs, "HS003", "model.safetensors", "a.weight"), nullptr);
  EXPECT_NE(find(hs, "HS002", "model.safetensors", "b.weight"), nullptr) << dump(hs);
  EXPECT_NE(find(hs, "HS003", "model.safetensors", "b.weight"), nullptr) << dump(hs);
  EXPECT_EQ(find(hs, "HS002", std::nullopt, "c.weight"), nullptr) << dump(hs);
  EXPECT_EQ(find(hs, "HS002", std::nullopt, "packed.qweight"), nullptr) << "integer tensors are not scanned";
  EXPECT_EQ(hs.size(), 3u) << dump(hs);
}

TEST(hs_checks, many_bad_tensors_in_one_file_are_capped_and_summed_up) {
  TempDir d;
  std::vector<st::TensorToWrite> ts;
  for (int i = 0; i < 20; ++i) {
    auto v = ramp(4);
    v[0] = NAN;
    ts.push_back({"layers." + std::to_string(i) + ".w", DType::F32, {4}, f32(v)});
  }
  write_tensors(d / "model.safetensors", ts);
  auto hs = only(deep_verify(d.path()), {"HS"});
  auto nan = with_code(hs, "HS002");
  ASSERT_EQ(nan.size(), 9u) << dump(hs);
  int summaries = 0;
  for (const auto* f : nan)
    if (f->tensor.empty()) {
      ++summaries;
      EXPECT_TRUE(contains(f->message, "12 more tensors in this file hold NaN values")) << f->message;
    }
  EXPECT_EQ(summaries, 1);
}

// ---- HS004: all-zero float weights ---------------------------------------------------------

TEST(hs_checks, HS004_sparse_hole_shard_is_reported_as_never_written) {
  TempDir d;
  // The library writer leaves tensors without data as holes: a preallocated, never-filled file.
  write_st(d / "model.safetensors", {{"model.embed_tokens.weight", DType::BF16, {1024, 512}},
                                     {"model.norm.weight", DType::F32, {8}},        // too small to judge
                                     {"model.layers.0.q_proj.bias", DType::F16, {4096}}});  // biases may be zero
  auto all = deep_verify(d.path());
  auto hs = only(all, {"HS"});
  ASSERT_EQ(hs.size(), 1u) << dump(all);
  const Finding* f = find(hs, "HS004", "model.safetensors", "model.embed_tokens.weight");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_EQ(f->severity, Severity::warning);
  EXPECT_TRUE(contains(f->message, "all 524288 BF16 values of shape [1024, 512] are zero")) << f->message;
  EXPECT_TRUE(contains(f->message, "hole in a sparse file")) << f->message;
}

TEST(hs_checks, HS004_written_zeros_are_reported_without_the_hole_note) {
  TempDir d;
  write_tensors(d / "model.safetensors", {{"lm_head.weight", DType::F32, {64, 64}, f32(std::vector<float>(4096, -0.0f))},
                                          {"x.weight", DType::F32, {64}, f32(ramp(64))}});
  auto hs = only(deep_verify(d.path()), {"HS"});
  ASSERT_EQ(hs.size(), 1u) << dump(hs);
  const Finding* f = find(hs, "HS004", "model.safetensors", "lm_head.weight");
  ASSERT_NE(f, nullptr) << dump(hs);
  EXPECT_FALSE(contains(f->message, "hole")) << f->message;
}

// ---- broken files: scan what is in range, never crash ---------------------------------------

TEST(hs_checks, file_shorter_than_its_header_says_scans_the_present_part) {
  TempDir d;
  auto v = ramp(1000);
  v[10] = NAN;
  write_tensors(d / "model.safetensors", {{"a.weight", DType::F32, {1000}, f32(v)}, {"b.weight", DType::F32, {1000}, f32(ramp(1000))}});
  uint64_t full = fs::file_size(d / "model.safetensors");
  fs::resize_file(d / "model.safetensors", full - 4000 - 2000);  // b gone, a cut in the middle of a value
  auto all = deep_verify(d.path());
  EXPECT_NE(find(all, "ST014", "model.safetensors"), nullptr) << dump(all);
  auto hs = only(all, {"HS"});
  ASSERT_EQ(hs.size(), 1u) << dump(all);
  const Finding* f = find(hs, "HS002", "model.safetensors", "a.weight");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_TRUE(contains(f->message, "1 of the 500 F32 values that could be read (of 1000)")) << f->message;
}

TEST(hs_checks, unreadable_headers_and_odd_layouts_do_not_crash) {
  TempDir d;
  write_text(d / "a.safetensors", "garbage");
  write_raw_st(d / "b.safetensors", "{\"t\": 12}", 10);
  write_raw_st(d / "c.safetensors",
               R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
               R"("z":{"dtype":"F16","shape":[18446744073709551615,2],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551600,18446744073709551615]}})",
               16);
  write_text(d / "empty.safetensors", "");
  auto all = deep_verify(d.path());
  EXPECT_NE(find(all, "ST013"), nullptr) << dump(all);
  // Overlapping x and y are both scanned (zeros; too small to judge); nothing else to say.
  for (const auto& f : all)
    if (in_family(f, {"HS"})) ADD_FAILURE() << dump(all);
}

TEST(hs_checks, corpus_safetensors_vectors_verify_deep_without_crashing) {
  CKPT_REQUIRE_CORPUS();
  int n = 0;
  for (const auto& e : fs::directory_iterator(test::corpus_dir() / "safetensors-vectors")) {
    if (e.path().extension() != ".safetensors") continue;
    TempDir d;
    fs::copy_file(e.path(), d / "model.safetensors");
    auto all = deep_verify(d.path());
    for (const auto& f : all)
      if (f.code == "HS005") ADD_FAILURE() << e.path() << "\n" << dump(all);
    ++n;
  }
  EXPECT_GE(n, 20);
}

// ---- HS001: hashes against the HF cache's etags -------------------------------------------

TEST(hs_checks, HS001_clean_cache_both_etag_kinds_match) {
  Cache c;
  TempDir src;
  write_tensors(src / "model.safetensors", {{"w", DType::F32, {256}, f32(ramp(256))}});
  write_text(src / "config.json", R"({"model_type": "llama"})");
  add_blob(c.repo, kCommitA, "model.safetensors", src / "model.safetensors", true);
  add_blob(c.repo, kCommitA, "config.json", src / "config.json", false);
  c.repo.ref("main", kCommitA);
  auto all = deep_verify("org/name");
  EXPECT_TRUE(only(all, {"HS"}).empty()) << dump(all);
}

TEST(hs_checks, HS001_tampered_lfs_blob_names_file_expected_and_actual_sha256) {
  Cache c;
  TempDir src;
  write_tensors(src / "model.safetensors", {{"w", DType::F32, {4096}, f32(ramp(4096))}});
  write_text(src / "config.json", R"({"model_type": "llama"})");
  std::string etag = add_blob(c.repo, kCommitA, "model.safetensors", src / "model.safetensors", true);
  add_blob(c.repo, kCommitA, "config.json", src / "config.json", false);
  c.repo.ref("main", kCommitA);
  fs::path blob = c.repo.dir() / "blobs" / etag;
  poke(blob, fs::file_size(blob) - 1000, "\x01\x02\x03\x04");  // a finite value overwritten in place
  std::string actual = sha256sum(blob);
  ASSERT_NE(actual, etag);
  auto all = deep_verify("org/name");
  auto hs = only(all, {"HS"});
  ASSERT_EQ(hs.size(), 1u) << dump(all);
  const Finding* f = find(hs, "HS001", "model.safetensors");
  ASSERT_NE(f, nullptr) << dump(all);
  EXPECT_EQ(f->severity, Severity::error);
  EXPECT_TRUE(contains(f->message, "has sha256 " + actual)) << f->message;
  EXPECT_TRUE(contains(f->message, "its cache blob is named " + etag)) << f->message;
  EXPECT_TRUE(contains(f->message, "the bytes do not match the sha256 they were stored under")) << f->message;
  // It does not claim a change after download: another client may never have checked the bytes.
  EXPECT_FALSE(contains(f->message + f->hint, "changed after download")) << f->message << f->hint;
  EXPECT_TRUE(contains(f->hint, "never checked")) << f->hint;
  EXPECT_TRUE(contains(f->hint, "blobs/" + etag)) << f->hint;
}

TEST(hs_checks, HS001_tampered_git_blob_and_truncated_lfs_blob) {
  Cache c;
  TempDir src;
  write_tensors(src / "model.safetensors", {{"w", DType::F32, {4096}, f32(ramp(4096))}});
  write_text(src / "tokenizer_config.json", R"({"bos_token": "<s>"})");
  std::string st_etag = add_blob(c.repo, kCommitA, "model.safetensors", src / "model.safetensors", true);
  std::string tk_etag = add_blob(c.repo, kCommitA, "tokenizer_config.json", src / "tokenizer_config.json", false);
  c.repo.ref("main", kCommitA);
  write_text(c.repo.dir() / "blobs" / tk_etag, R"({"bos_token": "<S>"})");
  fs::resize_file(c.repo.dir() / "blobs" / st_etag, fs::file_size(c.repo.dir() / "blobs" / st_etag) / 2);
  auto all = deep_verify("org/name");
  const Finding* tk = find(all, "HS001", "tokenizer_config.json");
  ASSERT_NE(tk, nullptr) << dump(all);
  EXPECT_TRUE(contains(tk->message, "has git blob sha1 " + git_blob_sha1(c.repo.dir() / "blobs" / tk_etag)))
      << tk->message;
  EXPECT_TRUE(contains(tk->message, tk_etag)) << tk->message;
  EXPECT_NE(find(all, "HS001", "model.safetensors"), nullptr) << dump(all);
  EXPECT_NE(find(all, "ST014", "model.safetensors"), nullptr) << dump(all);
}

TEST(hs_checks, HS001_two_entries_sharing_a_blob_are_hashed_once) {
  Cache c;
  TempDir src;
  write_text(src / "a.json", "{}");
  std::string etag = add_blob(c.repo, kCommitA, "config.json", src / "a.json", false);
  c.repo.link(kCommitA, "generation_config.json", etag);
  write_st(c.repo.dir() / "blobs" / "f000000000000000000000000000000000000000", {{"w"}});
  c.repo.link(kCommitA, "model.safetensors", "f000000000000000000000000000000000000000");  // a wrong etag
  c.repo.ref("main", kCommitA);
  write_text(c.repo.dir() / "blobs" / etag, "{ }");
  auto hs = only(deep_verify("org/name"), {"HS"});
  auto h1 = with_code(hs, "HS001");
  ASSERT_EQ(h1.size(), 2u) << dump(hs);
  const Finding* f = find(hs, "HS001", "config.json");
  ASSERT_NE(f, nullptr) << dump(hs);
  EXPECT_TRUE(contains(f->message, "also generation_config.json")) << f->message;
}

TEST(hs_checks, cache_entries_with_opaque_etags_and_plain_dirs_are_not_hashed) {
  Cache c;
  c.repo.add_text(kCommitA, "config.json", "{}", "not-a-hash-etag");
  c.repo.ref("main", kCommitA);
  EXPECT_TRUE(only(deep_verify("org/name"), {"HS"}).empty());
  TempDir d;
  write_text(d / "config.json", "{}");
  write_tensors(d / "model.safetensors", {{"w", DType::F32, {64}, f32(ramp(64))}});
  EXPECT_TRUE(only(deep_verify(d.path()), {"HS"}).empty());
}

// ---- HS001: --local-dir download metadata --------------------------------------------------

void set_mtime(const fs::path& p, double unix_seconds) {
  struct timeval tv[2];
  tv[0].tv_sec = tv[1].tv_sec = static_cast<time_t>(unix_seconds);
  tv[0].tv_usec = tv[1].tv_usec = 0;
  ASSERT_EQ(::utimes(p.c_str(), tv), 0);
}

TEST(hs_checks, HS001_local_dir_metadata_etag_checked_while_it_describes_the_file) {
  TempDir d;
  write_tensors(d / "model.safetensors", {{"w", DType::F32, {256}, f32(ramp(256))}});
  std::string etag = sha256sum(d / "model.safetensors");
  const double ts = 1700000000.5;
  write_text(d / ".cache/huggingface/download/model.safetensors.metadata",
             std::string(kCommitA) + "\n" + etag + "\n" + std::to_string(ts) + "\n");
  set_mtime(d / "model.safetensors", ts - 10);
  EXPECT_TRUE(only(deep_verify(d.path()), {"HS"}).empty());

  poke(d / "model.safetensors", 200, "\x11");  // silent corruption: the mtime is put back
  set_mtime(d / "model.safetensors", ts - 10);
  auto hs = only(deep_verify(d.path()), {"HS"});
  const Finding* f = find(hs, "HS001", "model.safetensors");
  ASSERT_NE(f, nullptr) << dump(hs);
  EXPECT_TRUE(contains(f->message, ".cache/huggingface/download/model.safetensors.metadata records " + etag)) << f->message;

  // Edited after the download (newer than the metadata): huggingface_hub itself ignores the
  // metadata then, and so does ckpt.
  set_mtime(d / "model.safetensors", ts + 100);
  EXPECT_TRUE(only(deep_verify(d.path()), {"HS"}).empty());
}

// ---- do no harm + the CLI ------------------------------------------------------------------

TEST(hs_checks, deep_verify_leaves_every_file_byte_identical_with_its_times) {
  Cache c;
  TempDir src;
  auto v = ramp(512);
  v[1] = NAN;
  write_tensors(src / "model.safetensors", {{"w", DType::F32, {512}, f32(v)}});
  write_text(src / "config.json", R"({"model_type": "llama"})");
  add_blob(c.repo, kCommitA, "model.safetensors", src / "model.safetensors", true);
  add_blob(c.repo, kCommitA, "config.json", src / "config.json", false);
  c.repo.ref("main", kCommitA);
  write_st(c.repo.snapshot(kCommitA) / "extra.safetensors", {{"hole.weight", DType::F32, {1024}}});
  auto before = tree_state(c.root);
  auto r = run_ckpt({"verify", "--deep", "--format", "json", "org/name"}, {"HF_HUB_CACHE=" + c.root.string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "\"HS002\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"HS004\"")) << r.out;
  auto after = tree_state(c.root);
  EXPECT_TRUE(before == after) << "verify --deep changed the cache";
}

TEST(hs_cli, deep_exit_codes_and_formats) {
  TempDir d;
  write_tensors(d / "model.safetensors", {{"w", DType::F32, {64}, f32(ramp(64))}});
  write_text(d / "config.json", R"({"model_type": "llama"})");
  auto ok = run_ckpt({"verify", "--deep", "--select", "HS", d.path().string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;

  auto v = ramp(64);
  v[63] = INFINITY;
  write_tensors(d / "model.safetensors", {{"w", DType::F32, {64}, f32(v)}});
  auto bad = run_ckpt({"verify", "--deep", "--format", "github", "--select", "HS", d.path().string()});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_TRUE(contains(bad.out, "::error")) << bad.out;
  EXPECT_TRUE(contains(bad.out, "HS003")) << bad.out;
  auto ignored = run_ckpt({"verify", "--deep", "--select", "HS", "--ignore", "HS003", d.path().string()});
  EXPECT_EQ(ignored.exit_code, 0) << ignored.out;
}

TEST(hs_cli, fixtures_are_clean_under_deep) {
  TempDir d;
  auto f = run_ckpt({"fixture", "llama", (d / "m").string()});
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  auto r = run_ckpt({"verify", "--deep", "--select", "HS", "--format", "json", (d / "m").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(contains(r.out, "\"HS")) << r.out;
}

TEST(hs_checks, every_hs_code_is_registered_and_documented) {
  std::string docs = read_text(fs::path(CKPT_SOURCE_DIR) / "docs/checks.md");
  int n = 0;
  for (const auto& c : all_checks()) {
    std::string code(c.code);
    if (code.rfind("HS", 0) != 0) continue;
    ++n;
    EXPECT_TRUE(contains(docs, "## " + code + " — ")) << code << " is not documented in docs/checks.md";
  }
  EXPECT_EQ(n, 6);  // HS006 (quantized GGUF block scales) comes from src/checks/gguf_deep.cpp
}

}  // namespace
}  // namespace ckpt::ftest
