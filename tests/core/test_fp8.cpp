// Tests for core/fp8.h against a float64 reference written from the OCP FP8
// spec with a different algorithm: the reference lists every finite value of
// the format (decoded with ldexp from the field definitions), finds the
// nearest one by search and breaks ties towards the even code; core/fp8.h
// rounds with integer arithmetic on the fp32 bits. Exact comparisons, no
// tolerance: both sides claim the correctly rounded result.
//
// Inputs: all 256 codes decoded; encoding of every decoded value, of every
// midpoint between neighbouring values and the fp32 values on either side of
// it, of the overflow boundary, of all 65,536 fp16 and bf16 patterns (the
// bf16/fp16 paths), and of 2 million random fp32 patterns (every exponent,
// and the exponents near the formats' ranges); both overflow modes.
#include "core/fp8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

using mpb::Fp8Format;

struct FormatSpec {
  Fp8Format fmt;
  int exp_bits, man_bits, bias;
  bool ieee_specials;  // E5M2: all-ones exponent is inf/NaN; E4M3fn: only S.1111.111 is NaN
};
const FormatSpec kE4M3{Fp8Format::E4M3, 4, 3, 7, false};
const FormatSpec kE5M2{Fp8Format::E5M2, 5, 2, 15, true};

// The field definition, for any magnitude code (also one past the largest
// finite, which the reference uses as "the next value" for overflow).
double field_value(const FormatSpec& s, int mag) {
  const int e = mag >> s.man_bits, m = mag & ((1 << s.man_bits) - 1);
  if (e == 0) return std::ldexp(m, 1 - s.bias - s.man_bits);
  return std::ldexp((1 << s.man_bits) + m, e - s.bias - s.man_bits);
}

bool ref_is_nan(const FormatSpec& s, int code) {
  const int mag = code & 0x7F;
  if (s.ieee_specials) return (mag >> s.man_bits) == (1 << s.exp_bits) - 1 && (mag & ((1 << s.man_bits) - 1)) != 0;
  return mag == 0x7F;
}
bool ref_is_inf(const FormatSpec& s, int code) {
  return s.ieee_specials && (code & 0x7F) == (((1 << s.exp_bits) - 1) << s.man_bits);
}
int ref_max_mag(const FormatSpec& s) { return s.ieee_specials ? ((((1 << s.exp_bits) - 1) << s.man_bits) - 1) : 0x7E; }

double ref_decode(const FormatSpec& s, int code) {
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  if (ref_is_nan(s, code)) return std::numeric_limits<double>::quiet_NaN();
  if (ref_is_inf(s, code)) return sign * std::numeric_limits<double>::infinity();
  return sign * field_value(s, code & 0x7F);
}

std::vector<double> values_of(const FormatSpec& s) {
  std::vector<double> v;
  for (int mag = 0; mag <= ref_max_mag(s) + 1; ++mag) v.push_back(field_value(s, mag));
  return v;
}

// Encodes x; for NaN only the class and sign are defined by the spec, so the
// reference returns -1 and the caller checks those.
int ref_encode(const FormatSpec& s, double x, bool saturate) {
  if (std::isnan(x)) return -1;
  const int sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(x);
  const int max_mag = ref_max_mag(s);
  const int overflow = saturate ? max_mag : (s.ieee_specials ? max_mag + 1 : 0x7F);
  if (std::isinf(a)) return sign | overflow;
  // Nearest of the values 0 .. max_mag + 1 (the last one is where the
  // exponent would continue; rounding to it, or beyond it, means overflow):
  // the first listed value >= |x| and the one before it.
  static const std::vector<double> e4m3 = values_of(kE4M3), e5m2 = values_of(kE5M2);
  const std::vector<double>& v = s.fmt == Fp8Format::E4M3 ? e4m3 : e5m2;
  int best;
  const auto it = std::lower_bound(v.begin(), v.end(), a);
  if (it == v.end()) {
    best = max_mag + 1;
  } else if (it == v.begin()) {
    best = 0;
  } else {
    const int hi = static_cast<int>(it - v.begin()), lo = hi - 1;
    const double d_lo = a - v[lo], d_hi = v[hi] - a;
    best = d_lo < d_hi ? lo : d_hi < d_lo ? hi : ((lo & 1) == 0 ? lo : hi);  // tie: the even code
  }
  if (best > max_mag) return sign | overflow;
  return sign | best;
}

float f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

void expect_encode(const FormatSpec& s, float x, bool saturate, const char* what) {
  const uint8_t got = mpb::float_to_fp8_bits(x, s.fmt, saturate);
  const int want = ref_encode(s, static_cast<double>(x), saturate);
  if (want < 0) {
    ASSERT_TRUE(ref_is_nan(s, got)) << what << ": NaN input 0x" << std::hex << bits(x) << " gave 0x" << int(got);
    ASSERT_EQ(got & 0x80, (bits(x) >> 24) & 0x80) << what << ": NaN keeps its sign";
    return;
  }
  ASSERT_EQ(int(got), want) << what << ": " << (s.fmt == Fp8Format::E4M3 ? "E4M3" : "E5M2")
                            << (saturate ? " sat" : " nonsat") << " x=" << x << " (0x" << std::hex << bits(x) << ")";
}

void expect_both_modes(float x, const char* what) {
  for (const FormatSpec* s : {&kE4M3, &kE5M2})
    for (bool sat : {false, true}) expect_encode(*s, x, sat, what);
}

TEST(Fp8, DecodesAll256CodesExactly) {
  for (const FormatSpec* s : {&kE4M3, &kE5M2}) {
    for (int c = 0; c < 256; ++c) {
      const float got = mpb::fp8_bits_to_float(static_cast<uint8_t>(c), s->fmt);
      const double want = ref_decode(*s, c);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << c;
        EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << c;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
        EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << "code " << c;  // -0 stays -0
      }
    }
  }
}

TEST(Fp8, FormatConstantsFromTheSpec) {
  EXPECT_EQ(mpb::e4m3_bits_to_float(mpb::kE4M3MaxBits), 448.0f);
  EXPECT_EQ(mpb::e5m2_bits_to_float(mpb::kE5M2MaxBits), 57344.0f);
  EXPECT_EQ(mpb::e4m3_bits_to_float(0x01), mpb::kE4M3MinSubnormal);
  EXPECT_EQ(mpb::e5m2_bits_to_float(0x01), mpb::kE5M2MinSubnormal);
  EXPECT_EQ(mpb::e4m3_bits_to_float(0x08), mpb::kE4M3MinNormal);
  EXPECT_EQ(mpb::e5m2_bits_to_float(0x04), mpb::kE5M2MinNormal);
  EXPECT_TRUE(std::isinf(mpb::e5m2_bits_to_float(mpb::kE5M2InfBits)));
  // The E4M3 NaN count: exactly two codes (one per sign), no inf.
  int nans = 0, infs = 0;
  for (int c = 0; c < 256; ++c) {
    nans += std::isnan(mpb::e4m3_bits_to_float(static_cast<uint8_t>(c)));
    infs += std::isinf(mpb::e4m3_bits_to_float(static_cast<uint8_t>(c)));
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(infs, 0);
}

TEST(Fp8, OverflowAndSpecialsByMode) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Literal expectations (the spec's table), independent of the reference.
  EXPECT_EQ(mpb::float_to_e4m3_bits(464.0f, false), 0x7E);  // tie between 448 and "480": even = 448
  EXPECT_EQ(mpb::float_to_e4m3_bits(465.0f, false), 0x7F);  // NaN: E4M3 has no inf
  EXPECT_EQ(mpb::float_to_e4m3_bits(465.0f, true), 0x7E);
  EXPECT_EQ(mpb::float_to_e4m3_bits(-inf, false), 0xFF);
  EXPECT_EQ(mpb::float_to_e4m3_bits(-inf, true), 0xFE);
  EXPECT_EQ(mpb::float_to_e4m3_bits(nan, true), 0x7F);
  EXPECT_EQ(mpb::float_to_e5m2_bits(61439.0f, false), 0x7B);
  EXPECT_EQ(mpb::float_to_e5m2_bits(61440.0f, false), 0x7C);  // tie between 57344 and 65536: even = inf
  EXPECT_EQ(mpb::float_to_e5m2_bits(61440.0f, true), 0x7B);
  EXPECT_EQ(mpb::float_to_e5m2_bits(inf, false), 0x7C);
  EXPECT_EQ(mpb::float_to_e5m2_bits(-inf, true), 0xFB);
  EXPECT_EQ(mpb::float_to_e5m2_bits(nan, true), 0x7E);
  EXPECT_EQ(mpb::float_to_e5m2_bits(-nan, false), 0xFE);
  // Half the smallest subnormal is a tie with zero (even), a hair above it is not.
  EXPECT_EQ(mpb::float_to_e4m3_bits(0x1p-10f, false), 0x00);
  EXPECT_EQ(mpb::float_to_e4m3_bits(0x1.000002p-10f, false), 0x01);
  EXPECT_EQ(mpb::float_to_e5m2_bits(-0x1p-17f, false), 0x80);
  EXPECT_EQ(mpb::float_to_e5m2_bits(3 * 0x1p-17f, false), 0x02);  // 1.5 subnormals: tie to even 2
}

TEST(Fp8, EncodesEveryValueMidpointAndNeighbours) {
  for (const FormatSpec* s : {&kE4M3, &kE5M2}) {
    std::vector<double> values;
    for (int mag = 0; mag <= ref_max_mag(*s) + 1; ++mag) values.push_back(field_value(*s, mag));
    for (size_t i = 0; i < values.size(); ++i) {
      for (double sign : {1.0, -1.0}) {
        const float v = static_cast<float>(sign * values[i]);
        expect_both_modes(v, "value");
        expect_both_modes(std::nextafter(v, 0.0f), "value-");
        expect_both_modes(std::nextafter(v, sign * INFINITY), "value+");
        if (i + 1 < values.size()) {
          // Midpoints need M+2 significant bits: exact in fp32.
          const float mid = static_cast<float>(sign * (values[i] + values[i + 1]) / 2);
          ASSERT_EQ(static_cast<double>(mid), sign * (values[i] + values[i + 1]) / 2);
          expect_both_modes(mid, "midpoint");
          expect_both_modes(std::nextafter(mid, 0.0f), "midpoint-");
          expect_both_modes(std::nextafter(mid, sign * INFINITY), "midpoint+");
        }
      }
    }
  }
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, f32(0x7F800001u), f32(0xFFBFFFFFu), f32(0x00000001u),
                  f32(0x807FFFFFu), f32(0x7F7FFFFFu), f32(0xFF7FFFFFu)})
    expect_both_modes(x, "special");
}

TEST(Fp8, EncodesEveryHalfAndBf16Pattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t p = static_cast<uint16_t>(h);
    for (const FormatSpec* s : {&kE4M3, &kE5M2})
      for (bool sat : {false, true}) {
        const int want_h = ref_encode(*s, mpb::half_bits_to_float(p), sat);
        const int want_b = ref_encode(*s, mpb::bf16_bits_to_float(p), sat);
        const uint8_t got_h = mpb::half_bits_to_fp8_bits(p, s->fmt, sat);
        const uint8_t got_b = mpb::bf16_bits_to_fp8_bits(p, s->fmt, sat);
        if (want_h < 0) ASSERT_TRUE(ref_is_nan(*s, got_h)) << h;
        else ASSERT_EQ(int(got_h), want_h) << "fp16 0x" << std::hex << h;
        if (want_b < 0) ASSERT_TRUE(ref_is_nan(*s, got_b)) << h;
        else ASSERT_EQ(int(got_b), want_b) << "bf16 0x" << std::hex << h;
      }
  }
}

TEST(Fp8, RandomFp32Sweeps) {
  uint64_t state = 0x5EED0F8ull;
  auto next32 = [&state] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
  };
  for (int i = 0; i < 1000000; ++i) expect_both_modes(f32(next32()), "random bits");
  // Biased exponents 96..150 (2^-31 .. 2^23): below E5M2's subnormals to above both maxima.
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t e = 96u + next32() % 55u;
    expect_both_modes(f32((next32() & 0x807FFFFFu) | (e << 23)), "random near range");
  }
}

TEST(Fp8, RoundTripIsIdentityOnFiniteCodes) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = static_cast<uint8_t>(c);
    if (!mpb::e4m3_bits_is_nan(code)) {
      EXPECT_EQ(mpb::float_to_e4m3_bits(mpb::e4m3_bits_to_float(code), false), code);
    }
    if (!mpb::e5m2_bits_is_nan(code)) {
      EXPECT_EQ(mpb::float_to_e5m2_bits(mpb::e5m2_bits_to_float(code), false), code);
    }
  }
}

}  // namespace
