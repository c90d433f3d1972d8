// FP8 operands of Device::gemm against a float64 GEMM of the quantized
// operands, for any backend (tests/backends/cpu/test_cpu_gemm_fp8.cpp on the CPU,
// tests/gpu/test_cuda_gemm_fp8.cpp on CUDA).
//
// The quantization itself is core/fp8.h (proven against a float64 spec
// reference and ml_dtypes in tests/core/test_fp8.cpp and
// tests/numerics/test_fp8_ml_dtypes.py); here it only defines the expected
// operands: qx = fp8(x * scale, saturating) / scale. What this proves is the
// GEMM's use of it: the right format per operand, the scale applied and
// undone, saturation instead of NaN, amax folded with max (NaN sticks), the
// saturated count added, and fp32 accumulation.
//
// Tolerance: the products of FP8 values (<= 4 significant bits each) are
// exact in fp32, so only the k-term sum rounds: |C - C_ref| <= gamma_k
// sum|qa qb| <= (k + 1) u sum|qa qb| (Higham Thm 3.1, any summation order),
// u the accumulator's unit roundoff: 2^-24 for fp32 sums (the CPU). A
// worst-case bound: it cannot fail on a correct GEMM, and an unquantized
// operand (checked to differ by far more somewhere) would. A backend whose
// accumulator keeps fewer bits passes its own u (tests/gpu/test_cuda_gemm_fp8.cpp).
//
// With a bias (Epilogue::Bias) or beta != 0 the result also takes one fp32
// rounding of acc + bias + beta * C0 in the epilogue (<= 2^-24 of its
// magnitude; 2^-23 (mag + |bias| + |beta C0|) is taken). The bias is the one
// the backend adds: Fp8Check::bias_rounding says which dtype it rounds the
// parameter to first (cuBLASLt's FP8 kernels take a bf16 bias for an fp32
// output, so the CUDA reference rounds it to bf16 as Device::cast does, RNE;
// the CPU, and the CUDA fallback for a refused epilogue, add it unrounded). The check then asserts the rounding was
// visible: an unrounded bias is outside the bound somewhere.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/device.h"
#include "core/fp8.h"
#include "core/numerics.h"

namespace mpb::fp8_gemm_test {

struct Fp8Slot {
  DeviceBuffer scale, amax, saturated;
};

inline Fp8Slot make_slot(Device& dev, float scale, float amax0) {
  Fp8Slot s{dev.alloc(Shape{1}, DType::F32, MemCategory::Workspace),
            dev.alloc(Shape{1}, DType::F32, MemCategory::Workspace),
            dev.alloc(Shape{1}, DType::F32, MemCategory::Workspace)};
  const float zero = 0.0f;
  dev.upload(s.scale, &scale);
  dev.upload(s.amax, &amax0);
  dev.upload(s.saturated, &zero);
  return s;
}

inline float read1(Device& dev, const Tensor& t) {
  float v;
  dev.download(&v, t);
  return v;
}

inline GemmFp8Operand operand(const Fp8Slot& s, Fp8Format f) {
  GemmFp8Operand o;
  o.enabled = true;
  o.format = f;
  o.scale = s.scale;
  o.amax = s.amax;
  o.saturated = s.saturated;
  return o;
}

struct Case {
  DType dtype;
  float scale_a, scale_b;
  bool a_saturates, b_saturates;  // the case exercises saturation of that operand
  // B's format: E5M2 as a gradient is (the backward GEMMs), E4M3 as a weight
  // is (the forward GEMM, which the CUDA backend runs with fast accumulation).
  Fp8Format format_b = Fp8Format::E5M2;
};

// A: activations/weights (E4M3) up to ~40; B: gradients (E5M2) or weights (E4M3), ~1e-5.
inline const Case kFp8Cases[] = {
    Case{DType::F32, 16.0f, 0x1p24f, true, false},   // some of A saturates at 448
    Case{DType::BF16, 8.0f, 0x1p31f, false, true},   // B saturates above 57344 / 2^31 = 2.7e-5
    Case{DType::F32, 0.25f, 0x1p10f, false, false},  // B mostly subnormal or zero
    Case{DType::BF16, 4.0f, 0x1p24f, false, true, Fp8Format::E4M3}};  // forward: B saturates above 448 / 2^24

struct Dims {
  int64_t m, n, k;
};
// k = 41 is no multiple of 16 (the CUDA path pads it), nor are n = 23 (its
// fp32 rows are 92 bytes) and m = 19: the CUDA path writes C through a
// [32, 32] scratch (backends/cuda/fp8_gemm_layout.h).
inline constexpr Dims kOddDims{19, 23, 41};
// m, n, k multiples of 16: no padding, C written directly. (m was 19 here
// until the first GPU run, when the CUDA path did not pad m and every FP8
// GEMM was refused by cublasLtMatmul.)
inline constexpr Dims kAlignedDims{32, 48, 64};

struct Fp8Check {
  Dims dims = kOddDims;
  double accum_u = 0x1p-24;            // the accumulator's unit roundoff (fp32 sums)
  // None, or Bias / BiasGelu with an fp32 bias (BiasGelu also writes an fp32
  // pre_act, which the CUDA path passes through its GELU aux).
  Epilogue epilogue = Epilogue::None;
  DType bias_rounding = DType::F32;    // the dtype the backend rounds that bias to (F32: unrounded)
  float beta = 0.0f;                   // != 0: accumulate into a C holding values
};

// Runs one FP8 GEMM of cs on dev with A stored [m,k] or, trans_a, [k,m] and
// B stored [k,n] or, trans_b, [n,k], and checks it as the top of the file says.
inline void check_fp8_gemm(Device& device, const Case& cs, bool trans_a, bool trans_b, const Fp8Check& opt = {}) {
  const int64_t m = opt.dims.m, n = opt.dims.n, k = opt.dims.k;
  const double accum_u = opt.accum_u;
  const Fp8Format fb = cs.format_b;
  Device* dev = &device;
  std::mt19937 rng(15);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // A: activations/weights (E4M3), values up to ~40 so that scale 16 saturates
  // some; B: gradients (E5M2), small values that need a large scale.
  std::vector<float> a(m * k), b(k * n);
  for (auto& x : a) x = 10.0f * nd(rng);
  for (auto& x : b) x = 1e-5f * nd(rng);
  auto store = [&](std::vector<float>& v) {  // the operand as stored (bf16 rounds it)
    if (cs.dtype == DType::BF16)
      for (auto& x : v) x = round_to_bf16(x);
  };
  store(a);
  store(b);
  auto upload = [&](const std::vector<float>& v, Shape shape) {
    DeviceBuffer buf = dev->alloc(shape, cs.dtype, MemCategory::Activations);
    if (cs.dtype == DType::F32) {
      dev->upload(buf, v.data());
    } else {
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) h[i] = float_to_bf16_bits(v[i]);
      dev->upload(buf, h.data());
    }
    return buf;
  };
  // a[i * k + p] and b[p * n + j] are the logical A(i,p), B(p,j); stored transposed where asked.
  auto stored = [](const std::vector<float>& v, int64_t rows, int64_t cols, bool transpose) {
    if (!transpose) return v;
    std::vector<float> t(v.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
    return t;
  };
  DeviceBuffer da = upload(stored(a, m, k, trans_a), trans_a ? Shape{k, m} : Shape{m, k});
  DeviceBuffer db = upload(stored(b, k, n, trans_b), trans_b ? Shape{n, k} : Shape{k, n});
  DeviceBuffer dc = dev->alloc(Shape{m, n}, DType::F32, MemCategory::Activations);
  // C's values before the GEMM (read when beta != 0) and the bias: of the
  // products' order (~1e-3), the bias larger (~0.1) so that its bf16
  // rounding (up to 2^-9 of it) stands out of the bound.
  std::vector<float> c0(m * n, 0.0f), bias(n, 0.0f);
  if (opt.beta != 0.0f)
    for (auto& x : c0) x = 1e-3f * nd(rng);
  const bool has_bias = opt.epilogue != Epilogue::None, gelu = opt.epilogue == Epilogue::BiasGelu;
  if (has_bias)
    for (auto& x : bias) x = 0.1f * nd(rng);
  dev->upload(dc, c0.data());
  DeviceBuffer dbias = dev->alloc(Shape{n}, DType::F32, MemCategory::Params);
  dev->upload(dbias, bias.data());
  DeviceBuffer dpre = dev->alloc(Shape{m, n}, DType::F32, MemCategory::Activations);
  Fp8Slot sa = make_slot(*dev, cs.scale_a, 0.0f), sb = make_slot(*dev, cs.scale_b, 0.0f);

  GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.trans_a = trans_a, g.trans_b = trans_b;
  g.a = da, g.b = db, g.c = dc;
  g.compute = cs.dtype == DType::F32 ? GemmCompute::F32 : GemmCompute::BF16;
  g.beta = opt.beta;
  if (has_bias) {
    g.epilogue = opt.epilogue;
    g.bias = dbias;
  }
  if (gelu) g.pre_act = dpre;
  g.fp8_a = operand(sa, Fp8Format::E4M3);
  g.fp8_b = operand(sb, fb);
  int64_t fallbacks_before = 0;
  for (const auto& [epilogue, calls] : dev->counters().gemm_fallbacks) fallbacks_before += calls;
  dev->gemm(g);
  int64_t fallbacks_after = 0;
  for (const auto& [epilogue, calls] : dev->counters().gemm_fallbacks) fallbacks_after += calls;
  // A refused epilogue runs the counted fallback, which adds the bias in
  // fp32, unrounded, as the CPU does (backends/cuda/gemm_epilogues.cpp
  // forward_fallback): the first GPU run's BiasGelu with pre_act did, and
  // was held to the fused path's bf16 bias.
  const DType bias_rounding = fallbacks_after > fallbacks_before ? DType::F32 : opt.bias_rounding;
  std::vector<float> c(m * n), pre(m * n);
  dev->download(c.data(), dc);
  if (gelu) dev->download(pre.data(), dpre);

  auto quantize = [](float x, float s, Fp8Format f) {
    return static_cast<double>(fp8_bits_to_float(float_to_fp8_bits(x * s, f, true), f)) / s;
  };
  double amax_a = 0, amax_b = 0;
  float sat_a = 0, sat_b = 0;
  for (float x : a) amax_a = std::max(amax_a, std::fabs(double(x))), sat_a += std::fabs(x * cs.scale_a) > kE4M3Max;
  for (float x : b) amax_b = std::max(amax_b, std::fabs(double(x))), sat_b += std::fabs(x * cs.scale_b) > fp8_max(fb);
  EXPECT_EQ(read1(*dev, sa.amax), amax_a);
  EXPECT_EQ(read1(*dev, sb.amax), amax_b);
  EXPECT_EQ(read1(*dev, sa.saturated), sat_a);
  EXPECT_EQ(read1(*dev, sb.saturated), sat_b);
  EXPECT_EQ(sat_a > 0, cs.a_saturates);
  EXPECT_EQ(sat_b > 0, cs.b_saturates);

  double worst_unquantized = 0, worst_unrounded_bias = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0, raw = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double qa = quantize(a[i * k + p], cs.scale_a, Fp8Format::E4M3);
        const double qb = quantize(b[p * n + j], cs.scale_b, fb);
        ref += qa * qb;
        mag += std::fabs(qa * qb);
        raw += double(a[i * k + p]) * b[p * n + j];
      }
      const double added_bias = bias_rounding == DType::BF16 ? round_to_bf16(bias[j]) : bias[j];
      const double c_in = double(opt.beta) * c0[i * n + j];
      const double bound =
          (k + 1) * accum_u * mag + 0x1p-23 * (mag + std::fabs(added_bias) + std::fabs(c_in));
      ref += added_bias + c_in;
      raw += added_bias + c_in;
      if (gelu) {
        // pre_act holds the GEMM + bias; C its GELU. GELU's slope is at most
        // 1.13, and a library's GELU may differ from the tanh formula by
        // 2^-10 relative + 1e-6 (the op checks' allowance, opcheck/cases_gemm.cpp).
        ASSERT_LE(std::fabs(pre[i * n + j] - ref), bound) << "pre_act " << i << "," << j;
        const double gelu_ref = 0.5 * ref * (1.0 + std::tanh(0.7978845608028654 * (ref + 0.044715 * ref * ref * ref)));
        ASSERT_LE(std::fabs(c[i * n + j] - gelu_ref), 1.13 * bound + std::ldexp(std::fabs(ref), -10) + 1e-6)
            << "gelu " << i << "," << j;
      } else {
        ASSERT_LE(std::fabs(c[i * n + j] - ref), bound) << i << "," << j;
      }
      worst_unquantized = std::max(worst_unquantized, std::fabs(raw - ref) / (bound + 1e-30));
      worst_unrounded_bias = std::max(worst_unrounded_bias, std::fabs(double(bias[j]) - added_bias) / (bound + 1e-30));
    }
  // The bias the backend adds really is the rounded one: the unrounded
  // bias would be outside the bound somewhere (always, when rounded).
  if (has_bias && bias_rounding != DType::F32) {
    EXPECT_GT(worst_unrounded_bias, 2.0);
  }
  // The operands really were quantized: the unquantized product is far
  // outside the bound somewhere (100x with fp32 sums; a coarser accumulator's
  // wider bound leaves less room, but never less than 2x).
  EXPECT_GT(worst_unquantized, std::max(2.0, 100.0 * 0x1p-24 / accum_u));

  // A second GEMM folds into amax with max (not overwrite) and adds to the count.
  dev->gemm(g);
  EXPECT_EQ(read1(*dev, sa.amax), amax_a);
  EXPECT_EQ(read1(*dev, sa.saturated), 2 * sat_a);
}

}  // namespace mpb::fp8_gemm_test
