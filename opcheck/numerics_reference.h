// Independent, deliberately slow reference roundings for core/numerics.h.
//
// Written in double-precision arithmetic on values (ldexp/frexp/floor, a
// sorted table of all fp16 values and midpoint comparisons), not on bit
// patterns, so they share no code or tricks with the implementation. Every
// double operation used here is exact: fp32 values, fp16/bf16/tf32 values and
// midpoints between neighbours all fit in 53 bits, and scaling by powers of
// two is exact in the range used.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace mpb::numref {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The value of a 16-bit float pattern (sign, `exp_bits` exponent bits,
// `man_bits` mantissa bits; 1 + exp_bits + man_bits == 16) from the IEEE 754
// definition, with bias = 2^(exp_bits-1) - 1: subnormal m * 2^(1 - bias -
// man_bits), normal (2^man_bits + m) * 2^(e - bias - man_bits).
inline double float16_bits_to_double(uint16_t h, int exp_bits, int man_bits) {
  const int e_max = (1 << exp_bits) - 1;
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int e = (h >> man_bits) & e_max;
  const int m = h & ((1 << man_bits) - 1);
  double v;
  if (e == e_max) {
    v = m ? std::nan("") : HUGE_VAL;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - man_bits);
  } else {
    v = std::ldexp(static_cast<double>((1 << man_bits) + m), e - bias - man_bits);
  }
  return std::copysign(v, (h & 0x8000) ? -1.0 : 1.0);
}

// fp16 (5 exponent bits, 10 mantissa bits): subnormal m * 2^-24, normal
// (1024 + m) * 2^(e - 25).
inline double half_to_double(uint16_t h) { return float16_bits_to_double(h, 5, 10); }

// fp32 -> fp16 round to nearest even, by search: find the two fp16 neighbours
// of |x| in a sorted table of every non-negative finite fp16 value and compare
// |x| with their midpoint. Overflow falls out naturally: the table ends with
// the value the next pattern (0x7C00) would have with an unbounded exponent
// (65536), so |x| >= 65520 picks index 0x7C00, which is the inf encoding.
// NaN inputs return 0x7E00 with the input's sign (callers compare NaN-ness).
class HalfRoundRef {
 public:
  HalfRoundRef() : table_(0x7C01) {
    for (uint32_t i = 0; i < 0x7C00; ++i) table_[i] = half_to_double(static_cast<uint16_t>(i));
    table_[0x7C00] = 65536.0;
  }

  uint16_t operator()(float x) const {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (std::isnan(x)) return static_cast<uint16_t>(sign | 0x7E00);
    const double a = std::fabs(static_cast<double>(x));
    if (a >= 65536.0) return static_cast<uint16_t>(sign | 0x7C00);  // includes inf
    const auto it = std::upper_bound(table_.begin(), table_.end(), a);
    const size_t lo = static_cast<size_t>(it - table_.begin()) - 1;  // table_[lo] <= a < table_[lo + 1]
    if (table_[lo] == a) return static_cast<uint16_t>(sign | lo);
    const double mid = 0.5 * (table_[lo] + table_[lo + 1]);
    size_t pick;
    if (a < mid) {
      pick = lo;
    } else if (a > mid) {
      pick = lo + 1;
    } else {
      pick = (lo % 2 == 0) ? lo : lo + 1;  // tie: the even pattern
    }
    return static_cast<uint16_t>(sign | pick);
  }

 private:
  std::vector<double> table_;
};

enum class Rounding { NearestEven, NearestAway, TowardZero };

// Rounds a finite value to a binary format with `mant_bits` explicit mantissa
// bits and fp32's exponent range (bf16: 7, tf32: 10), gradual underflow
// included (spacing 2^(-126 - mant_bits) below 2^-126), overflow to inf
// (except toward zero). Pure value arithmetic: q = |x| / ulp is exact, its
// integer and fractional parts decide the rounding.
inline double round_fp32_range(double x, int mant_bits, Rounding mode) {
  if (x == 0.0 || std::isnan(x) || std::isinf(x)) return x;
  const double a = std::fabs(x);
  int e = 0;
  std::frexp(a, &e);                 // a = f * 2^e, f in [0.5, 1): leading bit has weight 2^(e-1)
  const int lead = std::max(e - 1, -126);  // below 2^-126 the spacing stays that of the smallest binade
  const double ulp = std::ldexp(1.0, lead - mant_bits);
  const double q = a / ulp;
  double r = std::floor(q);
  const double frac = q - r;
  bool up = false;
  switch (mode) {
    case Rounding::NearestEven: up = frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0); break;
    case Rounding::NearestAway: up = frac >= 0.5; break;
    case Rounding::TowardZero: up = false; break;
  }
  if (up) r += 1.0;
  double v = r * ulp;
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, -mant_bits), 127);
  if (v > max_finite) v = HUGE_VAL;
  return std::copysign(v, x);
}

// bf16 bits of the reference rounding of a finite/inf x (RNE).
inline uint16_t bf16_bits_ref(float x) {
  const float v = static_cast<float>(round_fp32_range(x, 7, Rounding::NearestEven));
  return static_cast<uint16_t>(bits_of(v) >> 16);
}

// The value of a bf16 bit pattern from the definition (fp32 range, 7 bits):
// subnormal m * 2^-133, normal (128 + m) * 2^(e - 134).
inline double bf16_to_double(uint16_t h) { return float16_bits_to_double(h, 8, 7); }

inline float tf32_ref(float x, Rounding mode) {
  return static_cast<float>(round_fp32_range(x, 10, mode));
}

}  // namespace mpb::numref
