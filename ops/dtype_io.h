// Reading and writing one element of any float dtype as fp32: how every
// element-wise op on both backends touches reduced-precision storage.
// Stores round to nearest even (core/numerics.h).
//
// Elem<T> is the typed form, for loops that dispatch on the dtype once and
// then run (and vectorise) without a per-element switch; load_f32/store_f32
// switch per element, for code where that doesn't matter.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/numerics.h"
#include "ops/scalar.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

template <DType T>
struct Elem;

template <>
struct Elem<DType::F32> {
  MPB_HD static float load(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
  MPB_HD static void store(void* p, int64_t i, float x) { static_cast<float*>(p)[i] = x; }
};

// Host code on a CPU with F16C converts with the hardware instructions
// (through GCC's _Float16), several times faster than the portable bit
// manipulation. They round to nearest even exactly like float_to_half_bits:
// tests/core/test_numerics.cpp checks the two against each other on every
// half pattern and millions of floats.
#if !defined(__CUDACC__) && defined(__F16C__) && defined(__FLT16_MAX__)
#define MPB_HOST_F16C 1
#endif

// Device code narrows with the GPU's conversion instructions (cvt.rn.f16.f32,
// cvt.rn.bf16.f32: one instruction instead of the portable rounding's dozen
// integer operations). They give core/numerics.h's bits for every non-NaN
// float, which tests/gpu/test_convert_probe.cpp checks on the GPU through the
// same intrinsics (backends/cuda/convert_probe.cu); a NaN takes the portable
// path, so its payload rule stays the CPU's. Widening stays portable: it is a
// few integer operations, exact, and not what the probe covers.
#if defined(__CUDA_ARCH__)
__device__ inline uint16_t device_float_to_half_bits(float x) {
  return x != x ? float_to_half_bits(x) : __half_as_ushort(__float2half_rn(x));
}
__device__ inline uint16_t device_float_to_bf16_bits(float x) {
  return x != x ? float_to_bf16_bits(x) : __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
#endif

template <>
struct Elem<DType::F16> {
#ifdef MPB_HOST_F16C
  static float load(const void* p, int64_t i) { return static_cast<float>(static_cast<const _Float16*>(p)[i]); }
  static void store(void* p, int64_t i, float x) { static_cast<_Float16*>(p)[i] = static_cast<_Float16>(x); }
#else
  MPB_HD static float load(const void* p, int64_t i) { return half_bits_to_float(static_cast<const uint16_t*>(p)[i]); }
  MPB_HD static void store(void* p, int64_t i, float x) {
#if defined(__CUDA_ARCH__)
    static_cast<uint16_t*>(p)[i] = device_float_to_half_bits(x);
#else
    static_cast<uint16_t*>(p)[i] = float_to_half_bits(x);
#endif
  }
#endif
};

template <>
struct Elem<DType::BF16> {
  MPB_HD static float load(const void* p, int64_t i) { return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]); }
  MPB_HD static void store(void* p, int64_t i, float x) {
#if defined(__CUDA_ARCH__)
    static_cast<uint16_t*>(p)[i] = device_float_to_bf16_bits(x);
#else
    static_cast<uint16_t*>(p)[i] = float_to_bf16_bits(x);
#endif
  }
};

MPB_HD inline float load_f32(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::F16: return Elem<DType::F16>::load(base, i);
    case DType::BF16: return Elem<DType::BF16>::load(base, i);
    default: return Elem<DType::F32>::load(base, i);
  }
}

MPB_HD inline void store_f32(void* base, DType t, int64_t i, float x) {
  switch (t) {
    case DType::F16: Elem<DType::F16>::store(base, i, x); break;
    case DType::BF16: Elem<DType::BF16>::store(base, i, x); break;
    default: Elem<DType::F32>::store(base, i, x); break;
  }
}

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
