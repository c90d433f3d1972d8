// Device::gemm on the CPU backend (oneDNN) against a float64 GEMM written here.
//
// What is proven
//  * Every compute mode (F32, TF32, F16, BF16) x all four trans_a/trans_b
//    combinations x two odd shapes (37x29x53 and 128x96x200): alpha != 1,
//    beta = 1 accumulation into a non-zero C (GradMode::Accumulate), beta = 0
//    overwriting a C full of NaN, and the Bias / BiasRelu / BiasGelu epilogues
//    (which require alpha == 1, beta == 0) with and without pre_act (pre_act =
//    the pre-activation, C = the activation; without an activation pre_act is
//    C bit for bit). C is fp32, and also the operands' 16-bit format when they
//    are 16-bit (the bias then in that format too, as half parameters are).
//  * The primitive cache tells apart alphas equal to 6 significant digits;
//    epilogues with alpha != 1 or beta != 0 are rejected.
//  * TF32 is "operands rounded to TF32 (nearest, ties away), exact products,
//    fp32 sums": random results match the double product of the *rounded*
//    operands to fp32-accumulation tolerance and are far from the product of
//    the unrounded ones; with k = 1 the result is bit-exact and the three
//    TF32 ties that tell RNA from RNE/truncation come out RNA.
//  * F16/BF16: operands are exactly the 16-bit values (the reference decodes
//    the stored bits with numerics_reference.h), fp32 accumulation; a 16-bit C
//    is the fp32 result rounded to nearest (half an ulp of the format).
//  * supports() and argument checking.
//
// Tolerances (u = 2^-24, the fp32 unit roundoff)
//  A dot product of length k summed in fp32 in ANY order (blocked, vectorised,
//  with or without FMA) has |computed - exact| <= gamma_k * sum_p |a_p b_p|,
//  gamma_k = k u / (1 - k u) (Higham, Accuracy and Stability, Thm 3.1; the
//  products of tf32/fp16/bf16 operands are exact in fp32, so only the sums
//  round). Scaling by alpha, adding beta*C and the bias, and rounding the
//  output add at most 4 more roundings of quantities bounded by
//      S = |alpha| sum_p |a_p b_p| + |beta C0| + |bias|,
//  so  |pre - pre_ref| <= (k + 5) u S     (the +1 covers gamma_k's denominator).
//  This is a worst-case bound, not a statistical one: it cannot fail on a
//  correct implementation, and any wrong element, transpose, alpha, beta or
//  bias shows up as an O(1) error against a bound of ~1e-5..1e-4.
//  A 16-bit output adds the rounding to the format: half an ulp of the format
//  at the value's magnitude. ReLU is 1-Lipschitz and exact. GELU propagates
//  the pre-activation error by at most max|gelu'| = 1.13 and adds its own fp32
//  evaluation error (the tanh approximation, ops/approx_math.h: <= 2e-7
//  absolute, or oneDNN's gelu_tanh when the epilogue is fused), bounded by
//  kGeluEvalAbs + kGeluEvalRel * |x| (see below).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/numerics.h"
#include "opcheck/host.h"
#include "opcheck/reference.h"

namespace {

using namespace mpb;
using opcheck::kU32;

// fp32 evaluation error of 0.5 x (1 + tanh(c (x + a x^3))): the tanh error
// (<= 2e-7 absolute for ours, see test_approx_math.cpp) times 0.5|x|, plus
// ~4 roundings of the O(|x|) intermediate products (4 u |x| = 2.4e-7 |x|), and
// the argument's rounding (relative ~3u of u, times sech^2 <= 1, times 0.5|x|).
// 1e-6 |x| covers all of it with a 2x margin; 1e-7 absolute covers x near 0.
// oneDNN's fused gelu_tanh is held to the same bound. Measured on the sweep
// below: both ours (split path, C vs gelu(pre_act)) and oneDNN's (fused
// epilogue, vs gelu of the Bias-only result) stay under 0.12 of it
// (worst ~4.9e-7 at x ~ 4).
constexpr double kGeluEvalAbs = 1e-7;
constexpr double kGeluEvalRel = 1e-6;

DType operand_dtype(GemmCompute c) {
  switch (c) {
    case GemmCompute::F16: return DType::F16;
    case GemmCompute::BF16: return DType::BF16;
    default: return DType::F32;
  }
}

// An operand as stored on the device plus the exact values the multiplier sees.
struct Operand {
  std::vector<float> f32;     // when stored as fp32
  std::vector<uint16_t> b16;  // when stored as fp16/bf16
  std::vector<double> value;  // exact value used by the reference
  std::vector<double> raw;    // TF32 only: the unrounded fp32 value
};

Operand make_operand(size_t n, GemmCompute compute, uint64_t seed) {
  std::vector<float> x = opcheck::random_nonzero(n, seed);
  Operand o;
  o.value.resize(n);
  switch (compute) {
    case GemmCompute::F32:
      o.f32 = x;
      for (size_t i = 0; i < n; ++i) o.value[i] = x[i];
      break;
    case GemmCompute::TF32:
      // The operands stay fp32 on the device; the reference multiplies their
      // TF32 roundings (round_to_tf32, proven against an independent
      // reference in test_numerics.cpp).
      o.f32 = x;
      o.raw.resize(n);
      for (size_t i = 0; i < n; ++i) {
        o.value[i] = round_to_tf32(x[i]);
        o.raw[i] = x[i];
      }
      break;
    case GemmCompute::F16:
    case GemmCompute::BF16: {
      const bool half = compute == GemmCompute::F16;
      o.b16.resize(n);
      for (size_t i = 0; i < n; ++i) {
        o.b16[i] = half ? float_to_half_bits(x[i]) : float_to_bf16_bits(x[i]);
        o.value[i] = half ? opcheck::half_value(o.b16[i]) : opcheck::bf16_value(o.b16[i]);
      }
      break;
    }
  }
  return o;
}

DeviceBuffer upload_operand(Device& dev, const Operand& o, Shape shape, DType dt) {
  return dt == DType::F32 ? opcheck::upload(dev, o.f32, shape, dt) : opcheck::upload(dev, o.b16, shape, dt);
}

// A [m,n] buffer of dtype `dt` holding `values` (exactly representable in dt).
DeviceBuffer upload_values(Device& dev, const std::vector<double>& values, Shape shape, DType dt) {
  if (dt == DType::F32) {
    std::vector<float> h(values.begin(), values.end());
    return opcheck::upload(dev, h, shape, dt);
  }
  std::vector<uint16_t> h(values.size());
  for (size_t i = 0; i < h.size(); ++i) {
    const float f = static_cast<float>(values[i]);
    h[i] = dt == DType::F16 ? float_to_half_bits(f) : float_to_bf16_bits(f);
  }
  return opcheck::upload(dev, h, shape, dt);
}

DeviceBuffer nan_filled(Device& dev, Shape shape, DType dt) {
  const auto n = static_cast<size_t>(shape.numel());
  if (dt == DType::F32) return opcheck::upload(dev, std::vector<float>(n, std::nanf("")), shape, dt);
  return opcheck::upload(dev, std::vector<uint16_t>(n, dt == DType::F16 ? 0x7E00 : 0x7FC0), shape, dt);
}

// The float64 GEMM: P = op(A) op(B) and S = op(|A|) op(|B|) (for the bound).
struct Product {
  std::vector<double> p, s;
};

Product reference_gemm(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t n,
                       int64_t k, bool ta, bool tb) {
  Product r;
  r.p.assign(static_cast<size_t>(m * n), 0.0);
  r.s.assign(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0, mag = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[static_cast<size_t>(p * m + i)] : a[static_cast<size_t>(i * k + p)];
        const double bv = tb ? b[static_cast<size_t>(j * k + p)] : b[static_cast<size_t>(p * n + j)];
        acc += av * bv;
        mag += std::fabs(av * bv);
      }
      r.p[static_cast<size_t>(i * n + j)] = acc;
      r.s[static_cast<size_t>(i * n + j)] = mag;
    }
  }
  return r;
}

struct Shape3 {
  int64_t m, n, k;
};
const Shape3 kShapes[] = {{37, 29, 53}, {128, 96, 200}};

using GemmParam = std::tuple<GemmCompute, bool, bool, int>;

class GemmVsReference : public ::testing::TestWithParam<GemmParam> {};

TEST_P(GemmVsReference, AllEpiloguesAndAccumulation) {
  const auto [compute, ta, tb, shape_index] = GetParam();
  const auto [m, n, k] = kShapes[shape_index];
  auto dev = make_cpu_device();
  const DType op_dt = operand_dtype(compute);
  const uint64_t seed = 1000 * static_cast<uint64_t>(compute) + 100 * ta + 10 * tb + shape_index;

  const Operand A = make_operand(static_cast<size_t>(m * k), compute, seed + 1);
  const Operand B = make_operand(static_cast<size_t>(k * n), compute, seed + 2);
  DeviceBuffer a = upload_operand(*dev, A, ta ? Shape{k, m} : Shape{m, k}, op_dt);
  DeviceBuffer b = upload_operand(*dev, B, tb ? Shape{n, k} : Shape{k, n}, op_dt);
  const Product ref = reference_gemm(A.value, B.value, m, n, k, ta, tb);
  // TF32 only: the product of the unrounded operands, to show the result is not it.
  const Product raw = compute == GemmCompute::TF32 ? reference_gemm(A.raw, B.raw, m, n, k, ta, tb) : Product{};

  // The bias: fp32, and (with a 16-bit C) in the operands' 16-bit dtype, as
  // half parameters are; values bf16-representable so both hold them exactly.
  std::vector<double> bias_host(static_cast<size_t>(n));
  {
    const std::vector<float> r = opcheck::random_nonzero(bias_host.size(), seed + 3);
    for (size_t j = 0; j < bias_host.size(); ++j) bias_host[j] = opcheck::bf16_value(float_to_bf16_bits(r[j]));
  }
  // C0 for accumulation: random values exactly representable in every C dtype used.
  std::vector<double> c0(static_cast<size_t>(m * n));
  {
    const std::vector<float> r = opcheck::random_nonzero(c0.size(), seed + 4);
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = opcheck::bf16_value(float_to_bf16_bits(r[i]));
  }
  for (size_t i = 0; i < c0.size(); ++i) {  // bf16 values with |x| in [0.1, 1] fit fp16 exactly too
    ASSERT_EQ(opcheck::half_value(float_to_half_bits(static_cast<float>(c0[i]))), c0[i]);
  }

  std::vector<DType> c_dtypes{DType::F32};
  if (op_dt != DType::F32) c_dtypes.push_back(op_dt);

  struct Case {
    float alpha, beta;
    Epilogue epi;
    bool pre;
  };
  // alpha != 1 and beta = 1 without an epilogue; the epilogues require
  // alpha == 1 and beta == 0 (device.h).
  std::vector<Case> cases{{0.75f, 1.0f, Epilogue::None, false}, {-0.5f, 1.0f, Epilogue::None, true}};
  for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::BiasRelu, Epilogue::BiasGelu})
    for (bool pre : {false, true}) cases.push_back({e == Epilogue::None ? 1.25f : 1.0f, 0.0f, e, pre});

  for (DType c_dt : c_dtypes) {
    for (const Case& cs : cases) {
      SCOPED_TRACE(std::string("C ") + dtype_name(c_dt) + ", alpha " + std::to_string(cs.alpha) + ", beta " +
                   std::to_string(cs.beta) + ", epilogue " + opcheck::epilogue_name(cs.epi) +
                   (cs.pre ? ", with pre_act" : ", no pre_act"));
      const Shape cshape{m, n};
      DeviceBuffer c = cs.beta != 0.0f ? upload_values(*dev, c0, cshape, c_dt) : nan_filled(*dev, cshape, c_dt);
      DeviceBuffer pre = cs.pre ? nan_filled(*dev, cshape, c_dt) : DeviceBuffer{};
      DeviceBuffer bias = upload_values(*dev, bias_host, Shape{n}, c_dt);

      GemmArgs g;
      g.m = m, g.n = n, g.k = k;
      g.trans_a = ta, g.trans_b = tb;
      g.a = a, g.b = b, g.c = c;
      g.alpha = cs.alpha, g.beta = cs.beta;
      g.compute = compute;
      g.epilogue = cs.epi;
      if (cs.epi != Epilogue::None) g.bias = bias;
      if (cs.pre) g.pre_act = pre;
      dev->gemm(g);

      const std::vector<double> got_c = opcheck::download_values(*dev, c);
      const std::vector<double> got_pre = cs.pre ? opcheck::download_values(*dev, pre) : std::vector<double>{};
      const bool has_bias = cs.epi != Epilogue::None;
      const bool act = cs.epi == Epilogue::BiasRelu || cs.epi == Epilogue::BiasGelu;
      int bad = 0;
      for (int64_t i = 0; i < m && bad < 5; ++i) {
        for (int64_t j = 0; j < n && bad < 5; ++j) {
          const auto idx = static_cast<size_t>(i * n + j);
          const double bj = has_bias ? bias_host[static_cast<size_t>(j)] : 0.0;
          const double beta_c = cs.beta * c0[idx];
          const double pre_ref = cs.alpha * ref.p[idx] + beta_c + bj;
          const double acc_tol =
              static_cast<double>(k + 5) * kU32 * (std::fabs(cs.alpha) * ref.s[idx] + std::fabs(beta_c) + std::fabs(bj));
          const double pre_tol = acc_tol + opcheck::half_ulp_of(c_dt, std::fabs(pre_ref) + acc_tol);
          double out_ref = pre_ref, out_tol = pre_tol;
          if (cs.epi == Epilogue::BiasRelu) {
            out_ref = pre_ref > 0 ? pre_ref : 0.0;
          } else if (cs.epi == Epilogue::BiasGelu) {
            out_ref = opcheck::gelu(pre_ref);
            const double x_max = std::fabs(pre_ref) + pre_tol;
            const double t = opcheck::kGeluLipschitz * pre_tol + kGeluEvalAbs + kGeluEvalRel * x_max;
            out_tol = t + opcheck::half_ulp_of(c_dt, std::fabs(out_ref) + t);
          }
          const double err = std::fabs(got_c[idx] - out_ref);
          if (!(err <= out_tol)) {
            ADD_FAILURE() << "C[" << i << "," << j << "] = " << got_c[idx] << ", reference " << out_ref
                          << ", |error| " << err << " > tolerance " << out_tol;
            ++bad;
          }
          if (cs.pre) {
            if (act) {
              const double perr = std::fabs(got_pre[idx] - pre_ref);
              if (!(perr <= pre_tol)) {
                ADD_FAILURE() << "pre_act[" << i << "," << j << "] = " << got_pre[idx] << ", reference " << pre_ref
                              << ", |error| " << perr << " > tolerance " << pre_tol;
                ++bad;
              }
              // fp32 C: C is the activation of exactly the stored pre-activation,
              // to the activation's own evaluation accuracy (tight: this is where
              // a wrong GELU shows, the accumulation bound above being wider).
              if (c_dt == DType::F32) {
                const double x = got_pre[idx];
                const double a_ref = cs.epi == Epilogue::BiasGelu ? opcheck::gelu(x) : (x > 0 ? x : 0.0);
                const double a_tol = cs.epi == Epilogue::BiasGelu ? kGeluEvalAbs + kGeluEvalRel * std::fabs(x) : 0.0;
                if (!(std::fabs(got_c[idx] - a_ref) <= a_tol)) {
                  ADD_FAILURE() << "C[" << i << "," << j << "] = " << got_c[idx] << " is not act(pre_act = " << x
                                << ") = " << a_ref;
                  ++bad;
                }
              }
            } else if (!(got_pre[idx] == got_c[idx])) {  // no activation: pre_act is C
              ADD_FAILURE() << "pre_act[" << i << "," << j << "] = " << got_pre[idx] << " != C " << got_c[idx];
              ++bad;
            }
          }
        }
      }

      // TF32: the result is the product of the ROUNDED operands. Over all
      // elements, the distance to that reference is fp32 noise (~1e-6), the
      // distance to the product of the unrounded operands is the TF32
      // rounding (~1e-4 relative per product): skipping the rounding (or
      // truncating instead) fails here even where the worst-case bound above
      // is too loose to notice. (Measured ratio d_rounded / d_raw: <= 0.0008;
      // truncation instead of rounding also fails here.)
      if (compute == GemmCompute::TF32 && cs.epi == Epilogue::None && c_dt == DType::F32) {
        double d_rounded = 0, d_raw = 0;
        for (size_t idx = 0; idx < got_c.size(); ++idx) {
          const double beta_c = cs.beta * c0[idx];
          d_rounded += std::fabs(got_c[idx] - (cs.alpha * ref.p[idx] + beta_c));
          d_raw += std::fabs(got_c[idx] - (cs.alpha * raw.p[idx] + beta_c));
        }
        EXPECT_LT(d_rounded, 0.02 * d_raw) << "TF32 result is not the product of TF32-rounded operands";
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<GemmParam>& info) {
  const auto [compute, ta, tb, s] = info.param;
  return std::string(gemm_compute_name(compute)) + (ta ? "_At" : "_A") + (tb ? "Bt" : "B") + "_" +
         std::to_string(kShapes[s].m) + "x" + std::to_string(kShapes[s].n) + "x" + std::to_string(kShapes[s].k);
}

INSTANTIATE_TEST_SUITE_P(CpuGemm, GemmVsReference,
                         ::testing::Combine(::testing::Values(GemmCompute::F32, GemmCompute::TF32, GemmCompute::F16,
                                                              GemmCompute::BF16),
                                            ::testing::Bool(), ::testing::Bool(), ::testing::Values(0, 1)),
                         param_name);

// k = 1 makes every element a single product, so TF32 results are exact:
// the product of two TF32 values (11 significant bits each) fits fp32's 24.
// The expected values use numerics_reference.h's independent value-based
// rounding (ties away from zero), not core/numerics.h.
TEST(CpuGemm, Tf32IsRoundingOfOperandsBitExact) {
  auto dev = make_cpu_device();
  // Column A (m x 1): the three ties of core/numerics.h's comment (RNA gives
  // 1025, 1025, 1026; RNE 1024, 1025, 1026; truncation 1024, 1024, 1025),
  // then random values with (almost surely) non-zero low mantissa bits.
  std::vector<float> av{1024.5f, 1024.75f, 1025.5f};
  for (float x : opcheck::random_nonzero(29, 77)) av.push_back(x);
  std::vector<float> bv{1.0f};
  for (float x : opcheck::random_nonzero(16, 78)) bv.push_back(x);
  const int64_t m = static_cast<int64_t>(av.size()), n = static_cast<int64_t>(bv.size());
  DeviceBuffer a = opcheck::upload(*dev, av, Shape{m, 1}, DType::F32);
  DeviceBuffer b = opcheck::upload(*dev, bv, Shape{1, n}, DType::F32);
  DeviceBuffer c32 = dev->alloc(Shape{m, n}, DType::F32, MemCategory::Activations);
  DeviceBuffer ctf = dev->alloc(Shape{m, n}, DType::F32, MemCategory::Activations);
  GemmArgs g;
  g.m = m, g.n = n, g.k = 1;
  g.a = a, g.b = b;
  g.c = c32;
  g.compute = GemmCompute::F32;
  dev->gemm(g);
  g.c = ctf;
  g.compute = GemmCompute::TF32;
  dev->gemm(g);
  const auto r32 = opcheck::download<float>(*dev, c32);
  const auto rtf = opcheck::download<float>(*dev, ctf);

  EXPECT_EQ(rtf[0 * n], 1025.0f);
  EXPECT_EQ(rtf[1 * n], 1025.0f);
  EXPECT_EQ(rtf[2 * n], 1026.0f);
  int differ = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const auto idx = static_cast<size_t>(i * n + j);
      const double ra = numref::tf32_ref(av[static_cast<size_t>(i)], numref::Rounding::NearestAway);
      const double rb = numref::tf32_ref(bv[static_cast<size_t>(j)], numref::Rounding::NearestAway);
      EXPECT_EQ(rtf[idx], static_cast<float>(ra * rb)) << "TF32 C[" << i << "," << j << "]";
      // fp32: the correctly rounded product of the unrounded operands.
      EXPECT_EQ(r32[idx], static_cast<float>(static_cast<double>(av[static_cast<size_t>(i)]) * bv[static_cast<size_t>(j)]))
          << "F32 C[" << i << "," << j << "]";
      differ += rtf[idx] != r32[idx];
    }
  }
  // With random low mantissa bits nearly every TF32 product differs from the
  // fp32 one: the test can fail if the rounding were skipped.
  EXPECT_GT(differ, m * n * 9 / 10);
}

// The primitive cache must tell apart calls that differ only in alpha. With
// k = 1 and operands of few significant bits, alpha * a * b is exact in fp32,
// so the result pins down the alpha that was applied.
TEST(CpuGemm, AlphaIsPartOfThePrimitive) {
  auto dev = make_cpu_device();
  const std::vector<float> av{1.0f, -1.5f, 0.75f, 1.25f};
  const std::vector<float> bv{1.0f, 0.5f, -1.75f};
  DeviceBuffer a = opcheck::upload(*dev, av, Shape{4, 1}, DType::F32);
  DeviceBuffer b = opcheck::upload(*dev, bv, Shape{1, 3}, DType::F32);
  DeviceBuffer c = dev->alloc(Shape{4, 3}, DType::F32, MemCategory::Activations);
  // 1 + 2^-20 and 1 + 2^-19 print as "1" with 6 significant digits; so do
  // 0.1234567 vs 0.1234568 as "0.123457".
  for (float alpha : {1.0f, 1.0f + 0x1p-20f, 1.0f + 0x1p-19f, 2.0f, 0.1234567f, 0.1234568f}) {
    SCOPED_TRACE("alpha " + std::to_string(static_cast<double>(alpha)));
    GemmArgs g;
    g.m = 4, g.n = 3, g.k = 1;
    g.a = a, g.b = b, g.c = c;
    g.alpha = alpha;
    dev->gemm(g);
    const auto r = opcheck::download<float>(*dev, c);
    for (size_t i = 0; i < 4; ++i)
      for (size_t j = 0; j < 3; ++j) {
        // a*b has <= 6 significant bits, alpha <= 24: the double product rounds once.
        const float want = static_cast<float>(static_cast<double>(alpha) * (static_cast<double>(av[i]) * bv[j]));
        EXPECT_EQ(r[i * 3 + j], want) << "C[" << i << "," << j << "]";
      }
  }
}

// device.h: epilogues add the bias (then the activation) to op(A) op(B) and
// require alpha == 1 and beta == 0; other alphas/betas are rejected, not
// silently computed as alpha * (A B + bias). Exact small integers.
TEST(CpuGemm, EpilogueContract) {
  auto dev = make_cpu_device();
  DeviceBuffer a = opcheck::upload(*dev, std::vector<float>{1.0f, 2.0f}, Shape{2, 1}, DType::F32);
  DeviceBuffer b = opcheck::upload(*dev, std::vector<float>{1.0f, 0.5f, 0.25f}, Shape{1, 3}, DType::F32);
  DeviceBuffer bias = opcheck::upload(*dev, std::vector<float>{10.0f, 20.0f, 30.0f}, Shape{3}, DType::F32);
  DeviceBuffer c = dev->alloc(Shape{2, 3}, DType::F32, MemCategory::Activations);
  for (Epilogue e : {Epilogue::Bias, Epilogue::BiasRelu, Epilogue::BiasGelu}) {
    SCOPED_TRACE(opcheck::epilogue_name(e));
    GemmArgs g;
    g.m = 2, g.n = 3, g.k = 1;
    g.a = a, g.b = b, g.c = c;
    g.epilogue = e;
    g.bias = bias;
    dev->gemm(g);
    const auto r = opcheck::download<float>(*dev, c);
    // a b + bias = {11, 20.5, 30.25; 12, 21, 30.5}; relu/gelu leave values
    // >= 11 unchanged (gelu(11) = 11 in fp32: 1 - tanh < 2^-25).
    const std::vector<float> want{11.0f, 20.5f, 30.25f, 12.0f, 21.0f, 30.5f};
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r[i], want[i]) << "C[" << i / 3 << "," << i % 3 << "]";
    g.alpha = 2.0f;
    EXPECT_THROW(dev->gemm(g), std::invalid_argument) << "alpha != 1 with an epilogue";
    g.alpha = 1.0f, g.beta = 1.0f;
    EXPECT_THROW(dev->gemm(g), std::invalid_argument) << "beta != 0 with an epilogue";
  }
}

TEST(CpuGemm, Support) {
  auto dev = make_cpu_device();
  EXPECT_EQ(dev->supports(Feature::GemmF32).level, SupportLevel::Native);
  EXPECT_EQ(dev->supports(Feature::GemmTf32).level, SupportLevel::Emulated);
  EXPECT_EQ(dev->supports(Feature::GemmF16).level, SupportLevel::Emulated);
  EXPECT_EQ(dev->supports(Feature::GemmFp8).level, SupportLevel::Emulated);
  // The word a cell records (device.emulated.gemm) for the same question.
  EXPECT_EQ(dev->gemm_support(GemmCompute::TF32), "emulated");
  // bf16 is native exactly when the CPU has AVX512-BF16 (vdpbf16ps). (Running
  // "emulated"; the test environment doesn't set it.)
  const bool has = opcheck::cpuinfo_has_flag("avx512_bf16");
  EXPECT_EQ(dev->supports(Feature::GemmBf16).level, has ? SupportLevel::Native : SupportLevel::Emulated)
      << "/proc/cpuinfo avx512_bf16: " << has;
}

TEST(CpuGemm, BadArgumentsThrow) {
  auto dev = make_cpu_device();
  DeviceBuffer a32 = dev->alloc(Shape{4, 3}, DType::F32, MemCategory::Activations);
  DeviceBuffer b32 = dev->alloc(Shape{3, 5}, DType::F32, MemCategory::Activations);
  DeviceBuffer c32 = dev->alloc(Shape{4, 5}, DType::F32, MemCategory::Activations);
  DeviceBuffer a16 = dev->alloc(Shape{4, 3}, DType::F16, MemCategory::Activations);
  DeviceBuffer b16 = dev->alloc(Shape{3, 5}, DType::F16, MemCategory::Activations);
  DeviceBuffer bb16 = dev->alloc(Shape{3, 5}, DType::BF16, MemCategory::Activations);
  DeviceBuffer bias5 = dev->alloc(Shape{5}, DType::F32, MemCategory::Params);
  DeviceBuffer bias4 = dev->alloc(Shape{4}, DType::F32, MemCategory::Params);
  DeviceBuffer wrong = dev->alloc(Shape{4, 4}, DType::F32, MemCategory::Activations);
  dev->fill(a32, 1.0f), dev->fill(b32, 1.0f), dev->fill(a16, 1.0f), dev->fill(b16, 1.0f), dev->fill(bb16, 1.0f);
  dev->fill(bias5, 0.0f), dev->fill(bias4, 0.0f);

  auto base = [&] {
    GemmArgs g;
    g.m = 4, g.n = 5, g.k = 3;
    g.a = a32, g.b = b32, g.c = c32;
    return g;
  };
  {
    GemmArgs g = base();
    EXPECT_NO_THROW(dev->gemm(g));  // the baseline is valid
  }
  auto expect_invalid = [&](const char* what, auto mutate) {
    GemmArgs g = base();
    mutate(g);
    EXPECT_THROW(dev->gemm(g), std::invalid_argument) << what;
  };
  expect_invalid("A too small", [&](GemmArgs& g) { g.k = 4; });
  expect_invalid("C wrong size", [&](GemmArgs& g) { g.c = wrong; });
  expect_invalid("B wrong size", [&](GemmArgs& g) { g.b = wrong; });
  expect_invalid("m = 0", [&](GemmArgs& g) { g.m = 0; });
  expect_invalid("F16 compute with fp32 operands", [&](GemmArgs& g) { g.compute = GemmCompute::F16; });
  expect_invalid("BF16 compute with fp32 operands", [&](GemmArgs& g) { g.compute = GemmCompute::BF16; });
  expect_invalid("F32 compute with fp16 operands", [&](GemmArgs& g) { g.a = a16, g.b = b16; });
  expect_invalid("TF32 compute with fp16 operands", [&](GemmArgs& g) {
    g.a = a16, g.b = b16, g.compute = GemmCompute::TF32;
  });
  expect_invalid("BF16 compute with fp16 operands", [&](GemmArgs& g) {
    g.a = a16, g.b = b16, g.compute = GemmCompute::BF16;
  });
  expect_invalid("A fp16, B bf16", [&](GemmArgs& g) { g.a = a16, g.b = bb16, g.compute = GemmCompute::F16; });
  expect_invalid("A fp32, B fp16", [&](GemmArgs& g) { g.b = b16; });
  expect_invalid("bias [m] instead of [n]", [&](GemmArgs& g) { g.epilogue = Epilogue::Bias, g.bias = bias4; });
  expect_invalid("bias missing", [&](GemmArgs& g) { g.epilogue = Epilogue::BiasRelu; });
  expect_invalid("pre_act wrong size", [&](GemmArgs& g) {
    g.epilogue = Epilogue::BiasGelu, g.bias = bias5, g.pre_act = wrong;
  });
}

}  // namespace
