// Host-side tensors for the GPU tests: bytes in any dtype, copied to and from
// a device, plus the ulp helpers the tolerances are written in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/device.h"
#include "ops/dtype_io.h"

namespace mpb::gpu_test {

struct Host {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<unsigned char> bytes;

  Host() = default;
  Host(DType t, Shape s) : dtype(t), shape(s), bytes(static_cast<size_t>(s.numel()) * dtype_size(t)) {}
  int64_t numel() const { return shape.numel(); }
  float get(int64_t i) const { return scalar::load_f32(bytes.data(), dtype, i); }
  void set(int64_t i, float v) { scalar::store_f32(bytes.data(), dtype, i, v); }
  int32_t label(int64_t i) const {
    int32_t v;
    std::memcpy(&v, bytes.data() + i * 4, 4);
    return v;
  }
  void set_label(int64_t i, int32_t v) { std::memcpy(bytes.data() + i * 4, &v, 4); }
  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) v[static_cast<size_t>(i)] = get(i);
    return v;
  }
};

inline DeviceBuffer put(Device& dev, const Host& h, MemCategory cat = MemCategory::Activations) {
  DeviceBuffer b = dev.alloc(h.shape, h.dtype, cat);
  dev.upload(b, h.bytes.data());
  return b;
}

inline Host fetch(Device& dev, const Tensor& t) {
  Host h(t.dtype, t.shape);
  dev.download(h.bytes.data(), t);
  return h;
}

// Spacing of dtype t at |x| (subnormal spacing below the smallest normal).
inline double ulp(DType t, double x) {
  const int digits = t == DType::F16 ? 11 : (t == DType::BF16 ? 8 : 24);
  const int min_exp = t == DType::F16 ? -14 : -126;
  int e = 0;
  std::frexp(std::max(std::fabs(x), std::ldexp(1.0, min_exp)), &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - digits);
}
// One ulp of a 16-bit destination (rounding-boundary straddle), 0 for fp32.
inline double store_ulp(DType t, double x) { return t == DType::F32 ? 0.0 : ulp(t, x); }

// Bit-for-bit equality, element by element (NaN payloads included).
inline ::testing::AssertionResult identical(const Host& a, const Host& b) {
  if (a.dtype != b.dtype || a.bytes.size() != b.bytes.size()) return ::testing::AssertionFailure() << "layout differs";
  const size_t es = dtype_size(a.dtype);
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(a.bytes.data() + i * es, b.bytes.data() + i * es, es) != 0)
      return ::testing::AssertionFailure() << "first difference at [" << i << "]: " << a.get(i) << " vs " << b.get(i);
  return ::testing::AssertionSuccess();
}

inline constexpr DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

}  // namespace mpb::gpu_test
