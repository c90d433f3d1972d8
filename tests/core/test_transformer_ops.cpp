// The CPU backend's transformer ops (ops/cpu/transformer.cpp, attention.cpp,
// embedding.cpp, the batched path of gemm_onednn.cpp, the ignore rule of
// loss.cpp) against float64 references written here from the definitions.
//
// What is proven
//  * Batched GEMM: batch 3 with gaps between the matrices (strides larger
//    than the matrices), all four trans combinations, every compute mode
//    (fp32, emulated tf32/fp16 and native-or-emulated bf16: every batch's
//    operands are widened/rounded, not just the first), alpha != 1, beta = 1
//    over a non-zero C and beta = 0 over NaN; C's gaps are never written,
//    also for 16-bit C (which goes through an fp32 buffer). Epilogues and
//    overlapping strides are rejected.
//  * add: bit-exact "fp32 sum rounded to the output dtype", mixed dtypes.
//  * LayerNorm forward (mean, rstd, out) vs float64; residual_layernorm ==
//    add + layernorm_forward bit for bit; backward (dx Overwrite/Accumulate,
//    dgamma/dbeta Overwrite/Accumulate) vs the float64 analytic gradient, and
//    that analytic gradient vs central finite differences of the float64
//    forward (so the reference formula itself is checked).
//  * Head split/merge: vs the index math, round trips, 2-D/3-D/4-D packed
//    shapes, shape errors name the op.
//  * masked softmax forward/backward vs float64 with padded keys (their
//    probabilities exactly 0), fp32/bf16/fp16 storage.
//  * Fused attention forward (out, lse) and backward (dq, dk, dv) vs float64
//    and vs the unfused composition (batched GEMM -> masked softmax -> batched
//    GEMM and the reverse), with padding, T = 67 (not a multiple of either
//    tile size), fp32 and bf16 storage; deterministic across calls.
//  * Embedding forward (exact gather), backward with repeated ids, Overwrite
//    (every row written, unreferenced rows 0) and Accumulate (unreferenced rows
//    untouched), fp32 and bf16 tables, one rounding per row; out-of-range ids.
//  * Dropout: p = 0 is the identity; the kept fraction over 1e6 elements is
//    within 6 standard deviations of the binomial mean; kept values are exactly
//    x * (1/(1-p)); same seed -> same mask, another seed -> another mask; the
//    same call on the gradient zeroes exactly the dropped elements.
//  * Softmax cross-entropy with ignored labels (< 0): zero loss and gradient
//    rows, fused == unfused, count_correct skips them.
//
// Tolerances (u = 2^-24). Sums of n fp32 terms in any order are within
// gamma_n * sum|terms| <= (n + 1) u sum|terms| of the exact sum (Higham, Thm
// 3.1); each further fp32 operation adds u relative; exp_approx is within 2 ulp
// (4u relative); rounding to a 16-bit output adds half an ulp of that format
// at the result. Each test states its bound from these; they are worst-case
// bounds (they cannot fail on a correct implementation) that any indexing or
// formula error exceeds by orders of magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/numerics.h"
#include "core/precision.h"
#include "ops/attention.h"  // only the tile sizes, to pick a T that spans partial tiles
#include "tests/core/reference.h"

namespace {

using namespace mpb;
using testref::kU32;

// ---- helpers ----------------------------------------------------------------------------------
using testref::store;
using testref::Stored;
Stored store_values(Device& dev, const std::vector<double>& v, Shape shape, DType dt) {
  return store(dev, std::vector<float>(v.begin(), v.end()), shape, dt);
}
std::vector<double> values(Device& dev, const Tensor& t) { return testref::download_values(dev, t); }

// Raw storage bits (fp32: 32-bit patterns; 16-bit: widened patterns).
std::vector<uint32_t> raw_bits(Device& dev, const Tensor& t) {
  std::vector<uint32_t> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F32 || t.dtype == DType::I32) {
    auto h = testref::download<uint32_t>(dev, t);
    std::copy(h.begin(), h.end(), out.begin());
  } else {
    auto h = testref::download<uint16_t>(dev, t);
    std::copy(h.begin(), h.end(), out.begin());
  }
  return out;
}

DeviceBuffer nan_filled(Device& dev, Shape shape, DType dt) {
  const auto n = static_cast<size_t>(shape.numel());
  if (dt == DType::F32) return testref::upload(dev, std::vector<float>(n, std::nanf("")), shape, dt);
  return testref::upload(dev, std::vector<uint16_t>(n, dt == DType::F16 ? 0x7E00 : 0x7FC0), shape, dt);
}

DeviceBuffer upload_ints(Device& dev, const std::vector<int32_t>& v, Shape shape) {
  return testref::upload(dev, v, shape, DType::I32);
}

double hulp(DType t, double x) { return testref::half_ulp_of(t, x); }

const char* dt_name(DType t) { return dtype_name(t); }

// The value x (exact in fp32) takes in dt.
double stored_value(double x, DType dt) {
  const float f = static_cast<float>(x);
  switch (dt) {
    case DType::F16: return testref::half_value(float_to_half_bits(f));
    case DType::BF16: return testref::bf16_value(float_to_bf16_bits(f));
    default: return f;
  }
}

// ==== batched GEMM ===============================================================================
DType operand_dtype(GemmCompute c) {
  switch (c) {
    case GemmCompute::F16: return DType::F16;
    case GemmCompute::BF16: return DType::BF16;
    default: return DType::F32;
  }
}

// Values the multiplier sees for an operand stored from x under `compute`.
std::vector<double> multiplier_values(const std::vector<float>& x, GemmCompute compute) {
  std::vector<double> v(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    switch (compute) {
      case GemmCompute::F32: v[i] = x[i]; break;
      case GemmCompute::TF32: v[i] = round_to_tf32(x[i]); break;  // proven in test_numerics.cpp
      case GemmCompute::F16: v[i] = testref::half_value(float_to_half_bits(x[i])); break;
      case GemmCompute::BF16: v[i] = testref::bf16_value(float_to_bf16_bits(x[i])); break;
    }
  }
  return v;
}

TEST(BatchedGemm, AllTransCombosStridedEveryMode) {
  auto dev = make_cpu_device();
  const int64_t batch = 3, m = 13, n = 11, k = 17;
  // Gaps of 5, 3 and 7 elements between the matrices.
  const int64_t sa = m * k + 5, sb = k * n + 3, sc = m * n + 7;
  const int64_t na = (batch - 1) * sa + m * k, nb = (batch - 1) * sb + k * n, nc = (batch - 1) * sc + m * n;
  const float alpha = 0.75f;
  int case_id = 0;
  for (GemmCompute compute : {GemmCompute::F32, GemmCompute::TF32, GemmCompute::F16, GemmCompute::BF16}) {
    const DType op_dt = operand_dtype(compute);
    std::vector<DType> c_types{DType::F32};
    if (op_dt != DType::F32) c_types.push_back(op_dt);
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType c_dt : c_types)
          for (float beta : {0.0f, 1.0f}) {
            ++case_id;
            SCOPED_TRACE(std::string(gemm_compute_name(compute)) + " ta=" + std::to_string(ta) +
                         " tb=" + std::to_string(tb) + " C=" + dt_name(c_dt) + " beta=" + std::to_string(beta));
            const auto xa = testref::random_nonzero(static_cast<size_t>(na), 100 + case_id);
            const auto xb = testref::random_nonzero(static_cast<size_t>(nb), 200 + case_id);
            Stored A = store(*dev, xa, Shape{na}, op_dt);
            Stored B = store(*dev, xb, Shape{nb}, op_dt);
            const auto va = multiplier_values(xa, compute), vb = multiplier_values(xb, compute);
            // C: matrices random (beta = 1) or NaN (beta = 0); gaps 7.0 either way.
            std::vector<float> xc = testref::random_nonzero(static_cast<size_t>(nc), 300 + case_id);
            std::vector<bool> in_matrix(static_cast<size_t>(nc), false);
            for (int64_t bi = 0; bi < batch; ++bi)
              for (int64_t e = 0; e < m * n; ++e) in_matrix[static_cast<size_t>(bi * sc + e)] = true;
            for (int64_t i = 0; i < nc; ++i) {
              if (!in_matrix[static_cast<size_t>(i)]) xc[static_cast<size_t>(i)] = 7.0f;
              else if (beta == 0.0f) xc[static_cast<size_t>(i)] = std::nanf("");
            }
            Stored C = store(*dev, xc, Shape{nc}, c_dt);
            const auto c_before = raw_bits(*dev, C.buf);

            GemmArgs g;
            g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb;
            g.a = A.buf, g.b = B.buf, g.c = C.buf;
            g.alpha = alpha, g.beta = beta, g.compute = compute;
            g.batch = batch, g.stride_a = sa, g.stride_b = sb, g.stride_c = sc;
            dev->gemm(g);

            const auto got = values(*dev, C.buf);
            const auto c_after = raw_bits(*dev, C.buf);
            for (int64_t bi = 0; bi < batch; ++bi)
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) {
                  double acc = 0.0, mag = 0.0;
                  for (int64_t p = 0; p < k; ++p) {
                    const double av = va[static_cast<size_t>(bi * sa + (ta ? p * m + i : i * k + p))];
                    const double bv = vb[static_cast<size_t>(bi * sb + (tb ? j * k + p : p * n + j))];
                    acc += av * bv;
                    mag += std::fabs(av * bv);
                  }
                  const size_t ci = static_cast<size_t>(bi * sc + i * n + j);
                  const double c0 = beta != 0.0f ? C.value[ci] : 0.0;
                  const double ref = alpha * acc + beta * c0;
                  // (k + 5) u S as in test_cpu_gemm.cpp, plus the output rounding.
                  const double tol = (k + 5) * kU32 * (alpha * mag + std::fabs(beta * c0)) + hulp(c_dt, ref);
                  ASSERT_NEAR(got[ci], ref, tol) << "batch " << bi << " (" << i << "," << j << ")";
                }
            for (int64_t i = 0; i < nc; ++i) {
              if (in_matrix[static_cast<size_t>(i)]) continue;
              ASSERT_EQ(c_after[static_cast<size_t>(i)], c_before[static_cast<size_t>(i)]) << "gap element " << i;
            }
          }
  }
}

TEST(BatchedGemm, RejectsEpilogueAndOverlap) {
  auto dev = make_cpu_device();
  auto a = dev->alloc(Shape{2 * 4 * 4}, DType::F32, MemCategory::Activations);
  auto b = dev->alloc(Shape{2 * 4 * 4}, DType::F32, MemCategory::Activations);
  auto c = dev->alloc(Shape{2 * 4 * 4}, DType::F32, MemCategory::Activations);
  auto bias = dev->alloc(Shape{4}, DType::F32, MemCategory::Activations);
  dev->fill(a, 1.0f), dev->fill(b, 1.0f), dev->fill(bias, 0.0f);
  GemmArgs g;
  g.m = g.n = g.k = 4;
  g.a = a, g.b = b, g.c = c;
  g.batch = 2, g.stride_a = g.stride_b = g.stride_c = 16;
  dev->gemm(g);
  EXPECT_EQ(values(*dev, c)[0], 4.0);
  g.epilogue = Epilogue::Bias;
  g.bias = bias;
  EXPECT_THROW(dev->gemm(g), std::invalid_argument);
  g.epilogue = Epilogue::None;
  g.stride_c = 8;  // overlapping outputs
  EXPECT_THROW(dev->gemm(g), std::invalid_argument);
  g.stride_c = 16;
  g.batch = 3;  // beyond the buffers
  EXPECT_THROW(dev->gemm(g), std::invalid_argument);
}

// ==== add ===========================================================================================
TEST(TransformerOps, AddBitExactMixedDtypes) {
  auto dev = make_cpu_device();
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  for (int64_t n : {37, 40'009})  // below and above the OpenMP threshold
    for (DType ta : types)
      for (DType tb : types)
        for (DType to : types) {
          SCOPED_TRACE(std::to_string(n) + " " + dt_name(ta) + "+" + dt_name(tb) + "->" + dt_name(to));
          Stored a = store(*dev, testref::random_nonzero(static_cast<size_t>(n), 1, 0.1f, 100.0f), Shape{n}, ta);
          Stored b = store(*dev, testref::random_nonzero(static_cast<size_t>(n), 2, 0.1f, 100.0f), Shape{n}, tb);
          auto out = dev->alloc(Shape{n}, to, MemCategory::Activations);
          dev->add(out, a.buf, b.buf);
          const auto got = values(*dev, out);
          for (size_t i = 0; i < got.size(); ++i) {
            // The double sum of two floats is exact; rounding it to fp32 is the fp32 add.
            const double ref = stored_value(static_cast<float>(a.value[i] + b.value[i]), to);
            ASSERT_EQ(got[i], ref) << i;
          }
        }
}

// ==== LayerNorm =====================================================================================
struct LnRef {
  std::vector<double> mean, rstd, y;
};
LnRef layernorm_ref(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& b,
                    int64_t rows, int64_t C, double eps) {
  LnRef r;
  r.mean.resize(static_cast<size_t>(rows));
  r.rstd.resize(static_cast<size_t>(rows));
  r.y.resize(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c) s += x[static_cast<size_t>(i * C + c)];
    const double mu = s / C;
    double v = 0.0;
    for (int64_t c = 0; c < C; ++c) v += (x[static_cast<size_t>(i * C + c)] - mu) * (x[static_cast<size_t>(i * C + c)] - mu);
    const double rs = 1.0 / std::sqrt(v / C + eps);
    r.mean[static_cast<size_t>(i)] = mu;
    r.rstd[static_cast<size_t>(i)] = rs;
    for (int64_t c = 0; c < C; ++c)
      r.y[static_cast<size_t>(i * C + c)] =
          (x[static_cast<size_t>(i * C + c)] - mu) * rs * g[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
  }
  return r;
}

// Inputs with a per-row offset (so the centring matters) and spread.
std::vector<float> ln_input(int64_t rows, int64_t C, uint64_t seed) {
  auto x = testref::random_nonzero(static_cast<size_t>(rows * C), seed, 0.1f, 2.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < C; ++c) x[static_cast<size_t>(i * C + c)] += 0.25f * static_cast<float>(i % 7) - 0.5f;
  return x;
}

TEST(TransformerOps, LayerNormForwardVsFloat64) {
  auto dev = make_cpu_device();
  struct Case {
    int64_t rows, C;
    DType x, param;
  };
  // 64 x 300 is above the OpenMP threshold; 37 x 96 below.
  const Case cases[] = {{37, 96, DType::F32, DType::F32},   {64, 300, DType::F32, DType::F32},
                        {37, 96, DType::BF16, DType::F32},  {37, 96, DType::BF16, DType::BF16},
                        {64, 300, DType::F16, DType::F16}, {37, 96, DType::F16, DType::F32}};
  const float eps = 1e-5f;
  for (const Case& cs : cases) {
    SCOPED_TRACE(std::to_string(cs.rows) + "x" + std::to_string(cs.C) + " x=" + dt_name(cs.x) +
                 " param=" + dt_name(cs.param));
    const int64_t rows = cs.rows, C = cs.C;
    Stored x = store(*dev, ln_input(rows, C, 11), Shape{rows, C}, cs.x);
    Stored g = store(*dev, testref::random_nonzero(static_cast<size_t>(C), 12, 0.5f, 1.5f), Shape{C}, cs.param);
    Stored b = store(*dev, testref::random_nonzero(static_cast<size_t>(C), 13), Shape{C}, cs.param);
    auto out = nan_filled(*dev, Shape{rows, C}, cs.x);
    auto mean = nan_filled(*dev, Shape{rows}, DType::F32);
    auto rstd = nan_filled(*dev, Shape{rows}, DType::F32);
    dev->layernorm_forward(out, mean, rstd, x.buf, g.buf, b.buf, eps);
    const LnRef ref = layernorm_ref(x.value, g.value, b.value, rows, C, eps);
    const auto got_y = values(*dev, out), got_m = values(*dev, mean), got_r = values(*dev, rstd);
    for (int64_t i = 0; i < rows; ++i) {
      double abs_sum = 0.0;
      for (int64_t c = 0; c < C; ++c) abs_sum += std::fabs(x.value[static_cast<size_t>(i * C + c)]);
      // mean: the fp32 row sum (C u sum|x|) and the division (u |mean|).
      const double tol_mean = (C + 2) * kU32 * abs_sum / C + kU32 * std::fabs(ref.mean[static_cast<size_t>(i)]);
      // rstd: var's relative error is at most (C + 4) u (sum of squares of
      // rounded differences) plus (mean error / std)^2, negligible; the sqrt
      // halves it, +eps, sqrt and 1/x add 3u. (C + 10) u covers it with margin.
      const double rs = ref.rstd[static_cast<size_t>(i)];
      const double tol_rstd = (C + 10) * kU32 * rs;
      ASSERT_NEAR(got_m[static_cast<size_t>(i)], ref.mean[static_cast<size_t>(i)], tol_mean) << "row " << i;
      ASSERT_NEAR(got_r[static_cast<size_t>(i)], rs, tol_rstd) << "row " << i;
      for (int64_t c = 0; c < C; ++c) {
        const size_t e = static_cast<size_t>(i * C + c);
        const double xhat = (x.value[e] - ref.mean[static_cast<size_t>(i)]) * rs;
        const double gv = std::fabs(g.value[static_cast<size_t>(c)]);
        // xhat: its rstd error plus the mean error times rstd plus 3 roundings;
        // * gamma + beta: 2 more roundings of |y|.
        const double tol = gv * (std::fabs(xhat) * (C + 16) * kU32 + rs * tol_mean) + 2 * kU32 * std::fabs(ref.y[e]) +
                           hulp(cs.x, ref.y[e]);
        ASSERT_NEAR(got_y[e], ref.y[e], tol) << "(" << i << "," << c << ")";
      }
    }
  }
}

TEST(TransformerOps, ResidualLayerNormEqualsAddThenLayerNorm) {
  auto dev = make_cpu_device();
  struct Case {
    DType a, b, sum;
  };
  const Case cases[] = {{DType::F32, DType::F32, DType::F32},
                        {DType::BF16, DType::F32, DType::BF16},
                        {DType::F16, DType::F16, DType::F16}};
  const int64_t rows = 70, C = 257;  // above the OpenMP threshold, odd width
  for (const Case& cs : cases) {
    SCOPED_TRACE(std::string(dt_name(cs.a)) + "+" + dt_name(cs.b) + "->" + dt_name(cs.sum));
    Stored a = store(*dev, ln_input(rows, C, 21), Shape{rows, C}, cs.a);
    Stored b = store(*dev, testref::random_nonzero(static_cast<size_t>(rows * C), 22), Shape{rows, C}, cs.b);
    Stored g = store(*dev, testref::random_nonzero(static_cast<size_t>(C), 23, 0.5f, 1.5f), Shape{C}, DType::F32);
    Stored be = store(*dev, testref::random_nonzero(static_cast<size_t>(C), 24), Shape{C}, DType::F32);
    auto sum1 = dev->alloc(Shape{rows, C}, cs.sum, MemCategory::Activations);
    auto out1 = dev->alloc(Shape{rows, C}, cs.sum, MemCategory::Activations);
    auto m1 = dev->alloc(Shape{rows}, DType::F32, MemCategory::Activations);
    auto r1 = dev->alloc(Shape{rows}, DType::F32, MemCategory::Activations);
    dev->residual_layernorm_forward(out1, sum1, m1, r1, a.buf, b.buf, g.buf, be.buf, 1e-5f);
    auto sum2 = dev->alloc(Shape{rows, C}, cs.sum, MemCategory::Activations);
    auto out2 = dev->alloc(Shape{rows, C}, cs.sum, MemCategory::Activations);
    auto m2 = dev->alloc(Shape{rows}, DType::F32, MemCategory::Activations);
    auto r2 = dev->alloc(Shape{rows}, DType::F32, MemCategory::Activations);
    dev->add(sum2, a.buf, b.buf);
    dev->layernorm_forward(out2, m2, r2, sum2, g.buf, be.buf, 1e-5f);
    EXPECT_EQ(raw_bits(*dev, sum1), raw_bits(*dev, sum2));
    EXPECT_EQ(raw_bits(*dev, out1), raw_bits(*dev, out2));
    EXPECT_EQ(raw_bits(*dev, m1), raw_bits(*dev, m2));
    EXPECT_EQ(raw_bits(*dev, r1), raw_bits(*dev, r2));
  }
}

// The float64 LayerNorm gradient: dx, dgamma, dbeta for upstream dy.
struct LnGrad {
  std::vector<double> dx, dg, db;
};
LnGrad layernorm_grad_ref(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& dy,
                          const LnRef& f, int64_t rows, int64_t C) {
  LnGrad r;
  r.dx.resize(x.size());
  r.dg.assign(static_cast<size_t>(C), 0.0);
  r.db.assign(static_cast<size_t>(C), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const double mu = f.mean[static_cast<size_t>(i)], rs = f.rstd[static_cast<size_t>(i)];
    double a = 0.0, bsum = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      const size_t e = static_cast<size_t>(i * C + c);
      const double gc = dy[e] * g[static_cast<size_t>(c)];
      a += gc;
      bsum += gc * (x[e] - mu) * rs;
    }
    a /= C, bsum /= C;
    for (int64_t c = 0; c < C; ++c) {
      const size_t e = static_cast<size_t>(i * C + c);
      const double xhat = (x[e] - mu) * rs;
      r.dx[e] = rs * (dy[e] * g[static_cast<size_t>(c)] - a - xhat * bsum);
      r.dg[static_cast<size_t>(c)] += dy[e] * xhat;
      r.db[static_cast<size_t>(c)] += dy[e];
    }
  }
  return r;
}

TEST(TransformerOps, LayerNormBackwardVsFloat64) {
  auto dev = make_cpu_device();
  struct Case {
    int64_t rows, C;
    DType x, param;
  };
  const Case cases[] = {{37, 96, DType::F32, DType::F32}, {100, 200, DType::F32, DType::F32},
                        {37, 96, DType::BF16, DType::BF16}, {37, 96, DType::F16, DType::F32}};
  const double eps = 1e-5;
  for (const Case& cs : cases)
    for (GradMode dx_mode : {GradMode::Overwrite, GradMode::Accumulate})
      for (GradMode p_mode : {GradMode::Overwrite, GradMode::Accumulate}) {
        const bool dx_acc = dx_mode == GradMode::Accumulate, p_acc = p_mode == GradMode::Accumulate;
        SCOPED_TRACE(std::to_string(cs.rows) + "x" + std::to_string(cs.C) + " " + dt_name(cs.x) + " dx_acc=" +
                     std::to_string(dx_acc) + " p_acc=" + std::to_string(p_acc));
        const int64_t rows = cs.rows, C = cs.C;
        Stored x = store(*dev, ln_input(rows, C, 31), Shape{rows, C}, cs.x);
        Stored dy = store(*dev, testref::random_nonzero(static_cast<size_t>(rows * C), 32), Shape{rows, C}, cs.x);
        Stored g = store(*dev, testref::random_nonzero(static_cast<size_t>(C), 33, 0.5f, 1.5f), Shape{C}, cs.param);
        const std::vector<double> zero_c(static_cast<size_t>(C), 0.0);
        const LnRef f = layernorm_ref(x.value, g.value, zero_c, rows, C, eps);
        // mean/rstd as the forward would save them: the exact values rounded to fp32.
        Stored mean = store_values(*dev, f.mean, Shape{rows}, DType::F32);
        Stored rstd = store_values(*dev, f.rstd, Shape{rows}, DType::F32);
        Stored dx = dx_acc ? store(*dev, testref::random_nonzero(static_cast<size_t>(rows * C), 34), Shape{rows, C}, cs.x)
                           : Stored{nan_filled(*dev, Shape{rows, C}, cs.x), {}};
        Stored dg = p_acc ? store(*dev, testref::random_nonzero(static_cast<size_t>(C), 35), Shape{C}, cs.param)
                          : Stored{nan_filled(*dev, Shape{C}, cs.param), {}};
        Stored db = p_acc ? store(*dev, testref::random_nonzero(static_cast<size_t>(C), 36), Shape{C}, cs.param)
                          : Stored{nan_filled(*dev, Shape{C}, cs.param), {}};
        dev->layernorm_backward(dx.buf, dg.buf, db.buf, dy.buf, x.buf, mean.buf, rstd.buf, g.buf, dx_mode, p_mode);
        const LnGrad ref = layernorm_grad_ref(x.value, g.value, dy.value, f, rows, C);
        const auto got_dx = values(*dev, dx.buf), got_dg = values(*dev, dg.buf), got_db = values(*dev, db.buf);
        // Per column: sum |dy xhat|, sum |dy| * (xhat's own error), sum |dy|.
        std::vector<double> dg_mag(static_cast<size_t>(C), 0.0), dg_xerr(static_cast<size_t>(C), 0.0),
            db_mag(static_cast<size_t>(C), 0.0);
        for (int64_t i = 0; i < rows; ++i) {
          const double mu = f.mean[static_cast<size_t>(i)], rs = f.rstd[static_cast<size_t>(i)];
          double mean_g = 0.0, mean_gx = 0.0;
          for (int64_t c = 0; c < C; ++c) {
            const size_t e = static_cast<size_t>(i * C + c);
            const double xhat = (x.value[e] - mu) * rs;
            mean_g += std::fabs(dy.value[e] * g.value[static_cast<size_t>(c)]) / C;
            mean_gx += std::fabs(dy.value[e] * g.value[static_cast<size_t>(c)] * xhat) / C;
            // xhat from fp32 mean/rstd: relative 3u plus u|mean| rstd absolute.
            const double xhat_err = 4 * kU32 * (std::fabs(xhat) + std::fabs(mu) * rs);
            dg_mag[static_cast<size_t>(c)] += std::fabs(dy.value[e] * xhat);
            dg_xerr[static_cast<size_t>(c)] += std::fabs(dy.value[e]) * xhat_err;
            db_mag[static_cast<size_t>(c)] += std::fabs(dy.value[e]);
          }
          for (int64_t c = 0; c < C; ++c) {
            const size_t e = static_cast<size_t>(i * C + c);
            const double xhat = (x.value[e] - mu) * rs;
            const double gc = std::fabs(dy.value[e] * g.value[static_cast<size_t>(c)]);
            // dx = rstd (g - a - xhat b): the row sums a and b carry (C + 2) u of
            // their magnitudes, xhat 4u (|xhat| + |mean| rstd), plus ~6 roundings
            // of the terms; (C + 16) u on every magnitude covers it.
            const double mag = rs * (gc + mean_g + (std::fabs(xhat) + std::fabs(mu) * rs + 1.0) * mean_gx);
            const double ref_dx = ref.dx[e] + (dx_acc ? dx.value[e] : 0.0);
            const double tol = (C + 16) * kU32 * mag + 2 * kU32 * std::fabs(ref_dx) + hulp(cs.x, ref_dx);
            ASSERT_NEAR(got_dx[e], ref_dx, tol) << "dx (" << i << "," << c << ")";
          }
        }
        for (int64_t c = 0; c < C; ++c) {
          const size_t ci = static_cast<size_t>(c);
          // Sums over rows: (rows + 8) u of the magnitudes (the chunked order is
          // still one sum of `rows` terms), plus xhat's own error for dgamma.
          const double ref_dg = ref.dg[ci] + (p_acc ? dg.value[ci] : 0.0);
          const double ref_db = ref.db[ci] + (p_acc ? db.value[ci] : 0.0);
          const double tol_g =
              (rows + 8) * kU32 * (dg_mag[ci] + std::fabs(ref_dg)) + dg_xerr[ci] + hulp(cs.param, ref_dg);
          const double tol_b = (rows + 8) * kU32 * (db_mag[ci] + std::fabs(ref_db)) + hulp(cs.param, ref_db);
          ASSERT_NEAR(got_dg[ci], ref_dg, tol_g) << "dgamma " << c;
          ASSERT_NEAR(got_db[ci], ref_db, tol_b) << "dbeta " << c;
        }
      }
}

// The analytic float64 gradient (used above as the reference) against central
// differences of the float64 forward, and the op against both.
TEST(TransformerOps, LayerNormBackwardVsFiniteDifferences) {
  auto dev = make_cpu_device();
  const int64_t rows = 5, C = 24;
  const double eps = 1e-5;
  Stored x = store(*dev, ln_input(rows, C, 41), Shape{rows, C}, DType::F32);
  Stored dy = store(*dev, testref::random_nonzero(static_cast<size_t>(rows * C), 42), Shape{rows, C}, DType::F32);
  Stored g = store(*dev, testref::random_nonzero(static_cast<size_t>(C), 43, 0.5f, 1.5f), Shape{C}, DType::F32);
  Stored b = store(*dev, testref::random_nonzero(static_cast<size_t>(C), 44), Shape{C}, DType::F32);
  // L = sum(dy * LN(x; g, b)) in float64.
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& gv, const std::vector<double>& bv) {
    const LnRef f = layernorm_ref(xv, gv, bv, rows, C, eps);
    double l = 0.0;
    for (size_t e = 0; e < f.y.size(); ++e) l += dy.value[e] * f.y[e];
    return l;
  };
  // Central differences: truncation O(h^2 |L'''|) ~ 1e-12 and cancellation
  // ~ 1e-16 |L| / h ~ 1e-10 for h = 1e-6; agreement to 1e-7 is 3 orders tighter
  // than any formula error.
  const double h = 1e-6, fd_tol = 1e-7;
  auto fd = [&](std::vector<double> xv, std::vector<double> gv, std::vector<double> bv, int which, size_t idx) {
    std::vector<double>& t = which == 0 ? xv : (which == 1 ? gv : bv);
    const double x0 = t[idx];
    t[idx] = x0 + h;
    const double lp = loss(xv, gv, bv);
    t[idx] = x0 - h;
    const double lm = loss(xv, gv, bv);
    return (lp - lm) / (2 * h);
  };
  const LnRef f = layernorm_ref(x.value, g.value, b.value, rows, C, eps);
  const LnGrad an = layernorm_grad_ref(x.value, g.value, dy.value, f, rows, C);
  Stored mean = store_values(*dev, f.mean, Shape{rows}, DType::F32);
  Stored rstd = store_values(*dev, f.rstd, Shape{rows}, DType::F32);
  auto dx = dev->alloc(Shape{rows, C}, DType::F32, MemCategory::Activations);
  auto dg = dev->alloc(Shape{C}, DType::F32, MemCategory::Activations);
  auto db = dev->alloc(Shape{C}, DType::F32, MemCategory::Activations);
  dev->layernorm_backward(dx, dg, db, dy.buf, x.buf, mean.buf, rstd.buf, g.buf, GradMode::Overwrite,
                          GradMode::Overwrite);
  const auto got_dx = values(*dev, dx), got_dg = values(*dev, dg), got_db = values(*dev, db);
  // The op is fp32: 1e-5 absolute is ~100x its rounding error at these
  // magnitudes (|dx| ~ 1, C = 24) and far below any formula error.
  for (size_t e = 0; e < static_cast<size_t>(rows * C); ++e) {
    const double num = fd(x.value, g.value, b.value, 0, e);
    ASSERT_NEAR(an.dx[e], num, fd_tol) << "analytic dx " << e;
    ASSERT_NEAR(got_dx[e], num, 1e-5) << "op dx " << e;
  }
  for (size_t c = 0; c < static_cast<size_t>(C); ++c) {
    const double num_g = fd(x.value, g.value, b.value, 1, c), num_b = fd(x.value, g.value, b.value, 2, c);
    ASSERT_NEAR(an.dg[c], num_g, fd_tol) << "analytic dgamma " << c;
    ASSERT_NEAR(an.db[c], num_b, fd_tol) << "analytic dbeta " << c;
    ASSERT_NEAR(got_dg[c], num_g, 1e-5) << "op dgamma " << c;
    ASSERT_NEAR(got_db[c], num_b, 1e-5) << "op dbeta " << c;
  }
}

// ==== head layouts ==================================================================================
TEST(TransformerOps, HeadSplitMergeIndexMathAndRoundTrips) {
  auto dev = make_cpu_device();
  const int64_t B = 2, T = 5, H = 3, D = 4, C = H * D;
  for (DType packed_dt : {DType::F32, DType::BF16})
    for (DType head_dt : {DType::F32, DType::BF16}) {
      if (packed_dt == DType::F32 && head_dt == DType::BF16) continue;  // narrowing: not a round trip
      SCOPED_TRACE(std::string(dt_name(packed_dt)) + " -> " + dt_name(head_dt));
      for (Shape packed_shape : {Shape{B * T, 3 * C}, Shape{B, T, 3 * C}, Shape{B, T, 3, C}}) {
        Stored qkv = store(*dev, testref::random_nonzero(static_cast<size_t>(B * T * 3 * C), 51), packed_shape,
                           packed_dt);
        auto q = dev->alloc(Shape{B, H, T, D}, head_dt, MemCategory::Activations);
        auto k = dev->alloc(Shape{B, H, T, D}, head_dt, MemCategory::Activations);
        auto v = dev->alloc(Shape{B, H, T, D}, head_dt, MemCategory::Activations);
        dev->split_heads(q, k, v, qkv.buf);
        const std::vector<double> got[3] = {values(*dev, q), values(*dev, k), values(*dev, v)};
        for (int64_t part = 0; part < 3; ++part)
          for (int64_t b = 0; b < B; ++b)
            for (int64_t h = 0; h < H; ++h)
              for (int64_t t = 0; t < T; ++t)
                for (int64_t d = 0; d < D; ++d)
                  ASSERT_EQ(got[part][static_cast<size_t>(((b * H + h) * T + t) * D + d)],
                            qkv.value[static_cast<size_t>((b * T + t) * 3 * C + part * C + h * D + d)]);
        // Round trip into the packed dtype: exact (the values came from it).
        auto back = nan_filled(*dev, packed_shape, packed_dt);
        dev->merge_qkv_grads(back, q, k, v);
        EXPECT_EQ(values(*dev, back), qkv.value);
      }
      // merge_heads / split_heads_grad: [B,H,T,D] <-> [B*T, C] (and [B,T,H,D]).
      for (Shape merged_shape : {Shape{B * T, C}, Shape{B, T, H, D}}) {
        Stored in = store(*dev, testref::random_nonzero(static_cast<size_t>(B * H * T * D), 52), Shape{B, H, T, D},
                          packed_dt);
        auto out = nan_filled(*dev, merged_shape, head_dt);
        dev->merge_heads(out, in.buf);
        const auto got = values(*dev, out);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t t = 0; t < T; ++t)
              for (int64_t d = 0; d < D; ++d)
                ASSERT_EQ(got[static_cast<size_t>((b * T + t) * C + h * D + d)],
                          in.value[static_cast<size_t>(((b * H + h) * T + t) * D + d)]);
        auto back = nan_filled(*dev, Shape{B, H, T, D}, packed_dt);
        dev->split_heads_grad(back, out);
        EXPECT_EQ(values(*dev, back), in.value);
      }
    }
}

TEST(TransformerOps, HeadShapeErrorsNameTheOp) {
  auto dev = make_cpu_device();
  auto q = dev->alloc(Shape{2, 3, 5, 4}, DType::F32, MemCategory::Activations);
  auto k = dev->alloc(Shape{2, 3, 5, 4}, DType::F32, MemCategory::Activations);
  auto v = dev->alloc(Shape{2, 3, 5, 4}, DType::F32, MemCategory::Activations);
  auto bad_qkv = dev->alloc(Shape{10, 35}, DType::F32, MemCategory::Activations);
  auto flat_q = dev->alloc(Shape{10, 12}, DType::F32, MemCategory::Activations);
  auto bad_out = dev->alloc(Shape{10, 13}, DType::F32, MemCategory::Activations);
  auto expect_named = [](auto&& f, const std::string& op) {
    try {
      f();
      ADD_FAILURE() << op << " accepted a bad shape";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    }
  };
  expect_named([&] { dev->split_heads(q, k, v, bad_qkv); }, "split_heads");
  expect_named([&] { dev->merge_qkv_grads(bad_qkv, q, k, v); }, "merge_qkv_grads");
  expect_named([&] { dev->split_heads(flat_q, k, v, bad_qkv); }, "split_heads");  // q not 4-D
  expect_named([&] { dev->merge_heads(bad_out, q); }, "merge_heads");
  expect_named([&] { dev->split_heads_grad(q, bad_out); }, "split_heads_grad");
}

// ==== masked softmax ================================================================================
// key_valid for B = 2, T keys: batch 0 pads its last 3 keys, batch 1 keys 2 and T-2.
std::vector<int32_t> padding_mask(int64_t B, int64_t T) {
  std::vector<int32_t> kv(static_cast<size_t>(B * T), 1);
  for (int64_t j = T - 3; j < T; ++j) kv[static_cast<size_t>(j)] = 0;
  if (B > 1) kv[static_cast<size_t>(T + 2)] = 0, kv[static_cast<size_t>(T + T - 2)] = 0;
  return kv;
}

TEST(TransformerOps, MaskedSoftmaxForwardBackwardVsFloat64) {
  auto dev = make_cpu_device();
  const int64_t B = 2, H = 3, Tq = 7, Tk = 9;
  const float scale = 0.35355339f;  // 1/sqrt(8)
  const auto kv = padding_mask(B, Tk);
  auto key_valid = upload_ints(*dev, kv, Shape{B, Tk});
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dt_name(dt));
    const float mask = attention_mask_value(dt);
    const double mask_r = stored_value(mask, dt);
    Stored s = store(*dev, testref::random_nonzero(static_cast<size_t>(B * H * Tq * Tk), 61, 0.1f, 6.0f),
                     Shape{B, H, Tq, Tk}, dt);
    auto probs = nan_filled(*dev, Shape{B, H, Tq, Tk}, dt);
    dev->masked_softmax_forward(probs, s.buf, key_valid, scale, mask);
    const auto got = values(*dev, probs);
    std::vector<double> pref(got.size());
    for (int64_t r = 0; r < B * H * Tq; ++r) {
      const int64_t b = r / (H * Tq);
      std::vector<double> l(static_cast<size_t>(Tk));
      double mx = -INFINITY, lmax_abs = 0.0;
      for (int64_t j = 0; j < Tk; ++j) {
        const double sc = static_cast<double>(scale) * s.value[static_cast<size_t>(r * Tk + j)];
        l[static_cast<size_t>(j)] = sc + (1 - kv[static_cast<size_t>(b * Tk + j)]) * mask_r;
        mx = std::max(mx, l[static_cast<size_t>(j)]);
        lmax_abs = std::max(lmax_abs, std::fabs(sc));
      }
      double sum = 0.0;
      for (int64_t j = 0; j < Tk; ++j) sum += std::exp(l[static_cast<size_t>(j)] - mx);
      for (int64_t j = 0; j < Tk; ++j) {
        const size_t e = static_cast<size_t>(r * Tk + j);
        pref[e] = std::exp(l[static_cast<size_t>(j)] - mx) / sum;
        if (kv[static_cast<size_t>(b * Tk + j)] == 0) {
          ASSERT_EQ(got[e], 0.0) << "padded key " << j << " row " << r;
          continue;
        }
        // Logits carry u |scale s| (the product) and the max subtraction
        // u |l - max| <= 2u max|l|: p's relative error is at most twice the
        // logit error plus the fp32 sum (Tk u), exp_approx (4u), the division.
        const double tol = pref[e] * (6 * lmax_abs + Tk + 10) * kU32 + hulp(dt, pref[e]);
        ASSERT_NEAR(got[e], pref[e], tol) << "row " << r << " key " << j;
      }
    }
    // Backward from the stored probabilities and a random upstream gradient.
    Stored dp = store(*dev, testref::random_nonzero(got.size(), 62), Shape{B, H, Tq, Tk}, dt);
    auto ds = nan_filled(*dev, Shape{B, H, Tq, Tk}, dt);
    dev->softmax_backward(ds, probs, dp.buf, scale);
    const auto got_ds = values(*dev, ds);
    for (int64_t r = 0; r < B * H * Tq; ++r) {
      double dot = 0.0, dot_mag = 0.0;
      for (int64_t j = 0; j < Tk; ++j) {
        const size_t e = static_cast<size_t>(r * Tk + j);
        dot += got[e] * dp.value[e];
        dot_mag += std::fabs(got[e] * dp.value[e]);
      }
      for (int64_t j = 0; j < Tk; ++j) {
        const size_t e = static_cast<size_t>(r * Tk + j);
        const double ref = scale * got[e] * (dp.value[e] - dot);
        // dot: (Tk + 1) u dot_mag; then 3 roundings of the products.
        const double tol = scale * got[e] * ((Tk + 2) * kU32 * dot_mag + 4 * kU32 * (std::fabs(dp.value[e]) + std::fabs(dot))) +
                           hulp(dt, ref);
        ASSERT_NEAR(got_ds[e], ref, tol) << "row " << r << " key " << j;
      }
    }
  }
}

// ==== fused attention ===============================================================================
// One attention problem: stored inputs, the float64 reference and per-element
// error bounds.
struct AttnProblem {
  int64_t B, H, T, D;
  float scale, mask;
  DType dt;
  std::vector<int32_t> kv;
  Stored q, k, v, dout;
  DeviceBuffer key_valid;
  size_t at(int64_t bh, int64_t t, int64_t d) const { return static_cast<size_t>((bh * T + t) * D + d); }
};

AttnProblem make_attention(Device& dev, int64_t B, int64_t H, int64_t T, int64_t D, DType dt, uint64_t seed) {
  AttnProblem p;
  p.B = B, p.H = H, p.T = T, p.D = D, p.dt = dt;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  p.mask = attention_mask_value(dt);
  p.kv = padding_mask(B, T);
  const Shape s{B, H, T, D};
  const auto n = static_cast<size_t>(s.numel());
  // q, k up to 2 in magnitude: logits up to ~16, so the softmax is far from uniform.
  p.q = store(dev, testref::random_nonzero(n, seed, 0.1f, 2.0f), s, dt);
  p.k = store(dev, testref::random_nonzero(n, seed + 1, 0.1f, 2.0f), s, dt);
  p.v = store(dev, testref::random_nonzero(n, seed + 2), s, dt);
  p.dout = store(dev, testref::random_nonzero(n, seed + 3), s, dt);
  p.key_valid = upload_ints(dev, p.kv, Shape{B, T});
  return p;
}

struct AttnRef {
  std::vector<double> P, O, lse;   // exact
  std::vector<double> eps_p;       // per row: relative error bound of a computed P
  std::vector<double> tol_o, tol_lse;
};

// extra_p: extra relative error of P (rounding it to a 16-bit probs tensor).
AttnRef attention_ref(const AttnProblem& p, double extra_p, DType out_dt) {
  const int64_t T = p.T, D = p.D, BH = p.B * p.H;
  const double mask_r = stored_value(p.mask, p.dt);
  AttnRef r;
  r.P.assign(static_cast<size_t>(BH * T * T), 0.0);
  r.O.assign(static_cast<size_t>(BH * T * D), 0.0);
  r.lse.assign(static_cast<size_t>(BH * T), 0.0);
  r.eps_p.assign(static_cast<size_t>(BH * T), 0.0);
  r.tol_o.assign(r.O.size(), 0.0);
  r.tol_lse.assign(r.lse.size(), 0.0);
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t b = bh / p.H;
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> l(static_cast<size_t>(T));
      double mx = -INFINITY, dl = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        double dot = 0.0, mag = 0.0;
        for (int64_t d = 0; d < D; ++d) {
          dot += p.q.value[p.at(bh, i, d)] * p.k.value[p.at(bh, j, d)];
          mag += std::fabs(p.q.value[p.at(bh, i, d)] * p.k.value[p.at(bh, j, d)]);
        }
        const bool valid = p.kv[static_cast<size_t>(b * T + j)] != 0;
        l[static_cast<size_t>(j)] = p.scale * dot + (valid ? 0.0 : mask_r);
        mx = std::max(mx, l[static_cast<size_t>(j)]);
        // logit error: the fp32 dot ((D + 5) u mag, the GEMM bound of
        // test_cpu_gemm.cpp, for the unfused path), times scale, + 1 rounding.
        if (valid) dl = std::max(dl, p.scale * (D + 5) * kU32 * mag + kU32 * std::fabs(l[static_cast<size_t>(j)]));
      }
      double sum = 0.0, range = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        sum += std::exp(l[static_cast<size_t>(j)] - mx);
        if (p.kv[static_cast<size_t>(b * T + j)]) range = std::max(range, mx - l[static_cast<size_t>(j)]);
      }
      const size_t row = static_cast<size_t>(bh * T + i);
      r.lse[row] = mx + std::log(sum);
      // P's relative error: twice the logit error, the max subtraction and the
      // online rescales (2u * range), the fp32 sum (T u), exp_approx (4u) and
      // ~10 more roundings; plus the caller's extra (a 16-bit probs tensor).
      r.eps_p[row] = 2 * dl + 2 * kU32 * range + (T + 16) * kU32 + extra_p;
      r.tol_lse[row] = 3 * dl + r.eps_p[row] + 4 * kU32 * (std::fabs(r.lse[row]) + 1.0);
      for (int64_t j = 0; j < T; ++j)
        r.P[static_cast<size_t>((bh * T + i) * T + j)] = std::exp(l[static_cast<size_t>(j)] - mx) / sum;
      for (int64_t d = 0; d < D; ++d) {
        double o = 0.0, mag = 0.0;
        for (int64_t j = 0; j < T; ++j) {
          const double pij = r.P[static_cast<size_t>((bh * T + i) * T + j)];
          o += pij * p.v.value[p.at(bh, j, d)];
          mag += pij * std::fabs(p.v.value[p.at(bh, j, d)]);
        }
        r.O[p.at(bh, i, d)] = o;
        r.tol_o[p.at(bh, i, d)] = (r.eps_p[row] + (T + 4) * kU32) * mag + hulp(out_dt, o);
      }
    }
  }
  return r;
}

struct AttnGradRef {
  std::vector<double> dq, dk, dv, tol_dq, tol_dk, tol_dv;
};

// The exact gradients (dS = P (dP - rowsum(P dP))) and error bounds for a
// computation whose P has relative error eps_p, whose D_i has absolute error
// d_err[row], and whose dS carries an extra relative error extra_ds (a 16-bit
// dscores tensor).
AttnGradRef attention_grad_ref(const AttnProblem& p, const AttnRef& f, const std::vector<double>& d_err,
                               double extra_ds, DType out_dt) {
  const int64_t T = p.T, D = p.D, BH = p.B * p.H;
  AttnGradRef g;
  const size_t n = static_cast<size_t>(BH * T * D);
  g.dq.assign(n, 0.0), g.dk.assign(n, 0.0), g.dv.assign(n, 0.0);
  g.tol_dq.assign(n, 0.0), g.tol_dk.assign(n, 0.0), g.tol_dv.assign(n, 0.0);
  std::vector<double> mag_dq(n, 0.0), mag_dk(n, 0.0);
  for (int64_t bh = 0; bh < BH; ++bh) {
    for (int64_t i = 0; i < T; ++i) {
      const size_t row = static_cast<size_t>(bh * T + i);
      std::vector<double> dP(static_cast<size_t>(T)), dP_err(static_cast<size_t>(T));
      double Di = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        double s = 0.0, mag = 0.0;
        for (int64_t d = 0; d < D; ++d) {
          s += p.dout.value[p.at(bh, i, d)] * p.v.value[p.at(bh, j, d)];
          mag += std::fabs(p.dout.value[p.at(bh, i, d)] * p.v.value[p.at(bh, j, d)]);
        }
        dP[static_cast<size_t>(j)] = s;
        dP_err[static_cast<size_t>(j)] = (D + 2) * kU32 * mag;
        Di += f.P[static_cast<size_t>((bh * T + i) * T + j)] * s;
      }
      for (int64_t j = 0; j < T; ++j) {
        const double pij = f.P[static_cast<size_t>((bh * T + i) * T + j)];
        if (pij == 0.0) continue;  // padded key: exactly 0 everywhere
        const double diff = dP[static_cast<size_t>(j)] - Di;
        const double ds = pij * diff;
        const double ds_err = f.eps_p[row] * pij * std::fabs(diff) +
                              pij * (dP_err[static_cast<size_t>(j)] + d_err[row]) + (3 * kU32 + extra_ds) * std::fabs(ds);
        for (int64_t d = 0; d < D; ++d) {
          const double qv = p.q.value[p.at(bh, i, d)], kv = p.k.value[p.at(bh, j, d)];
          const double dov = p.dout.value[p.at(bh, i, d)];
          g.dq[p.at(bh, i, d)] += p.scale * ds * kv;
          g.dk[p.at(bh, j, d)] += p.scale * ds * qv;
          g.dv[p.at(bh, j, d)] += pij * dov;
          g.tol_dq[p.at(bh, i, d)] += p.scale * ds_err * std::fabs(kv);
          g.tol_dk[p.at(bh, j, d)] += p.scale * ds_err * std::fabs(qv);
          g.tol_dv[p.at(bh, j, d)] += (f.eps_p[row] + (T + 4) * kU32) * pij * std::fabs(dov);
          mag_dq[p.at(bh, i, d)] += p.scale * std::fabs(ds * kv);
          mag_dk[p.at(bh, j, d)] += p.scale * std::fabs(ds * qv);
        }
      }
    }
  }
  for (size_t e = 0; e < n; ++e) {
    // The sums over T keys / queries: (T + 4) u of their magnitudes; output rounding.
    g.tol_dq[e] += (T + 4) * kU32 * mag_dq[e] + hulp(out_dt, g.dq[e]);
    g.tol_dk[e] += (T + 4) * kU32 * mag_dk[e] + hulp(out_dt, g.dk[e]);
    g.tol_dv[e] += hulp(out_dt, g.dv[e]);
  }
  return g;
}

// D_i's error when computed from the stored O: |sum_d dO (O_stored - O)| plus
// its fp32 sum; unfused: rowsum(P dP) with P's error.
std::vector<double> d_err_fused(const AttnProblem& p, const AttnRef& f, const std::vector<double>& o_stored) {
  std::vector<double> e(static_cast<size_t>(p.B * p.H * p.T), 0.0);
  for (int64_t bh = 0; bh < p.B * p.H; ++bh)
    for (int64_t i = 0; i < p.T; ++i) {
      double diff = 0.0, mag = 0.0;
      for (int64_t d = 0; d < p.D; ++d) {
        diff += p.dout.value[p.at(bh, i, d)] * (o_stored[p.at(bh, i, d)] - f.O[p.at(bh, i, d)]);
        mag += std::fabs(p.dout.value[p.at(bh, i, d)] * o_stored[p.at(bh, i, d)]);
      }
      e[static_cast<size_t>(bh * p.T + i)] = std::fabs(diff) + (p.D + 2) * kU32 * mag;
    }
  return e;
}
std::vector<double> d_err_unfused(const AttnProblem& p, const AttnRef& f) {
  std::vector<double> e(static_cast<size_t>(p.B * p.H * p.T), 0.0);
  for (int64_t bh = 0; bh < p.B * p.H; ++bh)
    for (int64_t i = 0; i < p.T; ++i) {
      const size_t row = static_cast<size_t>(bh * p.T + i);
      double mag = 0.0;
      for (int64_t j = 0; j < p.T; ++j) {
        double dp = 0.0, dp_mag = 0.0;
        for (int64_t d = 0; d < p.D; ++d) {
          dp += p.dout.value[p.at(bh, i, d)] * p.v.value[p.at(bh, j, d)];
          dp_mag += std::fabs(p.dout.value[p.at(bh, i, d)] * p.v.value[p.at(bh, j, d)]);
        }
        const double pij = f.P[static_cast<size_t>((bh * p.T + i) * p.T + j)];
        mag += pij * (std::fabs(dp) * (1 + f.eps_p[row]) + (p.D + 2) * kU32 * dp_mag);
      }
      e[row] = (f.eps_p[row] + (p.T + 2) * kU32) * mag;
    }
  return e;
}

// The unfused path on the device: S = Q K^T, P = masked_softmax(S), O = P V,
// and its backward; intermediate scores fp32, probs/dscores in `inter` (the
// storage dtype: fp32, or bf16 as a bf16 pipeline stores them).
struct Unfused {
  DeviceBuffer out, dq, dk, dv;
};
Unfused run_unfused(Device& dev, const AttnProblem& p) {
  const int64_t T = p.T, D = p.D, BH = p.B * p.H;
  const DType inter = p.dt;
  const GemmCompute compute = p.dt == DType::F32 ? GemmCompute::F32 : GemmCompute::BF16;
  const Shape qs{p.B, p.H, T, D}, ss{p.B, p.H, T, T};
  auto gemm = [&](const Tensor& a, const Tensor& b, const Tensor& c, int64_t m, int64_t n, int64_t k, bool ta,
                  bool tb) {
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb;
    g.a = a, g.b = b, g.c = c, g.compute = compute;
    g.batch = BH, g.stride_a = m * k, g.stride_b = k * n, g.stride_c = m * n;
    dev.gemm(g);
  };
  auto scores = dev.alloc(ss, DType::F32, MemCategory::Workspace);
  auto probs = dev.alloc(ss, inter, MemCategory::Workspace);
  Unfused u;
  u.out = dev.alloc(qs, p.dt, MemCategory::Activations);
  gemm(p.q.buf, p.k.buf, scores, T, T, D, false, true);
  dev.masked_softmax_forward(probs, scores, p.key_valid, p.scale, p.mask);
  gemm(probs, p.v.buf, u.out, T, D, T, false, false);
  auto dprobs = dev.alloc(ss, DType::F32, MemCategory::Workspace);
  auto dscores = dev.alloc(ss, inter, MemCategory::Workspace);
  gemm(p.dout.buf, p.v.buf, dprobs, T, T, D, false, true);
  dev.softmax_backward(dscores, probs, dprobs, p.scale);
  u.dq = dev.alloc(qs, p.dt, MemCategory::Activations);
  u.dk = dev.alloc(qs, p.dt, MemCategory::Activations);
  u.dv = dev.alloc(qs, p.dt, MemCategory::Activations);
  gemm(dscores, p.k.buf, u.dq, T, D, T, false, false);    // dQ = dS K
  gemm(dscores, p.q.buf, u.dk, T, D, T, true, false);     // dK = dS^T Q
  gemm(probs, p.dout.buf, u.dv, T, D, T, true, false);    // dV = P^T dO
  return u;
}

void expect_within(const std::vector<double>& got, const std::vector<double>& ref, const std::vector<double>& tol,
                   const char* what) {
  for (size_t e = 0; e < got.size(); ++e) ASSERT_NEAR(got[e], ref[e], tol[e]) << what << " element " << e;
}

TEST(TransformerAttention, FusedForwardBackwardVsFloat64AndUnfused) {
  auto dev = make_cpu_device();
  // T = 67: three query tiles of 32 (the last of 3) and two key tiles of 64
  // (the last of 3); padding in both batch elements, across tiles.
  const int64_t B = 2, H = 2, T = 67, D = 16;
  static_assert(67 % scalar::kAttnTileQ != 0 && 67 % scalar::kAttnTileK != 0 && 67 > scalar::kAttnTileK,
                "T must span several, partial tiles");
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dt_name(dt));
    AttnProblem p = make_attention(*dev, B, H, T, D, dt, 71);
    const Shape qs{B, H, T, D};
    auto out = nan_filled(*dev, qs, dt);
    auto lse = nan_filled(*dev, Shape{B, H, T}, DType::F32);
    dev->attention_forward(out, lse, p.q.buf, p.k.buf, p.v.buf, p.key_valid, p.scale, p.mask);
    const AttnRef f = attention_ref(p, 0.0, dt);
    const auto got_o = values(*dev, out), got_lse = values(*dev, lse);
    expect_within(got_o, f.O, f.tol_o, "out");
    expect_within(got_lse, f.lse, f.tol_lse, "lse");

    auto dq = nan_filled(*dev, qs, dt), dk = nan_filled(*dev, qs, dt), dv = nan_filled(*dev, qs, dt);
    dev->attention_backward(dq, dk, dv, p.dout.buf, out, lse, p.q.buf, p.k.buf, p.v.buf, p.key_valid, p.scale,
                            p.mask);
    const AttnGradRef g = attention_grad_ref(p, f, d_err_fused(p, f, got_o), 0.0, dt);
    const auto got_dq = values(*dev, dq), got_dk = values(*dev, dk), got_dv = values(*dev, dv);
    expect_within(got_dq, g.dq, g.tol_dq, "dq");
    expect_within(got_dk, g.dk, g.tol_dk, "dk");
    expect_within(got_dv, g.dv, g.tol_dv, "dv");
    // Padded keys get exactly zero gradient (their probabilities are exactly 0).
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t j = 0; j < T; ++j)
        if (!p.kv[static_cast<size_t>((bh / H) * T + j)])
          for (int64_t d = 0; d < D; ++d) {
            ASSERT_EQ(got_dk[p.at(bh, j, d)], 0.0);
            ASSERT_EQ(got_dv[p.at(bh, j, d)], 0.0);
          }

    // The unfused composition on the same inputs: each is within its bound of
    // the exact values, so they are within the sum of the bounds of each other.
    // In bf16 the unfused path also rounds probs and dscores to bf16 (2^-8).
    const double extra = dt == DType::F32 ? 0.0 : 0x1p-8;
    const AttnRef fu = attention_ref(p, extra, dt);
    const AttnGradRef gu = attention_grad_ref(p, fu, d_err_unfused(p, fu), extra, dt);
    Unfused u = run_unfused(*dev, p);
    auto sum_tol = [](const std::vector<double>& a, const std::vector<double>& b) {
      std::vector<double> s(a.size());
      for (size_t e = 0; e < a.size(); ++e) s[e] = a[e] + b[e];
      return s;
    };
    expect_within(values(*dev, u.out), got_o, sum_tol(f.tol_o, fu.tol_o), "unfused vs fused out");
    expect_within(values(*dev, u.dq), got_dq, sum_tol(g.tol_dq, gu.tol_dq), "unfused vs fused dq");
    expect_within(values(*dev, u.dk), got_dk, sum_tol(g.tol_dk, gu.tol_dk), "unfused vs fused dk");
    expect_within(values(*dev, u.dv), got_dv, sum_tol(g.tol_dv, gu.tol_dv), "unfused vs fused dv");

    // Deterministic: a second run gives the same bits.
    auto out2 = dev->alloc(qs, dt, MemCategory::Activations);
    auto lse2 = dev->alloc(Shape{B, H, T}, DType::F32, MemCategory::Activations);
    dev->attention_forward(out2, lse2, p.q.buf, p.k.buf, p.v.buf, p.key_valid, p.scale, p.mask);
    EXPECT_EQ(raw_bits(*dev, out2), raw_bits(*dev, out));
    auto dq2 = dev->alloc(qs, dt, MemCategory::Activations);
    auto dk2 = dev->alloc(qs, dt, MemCategory::Activations);
    auto dv2 = dev->alloc(qs, dt, MemCategory::Activations);
    dev->attention_backward(dq2, dk2, dv2, p.dout.buf, out, lse, p.q.buf, p.k.buf, p.v.buf, p.key_valid, p.scale,
                            p.mask);
    EXPECT_EQ(raw_bits(*dev, dq2), raw_bits(*dev, dq));
    EXPECT_EQ(raw_bits(*dev, dk2), raw_bits(*dev, dk));
    EXPECT_EQ(raw_bits(*dev, dv2), raw_bits(*dev, dv));
  }
}

TEST(TransformerAttention, RejectsBadShapes) {
  auto dev = make_cpu_device();
  auto q = dev->alloc(Shape{1, 2, 5, 4}, DType::F32, MemCategory::Activations);
  auto k16 = dev->alloc(Shape{1, 2, 5, 4}, DType::BF16, MemCategory::Activations);
  auto lse = dev->alloc(Shape{1, 2, 5}, DType::F32, MemCategory::Activations);
  auto bad_lse = dev->alloc(Shape{1, 2, 4}, DType::F32, MemCategory::Activations);
  auto kv = upload_ints(*dev, std::vector<int32_t>(5, 1), Shape{1, 5});
  auto kv_bad = upload_ints(*dev, std::vector<int32_t>(4, 1), Shape{1, 4});
  EXPECT_NO_THROW(dev->attention_forward(q, lse, q, q, q, kv, 0.5f, -1e9f));
  EXPECT_THROW(dev->attention_forward(q, lse, q, k16, q, kv, 0.5f, -1e9f), std::invalid_argument);
  EXPECT_THROW(dev->attention_forward(q, bad_lse, q, q, q, kv, 0.5f, -1e9f), std::invalid_argument);
  EXPECT_THROW(dev->attention_forward(q, lse, q, q, q, kv_bad, 0.5f, -1e9f), std::invalid_argument);
  auto scores = dev->alloc(Shape{1, 2, 5, 5}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(dev->masked_softmax_forward(scores, scores, kv_bad, 0.5f, -1e9f), std::invalid_argument);
}

// ==== embedding =====================================================================================
TEST(TransformerOps, EmbeddingForwardBackward) {
  auto dev = make_cpu_device();
  const int64_t V = 50, C = 24, N = 40;
  // Repeats: half the ids from {0..4}, id 3 many times; ids 45..49 never used.
  std::vector<int32_t> ids(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i % 2 ? (i * 7) % 45 : i % 5);
  for (int64_t i = 0; i < N; i += 3) ids[static_cast<size_t>(i)] = 3;
  auto id_buf = upload_ints(*dev, ids, Shape{N});
  for (DType table_dt : {DType::F32, DType::BF16})
    for (DType act_dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string("table ") + dt_name(table_dt) + " activations " + dt_name(act_dt));
      Stored table = store(*dev, testref::random_nonzero(static_cast<size_t>(V * C), 81), Shape{V, C}, table_dt);
      auto out = nan_filled(*dev, Shape{N, C}, act_dt);
      dev->embedding_forward(out, table.buf, id_buf);
      const auto got = values(*dev, out);
      for (int64_t i = 0; i < N; ++i)
        for (int64_t c = 0; c < C; ++c)
          ASSERT_EQ(got[static_cast<size_t>(i * C + c)],
                    stored_value(table.value[static_cast<size_t>(ids[static_cast<size_t>(i)] * C + c)], act_dt));

      Stored dout = store(*dev, testref::random_nonzero(static_cast<size_t>(N * C), 82), Shape{N, C}, act_dt);
      for (GradMode mode : {GradMode::Overwrite, GradMode::Accumulate}) {
        const bool acc = mode == GradMode::Accumulate;
        Stored dt = acc ? store(*dev, testref::random_nonzero(static_cast<size_t>(V * C), 83), Shape{V, C}, table_dt)
                        : Stored{nan_filled(*dev, Shape{V, C}, table_dt), {}};
        const auto before = raw_bits(*dev, dt.buf);
        dev->embedding_backward(dt.buf, dout.buf, id_buf, mode);
        const auto gv = values(*dev, dt.buf);
        const auto after = raw_bits(*dev, dt.buf);
        for (int64_t r = 0; r < V; ++r) {
          int count = 0;
          for (int32_t id : ids) count += id == r;
          for (int64_t c = 0; c < C; ++c) {
            const size_t e = static_cast<size_t>(r * C + c);
            if (count == 0) {
              if (acc) {
                ASSERT_EQ(after[e], before[e]) << "unreferenced row " << r << " touched";
              } else {
                ASSERT_EQ(gv[e], 0.0) << "unreferenced row " << r << " not zeroed";
              }
              continue;
            }
            double ref = acc ? dt.value[e] : 0.0, mag = std::fabs(ref);
            for (int64_t i = 0; i < N; ++i)
              if (ids[static_cast<size_t>(i)] == r) {
                ref += dout.value[static_cast<size_t>(i * C + c)];
                mag += std::fabs(dout.value[static_cast<size_t>(i * C + c)]);
              }
            // One fp32 sum of count (+1) terms, rounded once to the table dtype.
            const double tol = (count + 2) * kU32 * mag + testref::half_ulp_of(table_dt, ref);
            ASSERT_NEAR(gv[e], ref, tol) << "row " << r << " col " << c;
          }
        }
        // Deterministic: the same call again gives the same bits.
        if (!acc) {
          auto again = nan_filled(*dev, Shape{V, C}, table_dt);
          dev->embedding_backward(again, dout.buf, id_buf, mode);
          EXPECT_EQ(raw_bits(*dev, again), after);
        }
      }
    }
}

TEST(TransformerOps, EmbeddingIdsOutOfRange) {
  auto dev = make_cpu_device();
  auto table = dev->alloc(Shape{10, 4}, DType::F32, MemCategory::Params);
  auto out = dev->alloc(Shape{3, 4}, DType::F32, MemCategory::Activations);
  dev->fill(table, 1.0f);
  for (int32_t bad : {-1, 10}) {
    auto ids = upload_ints(*dev, {0, bad, 2}, Shape{3});
    EXPECT_THROW(dev->embedding_forward(out, table, ids), std::out_of_range);
    EXPECT_THROW(dev->embedding_backward(table, out, ids, GradMode::Accumulate), std::out_of_range);
  }
}

// ==== dropout =======================================================================================
TEST(TransformerOps, DropoutStatisticsAndConsistency) {
  auto dev = make_cpu_device();
  const int64_t n = 1'000'000;
  Stored x = store(*dev, testref::random_nonzero(static_cast<size_t>(n), 91), Shape{n}, DType::F32);
  // p = 0: identity, bit for bit (also in place).
  auto y0 = nan_filled(*dev, Shape{n}, DType::F32);
  dev->dropout(y0, x.buf, 0.0f, 1);
  EXPECT_EQ(raw_bits(*dev, y0), raw_bits(*dev, x.buf));
  dev->dropout(y0, y0, 0.0f, 1);
  EXPECT_EQ(raw_bits(*dev, y0), raw_bits(*dev, x.buf));

  for (float p : {0.1f, 0.5f}) {
    SCOPED_TRACE("p=" + std::to_string(p));
    auto y = dev->alloc(Shape{n}, DType::F32, MemCategory::Activations);
    dev->dropout(y, x.buf, p, 1234);
    const auto got = values(*dev, y);
    const float sc = 1.0f / (1.0f - p);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = got[static_cast<size_t>(i)];
      if (v == 0.0) continue;
      ++kept;
      ASSERT_EQ(v, static_cast<double>(static_cast<float>(x.value[static_cast<size_t>(i)]) * sc)) << i;
    }
    // Kept ~ Binomial(n, 1 - p): within 6 standard deviations (a false
    // failure has probability ~2e-9; a biased threshold, e.g. keeping with
    // probability p instead of 1 - p, misses by hundreds of deviations).
    const double mean = n * (1.0 - p), sd = std::sqrt(n * p * (1.0 - p));
    EXPECT_NEAR(static_cast<double>(kept), mean, 6 * sd);

    // Same seed: the same mask; another seed: another mask (they differ in
    // ~2p(1-p) n elements).
    auto y2 = dev->alloc(Shape{n}, DType::F32, MemCategory::Activations);
    dev->dropout(y2, x.buf, p, 1234);
    EXPECT_EQ(raw_bits(*dev, y2), raw_bits(*dev, y));
    dev->dropout(y2, x.buf, p, 1235);
    const auto other = values(*dev, y2);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) differ += (other[static_cast<size_t>(i)] == 0.0) != (got[static_cast<size_t>(i)] == 0.0);
    const double exp_differ = 2.0 * p * (1.0 - p) * n;
    EXPECT_NEAR(static_cast<double>(differ), exp_differ, 6 * std::sqrt(exp_differ));

    // Backward: the same call on a gradient (bf16 here) zeroes exactly the
    // dropped elements and scales the kept ones.
    Stored gr = store(*dev, testref::random_nonzero(static_cast<size_t>(n), 92), Shape{n}, DType::BF16);
    auto dg = dev->alloc(Shape{n}, DType::BF16, MemCategory::Activations);
    dev->dropout(dg, gr.buf, p, 1234);
    const auto gd = values(*dev, dg);
    for (int64_t i = 0; i < n; ++i) {
      const size_t e = static_cast<size_t>(i);
      const double expect = got[e] == 0.0 ? 0.0 : stored_value(static_cast<float>(gr.value[e]) * sc, DType::BF16);
      ASSERT_EQ(gd[e], expect) << i;
    }
  }
  auto y = dev->alloc(Shape{n}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(dev->dropout(y, x.buf, 1.0f, 1), std::invalid_argument);
  EXPECT_THROW(dev->dropout(y, x.buf, -0.1f, 1), std::invalid_argument);
}

// ==== cross-entropy with ignored labels =============================================================
TEST(TransformerOps, SoftmaxXentIgnoredLabels) {
  auto dev = make_cpu_device();
  const int64_t R = 6, C = 10;
  const std::vector<int32_t> labels{3, -100, 0, -1, 9, 5};
  Stored logits = store(*dev, testref::random_nonzero(static_cast<size_t>(R * C), 101, 0.1f, 3.0f), Shape{R, C},
                        DType::F32);
  auto y = upload_ints(*dev, labels, Shape{R});
  auto probs = dev->alloc(Shape{R, C}, DType::F32, MemCategory::Activations);
  const double loss = dev->softmax_xent_forward(probs, logits.buf, y);
  double ref = 0.0;
  std::vector<double> pref(static_cast<size_t>(R * C));
  for (int64_t r = 0; r < R; ++r) {
    double mx = -INFINITY, s = 0.0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, logits.value[static_cast<size_t>(r * C + c)]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(logits.value[static_cast<size_t>(r * C + c)] - mx);
    for (int64_t c = 0; c < C; ++c)
      pref[static_cast<size_t>(r * C + c)] = std::exp(logits.value[static_cast<size_t>(r * C + c)] - mx) / s;
    if (labels[static_cast<size_t>(r)] >= 0)
      ref += std::log(s) - (logits.value[static_cast<size_t>(r * C + labels[static_cast<size_t>(r)])] - mx);
  }
  // fp32 log-sum-exp per row with |x| <= 3, C = 10: a few 1e-6 at most.
  EXPECT_NEAR(loss, ref, 1e-5);
  // Ignored rows still get their (well-defined) probabilities.
  const auto got_p = values(*dev, probs);
  for (size_t e = 0; e < got_p.size(); ++e) ASSERT_NEAR(got_p[e], pref[e], 1e-6);

  const float gs = 0.25f;  // e.g. 1 / (number of non-ignored rows)
  auto d_unfused = nan_filled(*dev, Shape{R, C}, DType::F32);
  dev->softmax_xent_backward(d_unfused, probs, y, gs);
  auto d_fused = nan_filled(*dev, Shape{R, C}, DType::F32);
  const double loss_fused = dev->softmax_xent_fused(d_fused, logits.buf, y, gs);
  EXPECT_EQ(loss_fused, loss);
  const auto du = values(*dev, d_unfused), df = values(*dev, d_fused);
  EXPECT_EQ(raw_bits(*dev, d_unfused), raw_bits(*dev, d_fused));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const size_t e = static_cast<size_t>(r * C + c);
      const int32_t lab = labels[static_cast<size_t>(r)];
      if (lab < 0) {
        ASSERT_EQ(du[e], 0.0) << "ignored row " << r;
        continue;
      }
      ASSERT_NEAR(du[e], (pref[e] - (c == lab ? 1.0 : 0.0)) * gs, 1e-6) << r << "," << c;
    }

  // count_correct: make every row's argmax its label (ignored rows: column 0).
  std::vector<float> peaked(static_cast<size_t>(R * C), 0.0f);
  for (int64_t r = 0; r < R; ++r)
    peaked[static_cast<size_t>(r * C + std::max<int32_t>(labels[static_cast<size_t>(r)], 0))] = 5.0f;
  Stored pk = store(*dev, peaked, Shape{R, C}, DType::F32);
  EXPECT_EQ(dev->count_correct(pk.buf, y), 4);  // 6 rows, 2 ignored
}

}  // namespace
