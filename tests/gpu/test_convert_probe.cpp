// core/numerics.h's software conversions against the GPU's own conversion
// instructions (cuda_convert_probe, backends/cuda/convert_probe.h):
//   float_to_half_bits  vs __float2half_rn      (cvt.rn.f16.f32)
//   float_to_bf16_bits  vs __float2bfloat16_rn  (cvt.rn.bf16.f32)
//   round_to_tf32       vs cvt.rna.tf32.f32     (what CUTLASS/cuBLAS TF32 GEMMs use)
// on ~390k inputs: arbitrary bit patterns (every class), the fp16 range,
// exact rounding ties and their fp32 neighbours for each format (fp16 normal
// and subnormal, bf16 at every exponent including fp32 subnormals, TF32),
// fp32 subnormals, and the overflow/underflow boundaries.
//
// Every non-NaN input must give the same bits. NaNs only have to stay NaN in
// fp16/bf16: the hardware returns a canonical NaN where core/numerics.h
// deliberately keeps the sign and top payload bits (its header says so); the
// counts are printed. For TF32 core/numerics.h documents that cvt.rna clears
// the low 13 bits of a NaN too (a NaN with payload only there becomes inf)
// while round_to_tf32 keeps every NaN a NaN: printed, not asserted.
//
// The CPU-side tests (tests/core/test_numerics.cpp) hold the same functions
// against the host's F16C/AVX512-BF16 instructions; this is the device side.
// Skips where no usable CUDA device exists.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/convert_probe.h"
#include "backends/cuda/cuda_device.h"
#include "core/device.h"
#include "core/numerics.h"

namespace mpb {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*x", digits, v);
  return buf;
}

struct Inputs {
  std::vector<float> x;
  size_t half_ties = 0, bf16_ties = 0, tf32_ties = 0, subnormals = 0;
};

Inputs probe_inputs() {
  Inputs in;
  std::vector<float>& xs = in.x;
  xs.reserve(400000);
  std::mt19937 rng(0x6e756d73u);
  std::uniform_int_distribution<uint32_t> any32;
  auto add = [&](uint32_t u) { xs.push_back(float_of(u)); };
  // u and its fp32 neighbours (u has non-zero low bits here, so no wrap-around).
  auto add3 = [&](uint32_t u) {
    add(u - 1);
    add(u);
    add(u + 1);
  };
  auto sign = [&]() { return any32(rng) & 0x80000000u; };

  // Arbitrary bit patterns: normals, subnormals, zeros, infs and NaNs in
  // proportion to their share of the encoding space.
  for (int i = 0; i < 120000; ++i) add(any32(rng));
  // The fp16 range and a little beyond on both ends: exponents 2^-26 .. 2^16.
  std::uniform_int_distribution<uint32_t> half_exp(101, 143);
  for (int i = 0; i < 60000; ++i) add(sign() | half_exp(rng) << 23 | (any32(rng) & 0x007FFFFFu));
  // fp16 ties in the normal range (2^-14 .. 65504): the 13 dropped bits are
  // exactly 0x1000; odd and even kept lsb alike.
  std::uniform_int_distribution<uint32_t> half_normal_exp(113, 142);
  for (int i = 0; i < 20000; ++i, ++in.half_ties)
    add3(sign() | half_normal_exp(rng) << 23 | (any32(rng) & 0x007FE000u) | 0x1000u);
  // fp16 ties in the subnormal range: (k + 1/2) 2^-24 for every k, both signs.
  for (uint32_t k = 0; k < 1024; ++k) {
    for (uint32_t sgn : {0u, 0x80000000u}) {
      add3(sgn | bits_of(std::ldexp(static_cast<float>(k) + 0.5f, -24)));
      ++in.half_ties;
    }
  }
  // bf16 ties at every exponent (fp32 subnormals included): low 16 bits 0x8000.
  for (int i = 0; i < 20000; ++i, ++in.bf16_ties) {
    uint32_t u = (any32(rng) & 0xFFFF0000u) | 0x8000u;
    if ((u & 0x7F800000u) == 0x7F800000u) u &= ~0x40000000u;  // keep it finite
    add3(u);
  }
  // TF32 ties at every exponent: low 13 bits 0x1000.
  for (int i = 0; i < 20000; ++i, ++in.tf32_ties) {
    uint32_t u = (any32(rng) & 0xFFFFE000u) | 0x1000u;
    if ((u & 0x7F800000u) == 0x7F800000u) u &= ~0x40000000u;
    add3(u);
  }
  // fp32 subnormals (every one rounds to a signed zero in fp16; bf16 keeps
  // the top 7 of their 23 bits; TF32 the top 10).
  for (int i = 0; i < 20000; ++i, ++in.subnormals) add(sign() | ((any32(rng) & 0x007FFFFFu) | 1u));
  // Boundaries.
  const float specials[] = {0.0f, 1.0f, 1024.5f, 1024.75f, 1025.5f, 1.0f + 0x1p-11f, 1.0f + 0x1p-8f,
                            kHalfMax, kHalfOverflowThreshold, 65536.0f, kHalfMinNormal, kHalfMinSubnormal,
                            0x1p-25f, 0x1.8p-25f, 0x1p-26f, kBf16Max, kBf16MinSubnormal, kTf32Max, FLT_MAX,
                            FLT_MIN, FLT_TRUE_MIN, INFINITY};
  for (float f : specials) {
    for (float v : {f, -f}) {
      add(bits_of(v));
      if (v != 0.0f && std::isfinite(v)) {
        add(bits_of(std::nextafter(v, 0.0f)));
        add(bits_of(std::nextafter(v, v * 2.0f)));
      }
    }
  }
  add(0x7F7FF000u);  // halfway between kTf32Max and 2^128: RNA rounds it to inf
  add(0x477FEFFFu);  // just below 65520
  // NaNs: quiet, signalling, payload only in the low bits of each format.
  for (uint32_t nan : {0x7FC00000u, 0x7F800001u, 0x7F800FFFu, 0x7F801000u, 0x7F802000u, 0x7F80FFFFu, 0x7FA00000u,
                       0x7FFFFFFFu})
    for (uint32_t sgn : {0u, 0x80000000u}) add(sgn | nan);
  return in;
}

// Counts mismatches and keeps the first few as text.
struct Mismatches {
  size_t count = 0;
  std::ostringstream first;
  void add(const std::string& what) {
    if (count < 8) first << "\n  " << what;
    ++count;
  }
};

TEST(CudaConvertProbe, NumericsMatchTheGpuConversionInstructions) {
  if (auto reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
  const Inputs in = probe_inputs();
  const size_t n = in.x.size();
  ASSERT_GT(n, 300000u);
  std::vector<uint16_t> gpu_half(n), gpu_bf16(n);
  std::vector<float> gpu_tf32(n);
  cuda_convert_probe(in.x.data(), n, gpu_half.data(), gpu_bf16.data(), gpu_tf32.data());

  Mismatches half, bf16, tf32;
  size_t nans = 0, half_nan_bits_differ = 0, bf16_nan_bits_differ = 0, tf32_nan_to_inf = 0, tf32_low_bits = 0;
  size_t tf32_rna_rne_differ = 0;  // inputs where ties-away and ties-to-even disagree
  for (size_t i = 0; i < n; ++i) {
    const float x = in.x[i];
    const uint32_t xb = bits_of(x);
    auto desc = [&]() { return hex(xb, 8) + " (" + std::to_string(x) + ")"; };
    const uint16_t want_h = float_to_half_bits(x), want_b = float_to_bf16_bits(x);
    const uint32_t want_t = bits_of(round_to_tf32(x));
    const uint32_t got_t_raw = bits_of(gpu_tf32[i]);
    const uint32_t got_t = got_t_raw & 0xFFFFE000u;
    tf32_low_bits += (got_t_raw & 0x1FFFu) != 0;

    if (std::isnan(x)) {
      ++nans;
      if (!half_bits_is_nan(gpu_half[i]) || !half_bits_is_nan(want_h))
        half.add("NaN " + desc() + ": gpu " + hex(gpu_half[i], 4) + " ours " + hex(want_h, 4));
      if (!bf16_bits_is_nan(gpu_bf16[i]) || !bf16_bits_is_nan(want_b))
        bf16.add("NaN " + desc() + ": gpu " + hex(gpu_bf16[i], 4) + " ours " + hex(want_b, 4));
      half_nan_bits_differ += gpu_half[i] != want_h;
      bf16_nan_bits_differ += gpu_bf16[i] != want_b;
      if (!f32_bits_is_nan(want_t)) tf32.add("NaN " + desc() + ": round_to_tf32 gave a non-NaN " + hex(want_t, 8));
      tf32_nan_to_inf += (got_t & 0x7FFFFFFFu) == 0x7F800000u;
      continue;
    }
    if (gpu_half[i] != want_h) half.add(desc() + ": gpu " + hex(gpu_half[i], 4) + " ours " + hex(want_h, 4));
    if (gpu_bf16[i] != want_b) bf16.add(desc() + ": gpu " + hex(gpu_bf16[i], 4) + " ours " + hex(want_b, 4));
    const uint32_t rne = bits_of(round_to_tf32_rne(x)), rz = bits_of(truncate_to_tf32(x));
    tf32_rna_rne_differ += rne != want_t;
    if (got_t != want_t)
      tf32.add(desc() + ": gpu " + hex(got_t_raw, 8) + " ours (RNA) " + hex(want_t, 8) + (got_t == rne ? " = RNE" : "") +
               (got_t == rz ? " = truncation" : ""));
  }

  std::cout << "[ INFO     ] " << n << " inputs (" << in.half_ties << " fp16, " << in.bf16_ties << " bf16, "
            << in.tf32_ties << " tf32 ties with their neighbours; " << in.subnormals << " fp32 subnormals; " << nans
            << " NaNs), " << tf32_rna_rne_differ << " where TF32 RNA and RNE differ\n"
            << "[ INFO     ] NaNs whose bits differ (both NaN): fp16 " << half_nan_bits_differ << ", bf16 "
            << bf16_nan_bits_differ << "; TF32 NaNs the GPU turned into inf: " << tf32_nan_to_inf
            << "; TF32 results with non-zero low 13 bits: " << tf32_low_bits << "\n";
  ::testing::Test::RecordProperty("inputs", static_cast<int>(n));
  ::testing::Test::RecordProperty("tf32_nan_to_inf", static_cast<int>(tf32_nan_to_inf));
  EXPECT_EQ(half.count, 0u) << "float_to_half_bits differs from __float2half_rn:" << half.first.str();
  EXPECT_EQ(bf16.count, 0u) << "float_to_bf16_bits differs from __float2bfloat16_rn:" << bf16.first.str();
  EXPECT_EQ(tf32.count, 0u) << "round_to_tf32 differs from cvt.rna.tf32.f32 (top 19 bits):" << tf32.first.str();
  EXPECT_GT(tf32_rna_rne_differ, 1000u) << "the inputs must tell ties-away from ties-to-even apart";
}

TEST(CudaConvertProbe, WithoutAGpuItThrowsTheReason) {
  const std::optional<std::string> reason = cuda_unavailable_reason();
  if (!reason) GTEST_SKIP() << "a usable CUDA device is present";
  const float x = 1.0f;
  uint16_t h = 0, b = 0;
  float t = 0.0f;
  try {
    cuda_convert_probe(&x, 1, &h, &b, &t);
    FAIL() << "cuda_convert_probe succeeded although: " << *reason;
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()), *reason);
  }
}

}  // namespace
}  // namespace mpb
