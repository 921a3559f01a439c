// Decoding the small float formats of checkpoints to float: IEEE half, bfloat16, the OCP FP8
// formats E4M3 (the "fn" variant: no infinities, S.1111.111 is NaN) and E5M2, the E8M0
// exponent-only scale (2^(v-127), 0xFF is NaN) and FP4 E2M1. Exact: every value of these formats
// is representable as a float.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace ckpt::floats {

// By bits (no ldexp: weight decoding calls this per element).
inline float from_f16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  uint32_t man = h & 0x3FF;
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return std::bit_cast<float>(sign);
  uint32_t e = 113;  // subnormal: normalise the mantissa
  while (!(man & 0x400)) {
    man <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (e << 23) | ((man & 0x3FF) << 13));
}

inline float from_bf16(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

inline float from_e4m3(uint8_t v) {
  const int exp = (v >> 3) & 0xF, man = v & 7;
  if (exp == 15 && man == 7) return NAN;
  const float r = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(float(8 + man), exp - 10);
  return (v & 0x80) ? -r : r;
}

inline float from_e5m2(uint8_t v) { return from_f16(uint16_t(uint16_t(v) << 8)); }

inline float from_e8m0(uint8_t v) { return v == 0xFF ? NAN : std::ldexp(1.0f, int(v) - 127); }

// E2M1 code (low 4 bits): sign, 2 exponent bits, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
inline float from_e2m1(uint8_t v) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[v & 7];
  return (v & 8) ? -m : m;
}

}  // namespace ckpt::floats
