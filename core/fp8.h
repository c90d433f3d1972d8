// The two FP8 formats of the OCP 8-bit floating point specification (OFP8,
// v1.0) that Hopper/Ada tensor cores and NVIDIA Transformer Engine use:
//
//   E4M3 ("fn": finite, one NaN pattern per sign): s eeee mmm, bias 7.
//     No infinities; S.1111.111 is NaN; the largest finite is S.1111.110 =
//     1.75 * 2^8 = 448; subnormals m * 2^-9.
//   E5M2 (IEEE-like): s eeeee mm, bias 15. S.11111.00 is inf, S.11111.{01,10,11}
//     NaN; the largest finite is 1.75 * 2^15 = 57344; subnormals m * 2^-16.
//     It is the top byte of an IEEE fp16 pattern.
//
// Conversions from fp32 round to nearest, ties to even. Two overflow modes:
//   non-saturating: a value that rounds above the largest finite becomes NaN
//     in E4M3 (it has no inf) and inf in E5M2; +-inf likewise (E4M3: NaN);
//   saturating (PTX cvt.rn.satfinite, what Transformer Engine's casts use):
//     such values, and +-inf, become +-max; NaN stays NaN.
// NaN keeps its sign. E4M3 has one NaN per sign (0x7F / 0xFF); E5M2 gets the
// quiet NaN 0x7E with the fp32 payload's next bit below the quiet bit (the
// fp16 rule of core/numerics.h, truncated to two mantissa bits).
// bf16 and fp16 convert through fp32, which is exact for both, so there is
// no second rounding.
//
// Integer arithmetic on the bit patterns only (like core/numerics.h): the
// results are identical on host and device and independent of FTZ/DAZ.
// Tested against a float64 reference written from the spec
// (tests/core/test_fp8.cpp) and against ml_dtypes' float8_e4m3fn and
// float8_e5m2 (tests/numerics/test_fp8_ml_dtypes.py).
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "core/numerics.h"

namespace mpb {

enum class Fp8Format : uint8_t { E4M3, E5M2 };

constexpr float kE4M3Max = 448.0f;          // 0x7E
constexpr float kE5M2Max = 57344.0f;        // 0x7B
constexpr float kE4M3MinNormal = 0x1p-6f;   // 0x08
constexpr float kE5M2MinNormal = 0x1p-14f;  // 0x04
constexpr float kE4M3MinSubnormal = 0x1p-9f;
constexpr float kE5M2MinSubnormal = 0x1p-16f;
constexpr uint8_t kE4M3MaxBits = 0x7E;
constexpr uint8_t kE4M3NaNBits = 0x7F;
constexpr uint8_t kE5M2MaxBits = 0x7B;
constexpr uint8_t kE5M2InfBits = 0x7C;
constexpr uint8_t kE5M2NaNBits = 0x7E;

MPB_HD inline float fp8_max(Fp8Format f) { return f == Fp8Format::E4M3 ? kE4M3Max : kE5M2Max; }

MPB_HD inline bool e4m3_bits_is_nan(uint8_t c) { return (c & 0x7Fu) == 0x7Fu; }
MPB_HD inline bool e5m2_bits_is_nan(uint8_t c) { return (c & 0x7Fu) > 0x7Cu; }
MPB_HD inline bool e5m2_bits_is_inf(uint8_t c) { return (c & 0x7Fu) == 0x7Cu; }

namespace fp8_detail {

// fp32 -> an 8-bit format with M mantissa bits and exponent bias B whose
// largest finite magnitude code is max_code; the caller decides what
// overflow, inf and NaN become. Returns the magnitude code (without sign),
// which is > max_code when the value overflows (it may exceed 8 bits).
// Precondition: |x| is finite.
template <uint32_t M, uint32_t B>
MPB_HD inline uint32_t round_magnitude(uint32_t ax) {
  constexpr uint32_t drop = 23u - M;                  // fp32 mantissa bits dropped
  constexpr uint32_t min_normal = (127u + 1u - B) << 23;  // fp32 bits of 2^(1-B)
  if (ax >= min_normal) {
    // Normal: rebias the exponent (127 -> B) so that the fp32 pattern reads
    // "fp8 exponent : M kept bits : drop dropped bits", then round to
    // nearest even with one add (as float_to_half_bits does): it carries
    // into the kept bits iff the dropped part is above half, or exactly half
    // with an odd kept lsb. A carry out of the mantissa is the next binade,
    // which is the correct next value; beyond max_code it is overflow.
    uint32_t m = ax - ((127u - B) << 23);
    m += ((1u << (drop - 1u)) - 1u) + ((m >> drop) & 1u);
    return m >> drop;
  }
  // Subnormal result k * 2^(1-B-M), k in 0..2^M (2^M is the smallest normal,
  // whose code is 2^M as well). Values up to half the smallest subnormal
  // (the tie goes to even: 0), and every fp32 subnormal, round to zero.
  constexpr uint32_t half_sub = (127u + 1u - B - M - 1u) << 23;  // 2^(-B-M)
  if (ax <= half_sub) return 0;
  // |x| = mant * 2^(e-150), k = |x| / 2^(1-B-M) = mant >> (150 + 1 - B - M - e);
  // the shift lies in [drop + 1, 24] here.
  const uint32_t e = ax >> 23;
  const uint32_t mant = (ax & 0x007FFFFFu) | 0x00800000u;
  const uint32_t shift = 151u - B - M - e;
  uint32_t k = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (k & 1u))) ++k;
  return k;
}

}  // namespace fp8_detail

// ---- fp32 -> E4M3 ----------------------------------------------------------------
MPB_HD inline uint8_t float_to_e4m3_bits(float f, bool saturate) {
  const uint32_t x = float_to_bits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<uint8_t>(sign | kE4M3NaNBits);
  if (ax == 0x7F800000u) return static_cast<uint8_t>(sign | (saturate ? kE4M3MaxBits : kE4M3NaNBits));
  const uint32_t k = fp8_detail::round_magnitude<3, 7>(ax);
  if (k > kE4M3MaxBits) return static_cast<uint8_t>(sign | (saturate ? kE4M3MaxBits : kE4M3NaNBits));
  return static_cast<uint8_t>(sign | k);
}

// ---- fp32 -> E5M2 ----------------------------------------------------------------
MPB_HD inline uint8_t float_to_e5m2_bits(float f, bool saturate) {
  const uint32_t x = float_to_bits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return static_cast<uint8_t>(sign | kE5M2NaNBits | ((ax >> 21) & 0x01u));
  if (ax == 0x7F800000u) return static_cast<uint8_t>(sign | (saturate ? kE5M2MaxBits : kE5M2InfBits));
  const uint32_t k = fp8_detail::round_magnitude<2, 15>(ax);
  if (k > kE5M2MaxBits) return static_cast<uint8_t>(sign | (saturate ? kE5M2MaxBits : kE5M2InfBits));
  return static_cast<uint8_t>(sign | k);
}

MPB_HD inline uint8_t float_to_fp8_bits(float f, Fp8Format fmt, bool saturate) {
  return fmt == Fp8Format::E4M3 ? float_to_e4m3_bits(f, saturate) : float_to_e5m2_bits(f, saturate);
}

// ---- FP8 -> fp32 (exact) ----------------------------------------------------------
MPB_HD inline float e4m3_bits_to_float(uint8_t c) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0x0Fu;
  const uint32_t m = c & 0x07u;
  if ((c & 0x7Fu) == 0x7Fu) return bits_to_float(sign | 0x7FC00000u);  // the NaN: quiet, signed
  if (e == 0) {
    // Subnormal m * 2^-9: the product is exact in fp32 (a normal number).
    const float v = static_cast<float>(m) * 0x1p-9f;
    return bits_to_float(sign | float_to_bits(v));
  }
  return bits_to_float(sign | ((e + 120u) << 23) | (m << 20));  // rebias 7 -> 127
}

// E5M2 is the top byte of fp16: widening it is fp16's exact widening.
MPB_HD inline float e5m2_bits_to_float(uint8_t c) { return half_bits_to_float(static_cast<uint16_t>(c) << 8); }

MPB_HD inline float fp8_bits_to_float(uint8_t c, Fp8Format fmt) {
  return fmt == Fp8Format::E4M3 ? e4m3_bits_to_float(c) : e5m2_bits_to_float(c);
}

// fp32 -> format -> fp32: what an fp32 becomes when stored in FP8.
MPB_HD inline float round_to_fp8(float f, Fp8Format fmt, bool saturate) {
  return fp8_bits_to_float(float_to_fp8_bits(f, fmt, saturate), fmt);
}

// bf16 / fp16 sources: exact widening to fp32 first, so one rounding only.
MPB_HD inline uint8_t bf16_bits_to_fp8_bits(uint16_t h, Fp8Format fmt, bool saturate) {
  return float_to_fp8_bits(bf16_bits_to_float(h), fmt, saturate);
}
MPB_HD inline uint8_t half_bits_to_fp8_bits(uint16_t h, Fp8Format fmt, bool saturate) {
  return float_to_fp8_bits(half_bits_to_float(h), fmt, saturate);
}

// One element of an FP8 GEMM operand (core/device.h, GemmFp8Operand), the
// quantization both backends run: the code of x * scale, saturating (a NaN
// stays NaN), and whether |x * scale| exceeded the format's max (the
// operand's saturated count). The CPU emulation multiplies code / scale; the
// CUDA path hands the codes to cuBLASLt with 1 / scale as its descale.
struct Fp8Quantized {
  uint8_t code;
  bool saturated;
};
MPB_HD inline Fp8Quantized fp8_quantize(float x, float scale, Fp8Format fmt) {
  const float scaled = x * scale;
  const float fmax = fp8_max(fmt);
  return Fp8Quantized{float_to_fp8_bits(scaled, fmt, /*saturate=*/true), scaled > fmax || scaled < -fmax};
}

}  // namespace mpb
