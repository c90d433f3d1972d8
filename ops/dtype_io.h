// Reading and writing one element of any float dtype as fp32: how every
// element-wise op on both backends touches reduced-precision storage.
// Stores round to nearest even (core/numerics.h).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/numerics.h"
#include "ops/scalar.h"

namespace mpb::scalar {

MPB_HD inline float load_f32(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::F16: return half_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16: return bf16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

MPB_HD inline void store_f32(void* base, DType t, int64_t i, float x) {
  switch (t) {
    case DType::F16: static_cast<uint16_t*>(base)[i] = float_to_half_bits(x); break;
    case DType::BF16: static_cast<uint16_t*>(base)[i] = float_to_bf16_bits(x); break;
    default: static_cast<float*>(base)[i] = x; break;
  }
}

}  // namespace mpb::scalar
