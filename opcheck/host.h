// Host-side tensors for the op checks: bytes in any dtype, copied to and from
// a device, their exact values, and the ulp helpers the tolerances are
// written in.
//
// Values are *built* with ops/dtype_io.h's converters (round to nearest even,
// proven bit-exact against an independent reference in test_numerics.cpp)
// and *read* for the float64 references with numerics_reference.h's
// value-based decoders, which share no code with the library.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"

namespace mpb::opcheck {

struct Host {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<unsigned char> bytes;

  Host() = default;
  Host(DType t, Shape s);
  int64_t numel() const { return shape.numel(); }
  // The element through the library's converter (fp32), and its exact value
  // from an independent decode (float64; what the references read).
  float get(int64_t i) const;
  double value(int64_t i) const;
  std::vector<double> values() const;
  void set(int64_t i, float v);  // rounded to dtype (nearest even)
  int32_t label(int64_t i) const;
  void set_label(int64_t i, int32_t v);
  // The raw storage bits of element i (16 or 32 of them).
  uint32_t bits(int64_t i) const;
};

Host filled(DType t, Shape s, float v);
Host ints(const std::vector<int32_t>& v, Shape s);
DeviceBuffer put(Device& dev, const Host& h, MemCategory cat = MemCategory::Activations);
Host fetch(Device& dev, const Tensor& t);
// Bit-for-bit equality, except that any NaN equals any NaN: arithmetic on a
// NaN gives x86's default NaN (sign set, 0xffc00000) or the operand's payload
// on the CPU and CUDA's canonical NaN (0x7fffffff) on the GPU, and IEEE 754
// specifies neither (seen on the first lease, H200, 2026-11-27: every map op
// on a NaN input). The conversions' NaN payload rules have their own tests
// (tests/core/test_numerics.cpp, tests/gpu/test_convert_probe.cpp). *where
// says the first difference.
bool identical(const Host& a, const Host& b, std::string* where = nullptr);

// Spacing of dtype t at |x| (subnormal spacing below the smallest normal).
double ulp(DType t, double x);
// Half of it: the largest error of rounding a value of magnitude |x| to t.
inline double half_ulp(DType t, double x) { return 0.5 * ulp(t, x); }
// One ulp of a 16-bit destination (two computed values that straddle a
// rounding boundary land one ulp apart), 0 for fp32.
inline double store_ulp(DType t, double x) { return t == DType::F32 ? 0.0 : ulp(t, x); }
// The value x takes when an fp32 result x is stored in t: float(x) rounded
// to nearest even, computed independently of the library (numerics_reference.h).
double stored(DType t, double x);

// Short dtype names for case labels: f32, f16, bf16, i32.
const char* short_name(DType t);
// Epilogue names for labels: "None", "Bias", "BiasRelu", ...
const char* epilogue_name(Epilogue e);

// Deterministic random inputs (one generator per case instance).
class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  // Uniform in [lo, hi], rounded to t.
  Host uniform(DType t, Shape s, float lo = -2.0f, float hi = 2.0f);
  // Magnitude uniform in [lo, hi] with a random sign (never zero or tiny),
  // rounded to t.
  Host nonzero(DType t, Shape s, float lo = 0.1f, float hi = 1.0f);
  int32_t below(int32_t n) { return std::uniform_int_distribution<int32_t>(0, n - 1)(rng_); }
  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  std::mt19937_64& engine() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

}  // namespace mpb::opcheck
