// Shared float64 references and helpers for the CPU op tests
// (test_cpu_gemm.cpp, test_cpu_ops.cpp, test_approx_math.cpp,
// test_memory_tracker.cpp).
//
// The references are plain loops in double written from the mathematical
// definitions; they never call the code under test (ops/*, ops/cpu/*). Values
// of 16-bit bit patterns are decoded with numerics_reference.h (value
// arithmetic, independent of core/numerics.h). The only things taken from the
// library are the Device API itself (to allocate, upload and download) and,
// where a test says so, core/numerics.h's encoders to *build* 16-bit inputs
// (those are proven bit-exact in test_numerics.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/numerics.h"
#include "tests/core/numerics_reference.h"

namespace mpb::testref {

constexpr double kU32 = 0x1p-24;  // unit roundoff of fp32 (half an ulp of 1)

// ---- random inputs -----------------------------------------------------------------
// Uniform in +-[lo, hi] with a random sign: never zero, never tiny, so relative
// tolerances stay meaningful and every mantissa bit is random.
inline std::vector<float> random_nonzero(size_t n, uint64_t seed, float lo = 0.1f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = neg(rng) ? -mag(rng) : mag(rng);
  return v;
}

inline std::vector<int32_t> random_labels(size_t n, int32_t classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, classes - 1);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// ---- formats ------------------------------------------------------------------------
inline double bf16_value(uint16_t h) { return numref::bf16_to_double(h); }
inline double half_value(uint16_t h) { return numref::half_to_double(h); }

// Half an ulp of a format with `mant_bits` explicit mantissa bits at magnitude
// |x| (the ulp of the binade containing |x|), with the format's subnormal floor:
// the largest error of rounding a value of magnitude about |x| to nearest.
inline double half_ulp(double x, int mant_bits, int min_exp) {
  const double a = std::fabs(x);
  int e = min_exp;
  if (a > 0) {
    int fe;
    std::frexp(a, &fe);  // a in [2^(fe-1), 2^fe)
    e = std::max(fe - 1, min_exp);
  }
  return std::ldexp(1.0, e - mant_bits - 1);
}
inline double half_ulp_f32(double x) { return half_ulp(x, 23, -126); }
inline double half_ulp_f16(double x) { return half_ulp(x, 10, -14); }
inline double half_ulp_bf16(double x) { return half_ulp(x, 7, -126); }
inline double half_ulp_of(DType t, double x) {
  switch (t) {
    case DType::F16: return half_ulp_f16(x);
    case DType::BF16: return half_ulp_bf16(x);
    default: return half_ulp_f32(x);
  }
}

// ---- activations in double ------------------------------------------------------------
constexpr double kPi = 3.14159265358979323846;

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline double gelu(double x) {
  const double c = std::sqrt(2.0 / kPi);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
// Its derivative: 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2).
inline double gelu_grad(double x) {
  const double c = std::sqrt(2.0 / kPi);
  const double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}
// max |gelu'(x)| over the reals (attained near x = +-2.4): error in the
// pre-activation propagates to the activation by at most this factor.
constexpr double kGeluLipschitz = 1.13;

// ---- device helpers -------------------------------------------------------------------
template <typename T>
DeviceBuffer upload(Device& dev, const std::vector<T>& host, Shape shape, DType dtype,
                    MemCategory cat = MemCategory::Activations) {
  DeviceBuffer b = dev.alloc(shape, dtype, cat);
  if (b.bytes() != host.size() * sizeof(T)) throw std::logic_error("testref::upload: size mismatch");
  dev.upload(b, host.data());
  return b;
}

template <typename T>
std::vector<T> download(Device& dev, const Tensor& t) {
  std::vector<T> host(t.bytes() / sizeof(T));
  dev.download(host.data(), t);
  return host;
}

// Values of a downloaded tensor of any float dtype, exactly, as double.
inline std::vector<double> download_values(Device& dev, const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F32) {
    auto h = download<float>(dev, t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = h[i];
  } else {
    auto h = download<uint16_t>(dev, t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = t.dtype == DType::F16 ? half_value(h[i]) : bf16_value(h[i]);
  }
  return out;
}

// A float vector stored in `dt` (values first rounded to dt by core/numerics.h's
// encoders, proven in test_numerics.cpp): the buffer and the exact stored values.
struct Stored {
  DeviceBuffer buf;
  std::vector<double> value;
};
inline Stored store(Device& dev, const std::vector<float>& x, Shape shape, DType dt) {
  Stored s;
  s.value.resize(x.size());
  if (dt == DType::F32) {
    s.buf = upload(dev, x, shape, dt);
    for (size_t i = 0; i < x.size(); ++i) s.value[i] = x[i];
  } else {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      h[i] = dt == DType::F16 ? float_to_half_bits(x[i]) : float_to_bf16_bits(x[i]);
      s.value[i] = dt == DType::F16 ? half_value(h[i]) : bf16_value(h[i]);
    }
    s.buf = upload(dev, h, shape, dt);
  }
  return s;
}

// ---- CPU features ------------------------------------------------------------------------
// True when /proc/cpuinfo's "flags" line lists `flag` as a whole word.
inline bool cpuinfo_has_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    while (words >> w)
      if (w == flag) return true;
    return false;  // the first CPU's flags decide
  }
  return false;
}

}  // namespace mpb::testref
