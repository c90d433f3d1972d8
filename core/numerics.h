// Bit-exact number formats shared by the CPU and CUDA backends: fp16 (IEEE
// binary16), bf16 (bfloat16) and the TF32 rounding that tensor cores apply to
// fp32 GEMM operands.
//
// Everything here is integer arithmetic on the bit patterns, so the results do
// not depend on the FP environment (rounding mode, FTZ/DAZ, nvcc -ftz, x87
// excess precision) and are identical on host and device. The functions are
// plain inline functions; under nvcc they are __host__ __device__. No
// intrinsics headers, no CUDA headers, no std:: calls.
//
// Tested exhaustively / against independent references and against the CPU's
// own F16C and AVX512-BF16 conversion instructions in tests/core/test_numerics.cpp.
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "core/isa_namespace.h"

namespace mpb {

// ---- storage types -------------------------------------------------------------
// Plain 2-byte PODs that only carry the bits; arithmetic goes through float.
struct half_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};
static_assert(sizeof(half_t) == 2 && alignof(half_t) == 2, "half_t must be 2 bytes");
static_assert(sizeof(bf16_t) == 2 && alignof(bf16_t) == 2, "bf16_t must be 2 bytes");

// The functions below (not the storage types above, which other code names in
// its signatures) are per ISA in the CPU kernels: core/isa_namespace.h.
MPB_ISA_NAMESPACE_BEGIN

MPB_HD inline half_t half_from_bits(uint16_t b) {
  half_t h;
  h.bits = b;
  return h;
}
MPB_HD inline bf16_t bf16_from_bits(uint16_t b) {
  bf16_t h;
  h.bits = b;
  return h;
}

// ---- fp32 bit casts ------------------------------------------------------------
// Device: the CUDA intrinsics (free register moves). Host: __builtin_memcpy,
// which gcc/clang lower to a single movd and which is well defined (no type
// punning through unions or reinterpret_cast).
MPB_HD inline uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  __builtin_memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

MPB_HD inline float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  __builtin_memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// ---- constants -----------------------------------------------------------------
constexpr float kHalfMax = 65504.0f;               // 0x7BFF
constexpr float kHalfMinNormal = 0x1p-14f;         // 0x0400, 6.103515625e-05
constexpr float kHalfMinSubnormal = 0x1p-24f;      // 0x0001, 5.9604644775390625e-08
constexpr float kHalfEpsilon = 0x1p-10f;           // 1.0 to the next half
constexpr float kHalfOverflowThreshold = 65520.0f;  // kHalfMax + ulp/2: |x| >= this rounds to inf
constexpr float kBf16Max = 0x1.FEp127f;            // 0x7F7F, 3.38953139e38
constexpr float kBf16MinNormal = 0x1p-126f;        // 0x0080 (same as fp32)
constexpr float kBf16MinSubnormal = 0x1p-133f;     // 0x0001
constexpr float kBf16Epsilon = 0x1p-7f;
constexpr float kTf32Max = 0x1.FFCp127f;           // fp32 bits 0x7F7FE000, 3.40116213e38
constexpr float kTf32Epsilon = 0x1p-10f;

constexpr uint16_t kHalfPosInfBits = 0x7C00;
constexpr uint16_t kHalfCanonicalNaNBits = 0x7E00;
constexpr uint16_t kBf16PosInfBits = 0x7F80;
constexpr uint16_t kBf16CanonicalNaNBits = 0x7FC0;

// ---- classification on bit patterns ----------------------------------------------
MPB_HD inline bool half_bits_is_nan(uint16_t h) { return (h & 0x7FFFu) > 0x7C00u; }
MPB_HD inline bool half_bits_is_inf(uint16_t h) { return (h & 0x7FFFu) == 0x7C00u; }
MPB_HD inline bool half_bits_is_finite(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }
MPB_HD inline bool bf16_bits_is_nan(uint16_t h) { return (h & 0x7FFFu) > 0x7F80u; }
MPB_HD inline bool bf16_bits_is_inf(uint16_t h) { return (h & 0x7FFFu) == 0x7F80u; }
MPB_HD inline bool bf16_bits_is_finite(uint16_t h) { return (h & 0x7F80u) != 0x7F80u; }
MPB_HD inline bool f32_bits_is_nan(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }
MPB_HD inline bool f32_bits_is_finite(uint32_t u) { return (u & 0x7F800000u) != 0x7F800000u; }

// ---- fp32 -> fp16 ----------------------------------------------------------------
// Round to nearest, ties to even; correct subnormals; |x| >= 65520 -> +-inf;
// NaN -> quiet NaN with the same sign and the top 9 payload bits.
MPB_HD inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_to_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;

  if (ax >= 0x7F800000u) {  // inf or NaN
    if (ax == 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u);
    // NaN: keep the sign and the top payload bits (fp32 mantissa bits 22..13
    // are fp16 mantissa bits 9..0; bit 22 / bit 9 is the quiet bit). Forcing
    // the quiet bit makes the mantissa non-zero, so a NaN whose payload sits
    // only in the dropped low bits can never turn into inf.
    return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x03FFu));
  }
  if (ax >= 0x477FF000u) {  // |x| >= 65520 = 65504 + ulp(65504)/2: ties go to "65536" (even) = inf
    return static_cast<uint16_t>(sign | 0x7C00u);
  }
  if (ax >= 0x38800000u) {  // |x| >= 2^-14: the result is a normal half (or rounds up to the next binade)
    // Rebias the exponent from 127 to 15 (subtract 112 << 23); the fp32
    // layout is then "half exponent : 10 kept mantissa bits : 13 dropped bits".
    uint32_t m = ax - 0x38000000u;
    // Round to nearest even by integer addition: adding 0xFFF plus the lowest
    // kept bit carries into the kept bits exactly when the dropped part is
    // > 0x1000 (above half), or == 0x1000 (a tie) and the kept lsb is odd.
    // A carry out of the mantissa increments the exponent, which is exactly
    // the next representable value (1.111..1 x 2^e rounds up to 1.0 x 2^(e+1)).
    // It cannot reach the inf encoding because |x| < 65520 here.
    m += 0x0FFFu + ((m >> 13) & 1u);
    return static_cast<uint16_t>(sign | (m >> 13));
  }
  // |x| < 2^-14: the result is a half subnormal k * 2^-24 (k in 0..1024;
  // k == 1024 is 0x0400, the smallest normal, which the encoding handles by
  // itself). |x| <= 2^-25 (half of the smallest subnormal; the tie goes to
  // even, i.e. 0) rounds to signed zero, and so do all fp32 subnormals.
  if (ax <= 0x33000000u) return static_cast<uint16_t>(sign);
  // Here 2^-25 < |x| < 2^-14, so x is a normal fp32: |x| = mant * 2^(e-150)
  // with the implicit bit restored, and k = |x| / 2^-24 = mant >> (126 - e),
  // shift between 14 (e = 112) and 24 (e = 102).
  const uint32_t e = ax >> 23;
  const uint32_t mant = (ax & 0x007FFFFFu) | 0x00800000u;
  const uint32_t shift = 126u - e;
  uint32_t k = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (k & 1u))) ++k;  // nearest, ties to even
  return static_cast<uint16_t>(sign | k);
}

// ---- fp16 -> fp32 (exact) ------------------------------------------------------------
MPB_HD inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  uint32_t m = h & 0x03FFu;
  if (e == 0x1Fu) {
    // inf, or NaN with its payload (and quiet bit) moved to the top of the
    // fp32 mantissa: bit-exact, a signaling half NaN stays signaling.
    return bits_to_float(sign | 0x7F800000u | (m << 13));
  }
  if (e == 0) {
    if (m == 0) return bits_to_float(sign);  // signed zero
    // Subnormal m * 2^-24: normalise. Start from the exponent of 2^-14
    // (biased 113) and shift until the implicit bit (bit 10) is set; at most
    // 10 iterations (m == 1 ends at biased 103, i.e. 2^-24).
    uint32_t e32 = 113;
    while ((m & 0x0400u) == 0) {
      m <<= 1;
      --e32;
    }
    return bits_to_float(sign | (e32 << 23) | ((m & 0x03FFu) << 13));
  }
  // Normal: rebias 15 -> 127 (+112), widen the mantissa.
  return bits_to_float(sign | ((e + 112u) << 23) | (m << 13));
}

// ---- fp32 -> bf16 ----------------------------------------------------------------
// Round to nearest, ties to even; subnormals rounded correctly (not flushed);
// overflow -> +-inf; NaN -> quiet NaN with the same sign and top payload bits.
MPB_HD inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: truncate and set the quiet bit (bf16 bit 6 = fp32 bit 22). Without
    // this, a NaN with payload only in the low 16 bits would truncate to inf,
    // and the rounding addition below could carry a NaN into inf or the sign.
    return static_cast<uint16_t>((x >> 16) | 0x0040u);
  }
  // Round to nearest even with one integer add: bf16 is the top half of the
  // fp32 pattern. Adding 0x7FFF carries into bit 16 iff the dropped 16 bits
  // are > 0x8000; adding the kept lsb as well makes the exact tie 0x8000
  // carry only when the kept lsb is odd (-> even result). Carries propagate
  // into the exponent, which is the correct next value; the largest finite
  // values round up to 0x7F80 = inf as IEEE requires. +-inf (mantissa 0,
  // lsb 0) gets + 0x7FFF, which never carries, so it stays inf. The same
  // arithmetic is uniform across the subnormal range (spacing 2^-133) and
  // rounds up into the smallest normal correctly.
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// ---- bf16 -> fp32 (exact) ------------------------------------------------------------
MPB_HD inline float bf16_bits_to_float(uint16_t h) {
  return bits_to_float(static_cast<uint32_t>(h) << 16);
}

// ---- TF32 ----------------------------------------------------------------------------
// TF32 = fp32 with 10 explicit mantissa bits (sign, 8-bit exponent, 10 bits;
// fp32 range, subnormals included). The functions return the fp32 value of the
// TF32 number, i.e. an fp32 whose low 13 mantissa bits are zero.
//
// What NVIDIA does when fp32 GEMM operands go to TF32 tensor cores (cuBLAS
// CUBLAS_COMPUTE_32F_FAST_TF32 / CUBLAS_TF32_TENSOR_OP_MATH, CUTLASS):
//
//  * The MMA hardware itself does not round: an mma/wgmma .tf32 operand is a
//    32-bit register (or shared-memory word) of which only the top 19 bits
//    are used; the low 13 bits are "don't care". Evidence: CUTLASS
//    include/cutlass/tfloat32.h keeps unrounded low bits in tfloat32_t's
//    storage and converts to float by clearing them (storage & ~0x1fff);
//    PyTorch docs/source/notes/numerical_accuracy.rst (PR #79537): "only the
//    first 10 bits of the input mantissa are read". So raw fp32 bits fed to
//    a tensor core are effectively TRUNCATED (truncate_to_tf32 below). This
//    is an inference: NVIDIA documents the bit layout of TF32 operands as
//    unspecified / implementation-defined (CUDA math API, __nv_tf32).
//  * Conversion before the MMA is therefore software's choice, and what the
//    NVIDIA stack chooses is round to nearest, ties AWAY from zero (RNA):
//    - PTX ISA, cvt: "cvt.rna{.satfinite}.tf32.f32" is the only fp32->tf32
//      conversion on sm_80/86/89; cvt.rn.tf32.f32 (ties to even) needs sm_90
//      (PTX 7.8; see the __nvvm_f2tf32_rn builtins in LLVM BuiltinsNVPTX.td).
//      On sm_86 cvt.rna.tf32.f32 compiles to "if (|x| < inf) x += 0x1000;
//      x &= 0xffffe000" (SASS dump, enp1s0.github.io/blog/cuda/2023/01/08/tf32-rna.html).
//    - CUTLASS include/cutlass/numeric_conversion.h:
//      PreferredRoundingMode<tfloat32_t, float> = round_half_ulp_truncate,
//      i.e. "x += 0x1000 if finite" and let the MMA ignore the low 13 bits:
//      bit for bit the same RNA. The warp-level tensor-op MMAs
//      (include/cutlass/gemm/warp/mma_tensor_op.h, transform()) convert fp32
//      fragments with that preferred mode. (NumericConverter<tfloat32_t,
//      float, round_to_nearest> exists too: software ties-to-even below
//      sm_90, cvt.rn.tf32.f32 from sm_90; it is not the GEMM default.)
//    - Observed through cuBLAS: pytorch/pytorch issue #53635 (RTX 3090,
//      CUDA 11.1, TF32 on): [1024.5] @ [[1.0]] == 1025. 1024.5 is exactly
//      halfway between the TF32 neighbours 1024 and 1025; ties-to-even and
//      truncation both give 1024, only ties-away gives 1025. (Also PyTorch
//      PR #49625 changed its TF32 notes from "truncating" to "rounding":
//      "the input data is rounded not truncated".)
//  => round_to_tf32() = round_to_tf32_rna(): the faithful default.
//
// What remains uncertain (not verified here; no GPU was available):
//  * cuBLAS is closed source and picks kernels per GPU/shape/version. A kernel
//    that feeds fp32 straight from shared memory to the MMA without a
//    conversion (possible with Hopper wgmma or TMA-fed kernels) would truncate
//    instead; a kernel using cvt.rn.tf32.f32 (sm_90+) would tie to even.
//    RNA and RNE differ only on exact ties with an even kept lsb (low 13 bits
//    == 0x1000, 1 in 16384 random inputs); truncation differs from both on
//    about half of all inputs. A GEMM of
//    [1024.5, 1024.75, 1025.5] against the identity distinguishes the three
//    (RNA: 1025, 1025, 1026; RNE: 1024, 1025, 1026; RZ: 1024, 1024, 1025).
//  * NVIDIA's __nv_tf32 documentation (CUDA math API) says TF32 has "10 or
//    more" mantissa bits and the precision "depends on the hardware target";
//    everything above (and this emulation) assumes exactly 10.
//  * NaN: cvt.rna's mask clears the low 13 bits of NaNs too, so a NaN whose
//    payload is only in those bits would become inf on the device. We
//    deliberately keep every NaN a (quiet) NaN instead; inf stays inf.
//    Subnormal inputs are rounded like any other value (no flush): the RNA
//    add/mask arithmetic is uniform there, which matches the SASS above.
//  * .satfinite variants (clamp to kTf32Max instead of inf) are not modelled.

// Round to nearest, ties away from zero (cvt.rna.tf32.f32, CUTLASS
// round_half_ulp_truncate + hardware truncation). Works because TF32 is a
// prefix of the fp32 pattern: adding half an ulp (bit 12) to the magnitude
// bits carries into the kept bits iff the dropped part is >= half, ties
// included (away from zero, since the sign is separate). Carry into the
// exponent gives the next binade; the largest values carry into 0x7F800000
// = inf, as round-to-nearest overflow requires (>= kTf32Max + ulp/2).
MPB_HD inline float round_to_tf32_rna(float f) {
  uint32_t x = float_to_bits(f);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return bits_to_float((x | 0x00400000u) & 0xFFFFE000u);  // quiet NaN, keep sign/top payload
  if (ax == 0x7F800000u) return f;                                             // +-inf
  x += 0x1000u;
  return bits_to_float(x & 0xFFFFE000u);
}

// Round to nearest, ties to even (cvt.rn.tf32.f32 on sm_90+, CUTLASS
// NumericConverter<tfloat32_t, float, round_to_nearest>). Same trick as bf16:
// + 0xFFF + kept lsb carries iff above half, or a tie with an odd kept lsb.
MPB_HD inline float round_to_tf32_rne(float f) {
  uint32_t x = float_to_bits(f);
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return bits_to_float((x | 0x00400000u) & 0xFFFFE000u);
  if (ax == 0x7F800000u) return f;
  x += 0x0FFFu + ((x >> 13) & 1u);
  return bits_to_float(x & 0xFFFFE000u);
}

// Round toward zero: what a tensor core computes with when handed raw fp32
// bits (CUTLASS round_toward_zero). Never overflows. NaN kept NaN (see above).
MPB_HD inline float truncate_to_tf32(float f) {
  const uint32_t x = float_to_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return bits_to_float((x | 0x00400000u) & 0xFFFFE000u);
  return bits_to_float(x & 0xFFFFE000u);
}

// The default: what cuBLAS/CUTLASS TF32 GEMMs are documented/observed to do.
MPB_HD inline float round_to_tf32(float f) { return round_to_tf32_rna(f); }

// ---- convenience -----------------------------------------------------------------
MPB_HD inline half_t float_to_half(float f) { return half_from_bits(float_to_half_bits(f)); }
MPB_HD inline float half_to_float(half_t h) { return half_bits_to_float(h.bits); }
MPB_HD inline bf16_t float_to_bf16(float f) { return bf16_from_bits(float_to_bf16_bits(f)); }
MPB_HD inline float bf16_to_float(bf16_t h) { return bf16_bits_to_float(h.bits); }

// fp32 -> format -> fp32: the value an fp32 takes when stored in the format.
MPB_HD inline float round_to_half(float f) { return half_bits_to_float(float_to_half_bits(f)); }
MPB_HD inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

MPB_ISA_NAMESPACE_END
}  // namespace mpb
