// The CUDA backend's transformer ops (ops/cuda/transformer.cu, attention.cu,
// embedding.cu, the strided batch of gemm_cublaslt.cu, the ignore rule of
// softmax_xent.cu, AdamW's param_copy in optimizer.cu) against the CPU
// backend on the same random inputs, and the fused attention also against a
// float64 reference and against the unfused composition on the GPU itself.
// Every test skips (with the reason) where no usable CUDA device exists.
//
// Tolerances (u = 2^-24, the fp32 unit roundoff). Both backends evaluate the
// same scalar cores (ops/*.h) with the same roundings (no FMA contraction on
// either side), so:
//  * Bit-exact where no sum is reordered: add, the head shuffles, embedding
//    forward (gathers), embedding backward (the GPU sums each table row over
//    its positions in ascending order, as the CPU), dropout (the same hash of
//    the same flat index against the same host-computed threshold), ignored
//    cross-entropy rows (exact zeros), AdamW's param_copy (a cast).
//  * Elsewhere, the backends sum rows (LayerNorm, softmax) or tiles
//    (attention) in different orders. A sum of n fp32 terms in any order is
//    within (n - 1) u sum|terms| of the exact sum (Higham, Thm 3.1), so two
//    such sums are within 2 (n - 1) u sum|terms| of each other; each further
//    fp32 operation on a value that differs adds u of it per side; a 16-bit
//    output may straddle a rounding boundary: one ulp of its format
//    (store_ulp). Each test states its bound from these. They are worst-case
//    bounds: a correct implementation can't exceed them, while an indexing or
//    formula error exceeds them by orders of magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/cuda/cuda_device.h"
#include "core/device.h"
#include "core/numerics.h"
#include "core/precision.h"
#include "ops/attention.h"
#include "ops/dtype_io.h"

#include "tests/gpu/gpu_test_host.h"

namespace mpb {
namespace {

constexpr double kU = 0x1p-24;  // fp32 unit roundoff

// ---- host tensors (tests/gpu/gpu_test_host.h) and comparisons ---------------------------------

using gpu_test::fetch;
using gpu_test::Host;
using gpu_test::identical;
using gpu_test::kFloatTypes;
using gpu_test::put;
using gpu_test::store_ulp;
using gpu_test::ulp;

Host ints(const std::vector<int32_t>& v, Shape s) {
  Host h(DType::I32, s);
  for (size_t i = 0; i < v.size(); ++i) h.set_label(static_cast<int64_t>(i), v[i]);
  return h;
}

// Half an ulp: the error of rounding an exact value to t.
double half_ulp(DType t, double x) { return 0.5 * ulp(t, x); }

using Tol = std::function<double(int64_t i, double want)>;

::testing::AssertionResult close(const Host& got, const Host& want, const Tol& tol) {
  if (got.numel() != want.numel()) return ::testing::AssertionFailure() << "element counts differ";
  int64_t bad = 0;
  double worst = 0.0;
  std::ostringstream msg;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.get(i), w = want.get(i);
    if ((std::isnan(g) && std::isnan(w)) || g == w) continue;
    const bool finite = std::isfinite(g) && std::isfinite(w);
    const double t = finite ? tol(i, w) : 0.0;
    const double d = std::fabs(g - w);
    if (!finite || !(d <= t)) {
      if (bad < 6) msg << "\n  [" << i << "] gpu " << g << " want " << w << " |diff| " << d << " tol " << t;
      ++bad;
      worst = std::max(worst, t > 0 ? d / t : INFINITY);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << want.numel() << " elements outside tolerance (worst "
                                       << worst << "x tol):" << msg.str();
}

// Against exact (double) values with per-element bounds.
::testing::AssertionResult within(const Host& got, const std::vector<double>& ref, const std::vector<double>& tol,
                                  const char* what) {
  int64_t bad = 0;
  std::ostringstream msg;
  for (size_t e = 0; e < ref.size(); ++e) {
    const double g = got.get(static_cast<int64_t>(e));
    if (!(std::fabs(g - ref[e]) <= tol[e])) {
      if (bad < 6) msg << "\n  " << what << "[" << e << "] got " << g << " exact " << ref[e] << " tol " << tol[e];
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << ref.size() << " elements outside the bound:" << msg.str();
}

int64_t count_nonfinite(const Host& h) {
  int64_t n = 0;
  for (int64_t i = 0; i < h.numel(); ++i) n += !std::isfinite(h.get(i));
  return n;
}

// key_valid for B sequences of T keys: sequence 0 pads its last 3 keys,
// sequence 1 keys 2 and T - 2 (padding inside and across tiles).
std::vector<int32_t> padding_mask(int64_t B, int64_t T) {
  std::vector<int32_t> kv(static_cast<size_t>(B * T), 1);
  for (int64_t j = T - 3; j < T; ++j) kv[static_cast<size_t>(j)] = 0;
  if (B > 1) kv[static_cast<size_t>(T + 2)] = 0, kv[static_cast<size_t>(T + T - 2)] = 0;
  return kv;
}

// ---- the fixture ------------------------------------------------------------------------------

class CudaTransformer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
    cpu_ = make_cpu_device();
    gpu_ = make_cuda_device();
  }

  // Uniform in [lo, hi], rounded to t.
  Host random(DType t, Shape s, float lo = -2.0f, float hi = 2.0f) {
    Host h(t, s);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < h.numel(); ++i) h.set(i, dist(rng_));
    return h;
  }
  // Magnitude in [lo, hi] with a random sign: never zero or tiny.
  Host random_nonzero(DType t, Shape s, float lo = 0.1f, float hi = 1.0f) {
    Host h(t, s);
    std::uniform_real_distribution<float> mag(lo, hi);
    std::bernoulli_distribution neg(0.5);
    for (int64_t i = 0; i < h.numel(); ++i) h.set(i, neg(rng_) ? -mag(rng_) : mag(rng_));
    return h;
  }
  Host filled(DType t, Shape s, float v) {
    Host h(t, s);
    for (int64_t i = 0; i < h.numel(); ++i) h.set(i, v);
    return h;
  }

  struct Pair {
    DeviceBuffer cpu, gpu;
  };
  Pair both(const Host& h) { return Pair{put(*cpu_, h), put(*gpu_, h)}; }
  Host from_cpu(const Pair& p) { return fetch(*cpu_, p.cpu); }
  Host from_gpu(const Pair& p) { return fetch(*gpu_, p.gpu); }

  std::unique_ptr<Device> cpu_, gpu_;
  std::mt19937 rng_{20240917u};
};

// ==== batched GEMM =================================================================================

DType operand_type(GemmCompute c) {
  return c == GemmCompute::F16 ? DType::F16 : (c == GemmCompute::BF16 ? DType::BF16 : DType::F32);
}

struct BatchCase {
  int64_t batch, m, n, k;
  int64_t gap_a, gap_b, gap_c;  // elements between consecutive matrices
};

// Strided batches through cuBLASLt vs oneDNN. Bound per element, as
// CudaGemm::run_case in test_cuda_ops.cpp derives it: gamma (|alpha|
// sum_k |a b| + |beta c0|) with gamma = (k + 2) 2^-23 (two fp32 accumulations
// of k products in different orders), doubled for fp16/bf16 (tensor-core
// accumulation is not IEEE round-to-nearest), plus 2^-9 for TF32 (operand
// rounding RNA on the CPU, possibly RNE/RZ on the GPU); plus one ulp of a
// 16-bit C. The gaps between C's matrices are never written (bit-compared).
// With beta = 0 C's matrices start as NaN: neither backend may read them.
TEST_F(CudaTransformer, BatchedGemmMatchesCpuEveryModeWithGaps) {
  const BatchCase cases[] = {
      {3, 13, 11, 17, 5, 3, 7},  // gaps: odd strides, so 16-bit matrices are only 2-byte aligned
      {6, 67, 67, 16, 0, 0, 0},  // attention scores q.k^T for B*H = 6, T = 67 (odd): contiguous, odd strides
      {4, 33, 24, 33, 0, 0, 0},  // p.v for T = 33, D = 24
  };
  const float alpha = 0.75f;
  for (const BatchCase& bc : cases)
    for (GemmCompute compute : {GemmCompute::F32, GemmCompute::TF32, GemmCompute::F16, GemmCompute::BF16}) {
      const DType op_t = operand_type(compute);
      std::vector<DType> c_types{DType::F32};
      if (op_t != DType::F32) c_types.push_back(op_t);
      for (int tr = 0; tr < 4; ++tr)
        for (DType c_t : c_types)
          for (float beta : {0.0f, 1.0f}) {
            const bool ta = (tr & 1) != 0, tb = (tr & 2) != 0;
            const int64_t m = bc.m, n = bc.n, k = bc.k;
            SCOPED_TRACE("batch " + std::to_string(bc.batch) + " m=" + std::to_string(m) + " n=" +
                         std::to_string(n) + " k=" + std::to_string(k) + " " + gemm_compute_name(compute) +
                         " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " C=" + dtype_name(c_t) +
                         " beta=" + std::to_string(beta));
            const int64_t sa = m * k + bc.gap_a, sb = k * n + bc.gap_b, sc = m * n + bc.gap_c;
            const int64_t na = (bc.batch - 1) * sa + m * k, nb = (bc.batch - 1) * sb + k * n;
            const int64_t nc = (bc.batch - 1) * sc + m * n;
            Host a = random(op_t, Shape{na}, -1.0f, 1.0f), b = random(op_t, Shape{nb}, -1.0f, 1.0f);
            Host c0 = random(c_t, Shape{nc}, -1.0f, 1.0f);
            std::vector<bool> in_matrix(static_cast<size_t>(nc), false);
            for (int64_t bi = 0; bi < bc.batch; ++bi)
              for (int64_t e = 0; e < m * n; ++e) in_matrix[static_cast<size_t>(bi * sc + e)] = true;
            for (int64_t i = 0; i < nc; ++i) {
              if (!in_matrix[static_cast<size_t>(i)]) c0.set(i, 7.0f);
              else if (beta == 0.0f) c0.set(i, NAN);
            }
            Pair pa = both(a), pb = both(b), pc = both(c0);
            auto args = [&](bool gpu) {
              GemmArgs g;
              g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb;
              g.a = gpu ? pa.gpu.tensor() : pa.cpu.tensor();
              g.b = gpu ? pb.gpu.tensor() : pb.cpu.tensor();
              g.c = gpu ? pc.gpu.tensor() : pc.cpu.tensor();
              g.alpha = alpha, g.beta = beta, g.compute = compute;
              g.batch = bc.batch, g.stride_a = sa, g.stride_b = sb, g.stride_c = sc;
              return g;
            };
            cpu_->gemm(args(false));
            gpu_->gemm(args(true));
            const Host got = from_gpu(pc), want = from_cpu(pc);
            double gamma = static_cast<double>(k + 2) * std::ldexp(1.0, -23);
            if (compute == GemmCompute::F16 || compute == GemmCompute::BF16) gamma *= 2.0;
            if (compute == GemmCompute::TF32) gamma += std::ldexp(1.0, -9);
            EXPECT_TRUE(close(got, want, [&](int64_t i, double w) {
              const int64_t bi = i / sc, e = i % sc, r = e / n, col = e % n;
              double mag = 0.0;
              for (int64_t p = 0; p < k; ++p) {
                const double av = a.get(bi * sa + (ta ? p * m + r : r * k + p));
                const double bv = b.get(bi * sb + (tb ? col * k + p : p * n + col));
                mag += std::fabs(av * bv);
              }
              const double c_old = beta != 0.0f ? std::fabs(c0.get(i)) : 0.0;
              return gamma * (alpha * mag + beta * c_old) + store_ulp(c_t, w);
            }));
            for (int64_t i = 0; i < nc; ++i) {
              if (!in_matrix[static_cast<size_t>(i)]) {
                ASSERT_EQ(got.get(i), 7.0f) << "gap element " << i << " written";
              }
            }
            // The cached plan again: the same bits.
            DeviceBuffer c2 = put(*gpu_, c0);
            GemmArgs again = args(true);
            again.c = c2;
            gpu_->gemm(again);
            EXPECT_TRUE(identical(fetch(*gpu_, c2), got));
          }
    }
}

// batch == 1 ignores the strides (as on the CPU): the same bits as a call
// with the default strides, whatever they hold. (The GEMM path before batches
// existed is covered by test_cuda_ops.cpp's CudaGemm tests.)
TEST_F(CudaTransformer, BatchedGemmBatchOneIgnoresStrides) {
  const int64_t m = 24, n = 40, k = 32;
  for (GemmCompute compute : {GemmCompute::F32, GemmCompute::BF16}) {
    SCOPED_TRACE(gemm_compute_name(compute));
    const DType op_t = operand_type(compute);
    Host a = random(op_t, Shape{m, k}), b = random(op_t, Shape{k, n});
    DeviceBuffer da = put(*gpu_, a), db = put(*gpu_, b);
    DeviceBuffer c1 = gpu_->alloc(Shape{m, n}, DType::F32, MemCategory::Activations);
    DeviceBuffer c2 = gpu_->alloc(Shape{m, n}, DType::F32, MemCategory::Activations);
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.a = da, g.b = db, g.c = c1, g.compute = compute;
    gpu_->gemm(g);
    g.c = c2;
    g.stride_a = 3, g.stride_b = 123456, g.stride_c = 7;  // unused with batch == 1
    gpu_->gemm(g);
    EXPECT_TRUE(identical(fetch(*gpu_, c1), fetch(*gpu_, c2)));
  }
}

TEST_F(CudaTransformer, BatchedGemmRejectsEpilogueOverlapAndShortBuffers) {
  DeviceBuffer a = gpu_->alloc(Shape{2 * 16}, DType::F32, MemCategory::Activations);
  DeviceBuffer b = gpu_->alloc(Shape{2 * 16}, DType::F32, MemCategory::Activations);
  DeviceBuffer c = gpu_->alloc(Shape{2 * 16}, DType::F32, MemCategory::Activations);
  DeviceBuffer bias = gpu_->alloc(Shape{4}, DType::F32, MemCategory::Activations);
  gpu_->fill(a, 1.0f), gpu_->fill(b, 1.0f), gpu_->fill(bias, 0.0f);
  GemmArgs g;
  g.m = g.n = g.k = 4;
  g.a = a, g.b = b, g.c = c;
  g.batch = 2, g.stride_a = g.stride_b = g.stride_c = 16;
  gpu_->gemm(g);
  const Host out = fetch(*gpu_, c);
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.get(i), 4.0f);
  g.epilogue = Epilogue::Bias;
  g.bias = bias;
  EXPECT_THROW(gpu_->gemm(g), std::invalid_argument);
  g.epilogue = Epilogue::None;
  g.pre_act = c;
  EXPECT_THROW(gpu_->gemm(g), std::invalid_argument);
  g.pre_act = Tensor{};
  g.stride_c = 8;  // overlapping outputs
  EXPECT_THROW(gpu_->gemm(g), std::invalid_argument);
  g.stride_c = 16;
  g.batch = 3;  // beyond the buffers
  EXPECT_THROW(gpu_->gemm(g), std::invalid_argument);
  g.batch = 0;
  EXPECT_THROW(gpu_->gemm(g), std::invalid_argument);
  gpu_->synchronize();
}

// ==== add ============================================================================================
// fp32 sum of the loaded values, rounded to out's dtype: one operation, the
// same on both backends, bit for bit; in place too.
TEST_F(CudaTransformer, AddBitExactAllDtypes) {
  const int64_t n = 40'009;
  for (DType ta : kFloatTypes)
    for (DType tb : kFloatTypes)
      for (DType to : kFloatTypes) {
        SCOPED_TRACE(std::string(dtype_name(ta)) + "+" + dtype_name(tb) + "->" + dtype_name(to));
        Pair a = both(random(ta, Shape{n}, -100.0f, 100.0f)), b = both(random(tb, Shape{n}, -100.0f, 100.0f));
        Pair out = both(filled(to, Shape{n}, NAN));
        cpu_->add(out.cpu, a.cpu, b.cpu);
        gpu_->add(out.gpu, a.gpu, b.gpu);
        EXPECT_TRUE(identical(from_gpu(out), from_cpu(out)));
        if (to == ta) {  // in place: out = a
          gpu_->add(a.gpu, a.gpu, b.gpu);
          EXPECT_TRUE(identical(from_gpu(a), from_cpu(out)));
        }
      }
  Pair a = both(random(DType::F32, Shape{10})), b = both(random(DType::F32, Shape{11}));
  EXPECT_THROW(gpu_->add(a.gpu, a.gpu, b.gpu), std::invalid_argument);
}

// ==== LayerNorm ======================================================================================
// Inputs with a per-row offset (so the centring matters).
Host ln_input(std::mt19937& rng, DType t, int64_t rows, int64_t C) {
  Host h(t, Shape{rows, C});
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) h.set(r * C + c, d(rng) + 0.25f * static_cast<float>(r % 7) - 0.5f);
  return h;
}

// Error bounds of one backend's LayerNorm row against the exact value (from
// the stored x): the sum of C terms within (C - 1) u S1 (S1 = sum |x|), so
// e_mu = u S1 + 2u |mu|; the centred sum of squares sum (x - mu_c)^2 =
// sum (x - mu)^2 + C (mu - mu_c)^2 exactly (the cross term vanishes), so the
// mean's error enters quadratically, plus (C + 3) u of the sum (rounding of
// x - mu_c, the square, the sum); var and rstd add a few u each: rstd's
// relative error is half var's plus 3u. y = ((x - mu_c) rstd) gamma + beta
// carries e_mu rstd |gamma| + |xhat gamma| e_rstd plus 3u of its terms.
struct LnBound {
  double mean, var, rstd;       // exact
  double e_mean, e_rstd_rel;    // one backend's error bounds
};
LnBound ln_bound(const Host& x, int64_t r, int64_t C, double eps) {
  LnBound b{};
  double s = 0.0, s1 = 0.0;
  for (int64_t c = 0; c < C; ++c) s += x.get(r * C + c), s1 += std::fabs(x.get(r * C + c));
  b.mean = s / static_cast<double>(C);
  double ss = 0.0;
  for (int64_t c = 0; c < C; ++c) ss += (x.get(r * C + c) - b.mean) * (x.get(r * C + c) - b.mean);
  b.var = ss / static_cast<double>(C);
  b.rstd = 1.0 / std::sqrt(b.var + eps);
  b.e_mean = kU * s1 + 2 * kU * std::fabs(b.mean);
  const double e_var_rel = (C + 4) * kU + static_cast<double>(C) * b.e_mean * b.e_mean / std::max(ss, 1e-300);
  b.e_rstd_rel = 0.5 * e_var_rel * b.var / (b.var + eps) + 3 * kU;
  return b;
}

// mean, rstd and out vs the float64 LayerNorm of the stored x (the bound
// above, plus half an ulp of a 16-bit out), and vs the CPU (twice the
// computation bound: both sides are within it of the exact value, plus one
// ulp of a 16-bit out). The fused residual form equals add + layernorm_forward
// bit for bit on the GPU, and its sum equals the CPU's bit for bit.
TEST_F(CudaTransformer, LayerNormForwardVsFloat64AndCpu) {
  struct Case {
    int64_t rows, C;
    DType x, param, out;
  };
  const Case cases[] = {{37, 96, DType::F32, DType::F32, DType::F32},    {64, 300, DType::F32, DType::F32, DType::F32},
                        {37, 1024, DType::F32, DType::F32, DType::F32},  {37, 96, DType::BF16, DType::F32, DType::BF16},
                        {37, 96, DType::BF16, DType::BF16, DType::BF16}, {64, 300, DType::F16, DType::F16, DType::F16},
                        {37, 768, DType::F16, DType::F32, DType::F32},   {5, 33, DType::F32, DType::BF16, DType::F16}};
  const float eps = 1e-5f;
  for (const Case& cs : cases) {
    SCOPED_TRACE(std::to_string(cs.rows) + "x" + std::to_string(cs.C) + " x=" + dtype_name(cs.x) +
                 " param=" + dtype_name(cs.param) + " out=" + dtype_name(cs.out));
    const int64_t rows = cs.rows, C = cs.C;
    const Host x = ln_input(rng_, cs.x, rows, C);
    const Host gamma = random(cs.param, Shape{C}, 0.5f, 1.5f), beta = random(cs.param, Shape{C}, -0.5f, 0.5f);
    Pair px = both(x), pg = both(gamma), pb = both(beta);
    Pair out = both(filled(cs.out, Shape{rows, C}, NAN));
    Pair mean = both(filled(DType::F32, Shape{rows}, NAN)), rstd = both(filled(DType::F32, Shape{rows}, NAN));
    cpu_->layernorm_forward(out.cpu, mean.cpu, rstd.cpu, px.cpu, pg.cpu, pb.cpu, eps);
    gpu_->layernorm_forward(out.gpu, mean.gpu, rstd.gpu, px.gpu, pg.gpu, pb.gpu, eps);
    const Host go = from_gpu(out), gm = from_gpu(mean), gr = from_gpu(rstd);
    const Host co = from_cpu(out), cm = from_cpu(mean), cr = from_cpu(rstd);

    std::vector<double> ref_m(static_cast<size_t>(rows)), tol_m(ref_m.size()), ref_r(ref_m.size()), tol_r(ref_m.size());
    std::vector<double> ref_y(static_cast<size_t>(rows * C)), tol_y(ref_y.size());
    for (int64_t r = 0; r < rows; ++r) {
      const LnBound b = ln_bound(x, r, C, eps);
      const auto ri = static_cast<size_t>(r);
      ref_m[ri] = b.mean, tol_m[ri] = b.e_mean;
      ref_r[ri] = b.rstd, tol_r[ri] = b.e_rstd_rel * b.rstd;
      for (int64_t c = 0; c < C; ++c) {
        const double xh = (x.get(r * C + c) - b.mean) * b.rstd, g = gamma.get(c), be = beta.get(c);
        const double y = xh * g + be;
        const auto e = static_cast<size_t>(r * C + c);
        ref_y[e] = y;
        tol_y[e] = std::fabs(g) * (b.e_mean * b.rstd * (1 + b.e_rstd_rel) + std::fabs(xh) * b.e_rstd_rel) +
                   3 * kU * (std::fabs(xh * g) + std::fabs(be) + std::fabs(y)) + half_ulp(cs.out, y);
      }
    }
    EXPECT_TRUE(within(gm, ref_m, tol_m, "mean"));
    EXPECT_TRUE(within(gr, ref_r, tol_r, "rstd"));
    EXPECT_TRUE(within(go, ref_y, tol_y, "out"));
    EXPECT_TRUE(close(gm, cm, [&](int64_t i, double) { return 2 * tol_m[static_cast<size_t>(i)]; }));
    EXPECT_TRUE(close(gr, cr, [&](int64_t i, double) { return 2 * tol_r[static_cast<size_t>(i)]; }));
    EXPECT_TRUE(close(go, co, [&](int64_t i, double w) {
      const double y = ref_y[static_cast<size_t>(i)];
      return 2 * (tol_y[static_cast<size_t>(i)] - half_ulp(cs.out, y)) + store_ulp(cs.out, w);
    }));

    // Residual + LayerNorm: the sum of two halves of x.
    const Host a = random(cs.x, Shape{rows, C}), bb = random(cs.x, Shape{rows, C});
    Pair pa = both(a), pbb = both(bb);
    Pair sum = both(filled(cs.x, Shape{rows, C}, NAN)), out2 = both(filled(cs.out, Shape{rows, C}, NAN));
    Pair mean2 = both(filled(DType::F32, Shape{rows}, NAN)), rstd2 = both(filled(DType::F32, Shape{rows}, NAN));
    cpu_->residual_layernorm_forward(out2.cpu, sum.cpu, mean2.cpu, rstd2.cpu, pa.cpu, pbb.cpu, pg.cpu, pb.cpu, eps);
    gpu_->residual_layernorm_forward(out2.gpu, sum.gpu, mean2.gpu, rstd2.gpu, pa.gpu, pbb.gpu, pg.gpu, pb.gpu, eps);
    EXPECT_TRUE(identical(from_gpu(sum), from_cpu(sum)));
    DeviceBuffer sum3 = put(*gpu_, filled(cs.x, Shape{rows, C}, NAN));
    DeviceBuffer out3 = put(*gpu_, filled(cs.out, Shape{rows, C}, NAN));
    DeviceBuffer mean3 = put(*gpu_, filled(DType::F32, Shape{rows}, NAN));
    DeviceBuffer rstd3 = put(*gpu_, filled(DType::F32, Shape{rows}, NAN));
    gpu_->add(sum3, pa.gpu, pbb.gpu);
    gpu_->layernorm_forward(out3, mean3, rstd3, sum3, pg.gpu, pb.gpu, eps);
    EXPECT_TRUE(identical(fetch(*gpu_, out3), from_gpu(out2)));
    EXPECT_TRUE(identical(fetch(*gpu_, mean3), from_gpu(mean2)));
    EXPECT_TRUE(identical(fetch(*gpu_, rstd3), from_gpu(rstd2)));
    // Deterministic.
    gpu_->layernorm_forward(out3, mean3, rstd3, px.gpu, pg.gpu, pb.gpu, eps);
    EXPECT_TRUE(identical(fetch(*gpu_, out3), go));
  }
  Pair x = both(random(DType::F32, Shape{4, 8})), g = both(random(DType::F32, Shape{7}));
  Pair st = both(random(DType::F32, Shape{4}));
  EXPECT_THROW(gpu_->layernorm_forward(x.gpu, st.gpu, st.gpu, x.gpu, g.gpu, g.gpu, 1e-5f), std::invalid_argument);
}

// The backward from the same saved statistics on both backends (the CPU
// forward's mean and rstd, uploaded to both): xhat and g = dout * gamma are
// then the same fp32 values on both sides, and the differences come from the
// row sums a = mean(g), b = mean(g xhat): each side's sum is within
// (C - 1) u of its terms' magnitudes, so |a_gpu - a_cpu| <= 2 (C - 1) u
// sum|g| / C + 2u |a| (the division), likewise b. dx = rstd ((g - a) - xhat b)
// then differs by rstd (e_a + |xhat| e_b) plus 4u of the terms per side, plus
// the accumulated value's rounding and one ulp of a 16-bit dx.
// dgamma/dbeta: sums over rows of identical terms in (possibly) different
// orders: 2 (rows + 1) u sum|terms|, plus an accumulated value's rounding and
// one 16-bit ulp. Also: deterministic, and dx in place over dout gives the
// same bits.
TEST_F(CudaTransformer, LayerNormBackwardVsCpu) {
  struct Case {
    int64_t rows, C;
    DType x, dy, dx, param;
  };
  const Case cases[] = {{37, 96, DType::F32, DType::F32, DType::F32, DType::F32},
                        {100, 300, DType::F32, DType::F32, DType::F32, DType::F32},
                        {70, 768, DType::BF16, DType::BF16, DType::BF16, DType::F32},
                        {33, 128, DType::F16, DType::F16, DType::F16, DType::F16},
                        {5, 40, DType::BF16, DType::F32, DType::BF16, DType::BF16}};
  const float eps = 1e-5f;
  for (const Case& cs : cases)
    for (GradMode dx_mode : {GradMode::Overwrite, GradMode::Accumulate})
      for (GradMode p_mode : {GradMode::Overwrite, GradMode::Accumulate}) {
        const bool dx_acc = dx_mode == GradMode::Accumulate, p_acc = p_mode == GradMode::Accumulate;
        SCOPED_TRACE(std::to_string(cs.rows) + "x" + std::to_string(cs.C) + " x=" + dtype_name(cs.x) +
                     " dy=" + dtype_name(cs.dy) + " dx=" + dtype_name(cs.dx) + " param=" + dtype_name(cs.param) +
                     (dx_acc ? " dx+=" : " dx=") + (p_acc ? " dparam+=" : " dparam="));
        const int64_t rows = cs.rows, C = cs.C;
        const Host x = ln_input(rng_, cs.x, rows, C);
        const Host gamma = random(cs.param, Shape{C}, 0.5f, 1.5f), beta = random(cs.param, Shape{C}, -0.5f, 0.5f);
        Pair px = both(x), pg = both(gamma), pb = both(beta);
        // Statistics from the CPU forward, the same bits on both sides.
        DeviceBuffer y_cpu = cpu_->alloc(Shape{rows, C}, DType::F32, MemCategory::Activations);
        DeviceBuffer m_cpu = cpu_->alloc(Shape{rows}, DType::F32, MemCategory::Activations);
        DeviceBuffer r_cpu = cpu_->alloc(Shape{rows}, DType::F32, MemCategory::Activations);
        cpu_->layernorm_forward(y_cpu, m_cpu, r_cpu, px.cpu, pg.cpu, pb.cpu, eps);
        const Host mean = fetch(*cpu_, m_cpu), rstd = fetch(*cpu_, r_cpu);
        Pair pm = both(mean), pr = both(rstd);
        const Host dy = random(cs.dy, Shape{rows, C});
        Pair pdy = both(dy);
        const Host dx0 = dx_acc ? random(cs.dx, Shape{rows, C}) : filled(cs.dx, Shape{rows, C}, NAN);
        const Host dg0 = p_acc ? random(cs.param, Shape{C}) : filled(cs.param, Shape{C}, NAN);
        const Host db0 = p_acc ? random(cs.param, Shape{C}) : filled(cs.param, Shape{C}, NAN);
        Pair dx = both(dx0), dg = both(dg0), db = both(db0);
        cpu_->layernorm_backward(dx.cpu, dg.cpu, db.cpu, pdy.cpu, px.cpu, pm.cpu, pr.cpu, pg.cpu, dx_mode, p_mode);
        gpu_->layernorm_backward(dx.gpu, dg.gpu, db.gpu, pdy.gpu, px.gpu, pm.gpu, pr.gpu, pg.gpu, dx_mode, p_mode);
        const Host gdx = from_gpu(dx), gdg = from_gpu(dg), gdb = from_gpu(db);

        // The terms, in double from the same fp32 inputs.
        std::vector<double> tol_dx(static_cast<size_t>(rows * C)), mag_g(static_cast<size_t>(C), 0.0),
            mag_b(static_cast<size_t>(C), 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          const double m = mean.get(r), s = rstd.get(r);
          double sg = 0.0, sgx = 0.0, ag = 0.0, agx = 0.0;
          std::vector<double> xh(static_cast<size_t>(C)), g(static_cast<size_t>(C));
          for (int64_t c = 0; c < C; ++c) {
            const auto ci = static_cast<size_t>(c);
            xh[ci] = (x.get(r * C + c) - m) * s;
            g[ci] = dy.get(r * C + c) * gamma.get(c);
            sg += g[ci], sgx += g[ci] * xh[ci], ag += std::fabs(g[ci]), agx += std::fabs(g[ci] * xh[ci]);
            mag_g[ci] += std::fabs(dy.get(r * C + c) * xh[ci]);
            mag_b[ci] += std::fabs(dy.get(r * C + c));
          }
          const double a = sg / C, b = sgx / C;
          const double e_a = 2 * (C - 1) * kU * ag / C + 2 * kU * std::fabs(a);
          const double e_b = 2 * (C - 1) * kU * agx / C + 2 * kU * std::fabs(b);
          for (int64_t c = 0; c < C; ++c) {
            const auto ci = static_cast<size_t>(c);
            const double d = s * ((g[ci] - a) - xh[ci] * b);
            const double old = dx_acc ? std::fabs(dx0.get(r * C + c)) : 0.0;
            tol_dx[static_cast<size_t>(r * C + c)] =
                s * (e_a + std::fabs(xh[ci]) * e_b) +
                8 * kU * s * (std::fabs(g[ci]) + std::fabs(a) + std::fabs(xh[ci] * b)) +
                (dx_acc ? 4 * kU * (std::fabs(d) + old) : 0.0);
          }
        }
        EXPECT_TRUE(close(gdx, from_cpu(dx), [&](int64_t i, double w) {
          return tol_dx[static_cast<size_t>(i)] + store_ulp(cs.dx, w);
        }));
        auto param_tol = [&](const std::vector<double>& mag, const Host& old) {
          return [&, p_acc_ = p_acc](int64_t i, double w) {
            const double o = p_acc_ ? std::fabs(old.get(i)) : 0.0;
            return 2 * (rows + 1) * kU * mag[static_cast<size_t>(i)] + 4 * kU * (o + std::fabs(w)) +
                   store_ulp(cs.param, w);
          };
        };
        EXPECT_TRUE(close(gdg, from_cpu(dg), param_tol(mag_g, dg0)));
        EXPECT_TRUE(close(gdb, from_cpu(db), param_tol(mag_b, db0)));

        // Deterministic; and dx written over dout (in place) gives the same bits.
        if (!dx_acc && cs.dx == cs.dy) {
          DeviceBuffer dg2 = put(*gpu_, dg0), db2 = put(*gpu_, db0), inplace = put(*gpu_, dy);
          gpu_->layernorm_backward(inplace, dg2, db2, inplace, px.gpu, pm.gpu, pr.gpu, pg.gpu, dx_mode, p_mode);
          EXPECT_TRUE(identical(fetch(*gpu_, inplace), gdx));
          EXPECT_TRUE(identical(fetch(*gpu_, dg2), gdg));
          EXPECT_TRUE(identical(fetch(*gpu_, db2), gdb));
        }
      }
}

// ==== head layouts ===================================================================================
// Pure copies through the dtype conversion: bit for bit, every packed shape.
TEST_F(CudaTransformer, HeadShufflesBitExact) {
  struct Dims {
    int64_t B, T, H, D;
  };
  for (Dims d : {Dims{2, 5, 3, 4}, Dims{3, 33, 2, 64}})
    for (DType packed_t : kFloatTypes)
      for (DType head_t : {DType::F32, DType::BF16, DType::F16}) {
        SCOPED_TRACE("B=" + std::to_string(d.B) + " T=" + std::to_string(d.T) + " H=" + std::to_string(d.H) +
                     " D=" + std::to_string(d.D) + " packed " + dtype_name(packed_t) + " heads " +
                     dtype_name(head_t));
        const int64_t C = d.H * d.D;
        const Shape hs{d.B, d.H, d.T, d.D};
        for (Shape packed_shape : {Shape{d.B * d.T, 3 * C}, Shape{d.B, d.T, 3 * C}, Shape{d.B, d.T, 3, C}}) {
          Pair qkv = both(random(packed_t, packed_shape));
          Pair q = both(filled(head_t, hs, NAN)), k = both(filled(head_t, hs, NAN)), v = both(filled(head_t, hs, NAN));
          cpu_->split_heads(q.cpu, k.cpu, v.cpu, qkv.cpu);
          gpu_->split_heads(q.gpu, k.gpu, v.gpu, qkv.gpu);
          EXPECT_TRUE(identical(from_gpu(q), from_cpu(q)));
          EXPECT_TRUE(identical(from_gpu(k), from_cpu(k)));
          EXPECT_TRUE(identical(from_gpu(v), from_cpu(v)));
          Pair back = both(filled(packed_t, packed_shape, NAN));
          cpu_->merge_qkv_grads(back.cpu, q.cpu, k.cpu, v.cpu);
          gpu_->merge_qkv_grads(back.gpu, q.gpu, k.gpu, v.gpu);
          EXPECT_TRUE(identical(from_gpu(back), from_cpu(back)));
        }
        for (Shape merged_shape : {Shape{d.B * d.T, C}, Shape{d.B, d.T, d.H, d.D}}) {
          Pair in = both(random(head_t, hs));
          Pair out = both(filled(packed_t, merged_shape, NAN));
          cpu_->merge_heads(out.cpu, in.cpu);
          gpu_->merge_heads(out.gpu, in.gpu);
          EXPECT_TRUE(identical(from_gpu(out), from_cpu(out)));
          Pair back = both(filled(head_t, hs, NAN));
          cpu_->split_heads_grad(back.cpu, out.cpu);
          gpu_->split_heads_grad(back.gpu, out.gpu);
          EXPECT_TRUE(identical(from_gpu(back), from_cpu(back)));
        }
      }
  DeviceBuffer q = gpu_->alloc(Shape{2, 3, 5, 4}, DType::F32, MemCategory::Activations);
  DeviceBuffer bad_qkv = gpu_->alloc(Shape{10, 35}, DType::F32, MemCategory::Activations);
  DeviceBuffer flat = gpu_->alloc(Shape{10, 12}, DType::F32, MemCategory::Activations);
  DeviceBuffer bad_out = gpu_->alloc(Shape{10, 13}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(gpu_->split_heads(q, q, q, bad_qkv), std::invalid_argument);
  EXPECT_THROW(gpu_->merge_qkv_grads(bad_qkv, q, q, q), std::invalid_argument);
  EXPECT_THROW(gpu_->split_heads(flat, q, q, bad_qkv), std::invalid_argument);
  EXPECT_THROW(gpu_->merge_heads(bad_out, q), std::invalid_argument);
  EXPECT_THROW(gpu_->split_heads_grad(q, bad_out), std::invalid_argument);
}

// ==== masked softmax =================================================================================
// The logits (scale * s + (1 - key_valid) * m, m rounded to the scores'
// dtype), the row max and every exponential are the same fp32 operations on
// both backends; the row sum of Tk exponentials differs in order: relative
// 2 (Tk - 1) u between the sides, plus the division (2u) and, conservatively,
// 8u more in case exp_approx differs by an ulp between the compilers
// (ops/approx_math.h says it doesn't). Padded keys: exactly 0.
// Backward: the row's dot product sum p dp differs by 2 (Tk - 1) u sum|p dp|;
// ds = scale p (dp - dot) moves by scale p times that, plus 8u of its terms.
TEST_F(CudaTransformer, MaskedSoftmaxForwardBackwardVsCpu) {
  const int64_t B = 2, H = 3, Tq = 7;
  const float scale = 0.35355339f;
  for (int64_t Tk : {9, 67, 130})
    for (DType st : kFloatTypes)
      for (DType pt : {st, DType::F32}) {
        SCOPED_TRACE("Tk=" + std::to_string(Tk) + " scores " + dtype_name(st) + " probs " + dtype_name(pt));
        const std::vector<int32_t> kv = padding_mask(B, Tk);
        Pair key_valid = both(ints(kv, Shape{B, Tk}));
        const float mask = attention_mask_value(st);
        const Shape ss{B, H, Tq, Tk};
        const Host s = random(st, ss, -6.0f, 6.0f);
        Pair ps = both(s), probs = both(filled(pt, ss, NAN));
        cpu_->masked_softmax_forward(probs.cpu, ps.cpu, key_valid.cpu, scale, mask);
        gpu_->masked_softmax_forward(probs.gpu, ps.gpu, key_valid.gpu, scale, mask);
        const Host gp = from_gpu(probs), cp = from_cpu(probs);
        EXPECT_TRUE(close(gp, cp, [&](int64_t, double w) {
          return std::fabs(w) * (2 * Tk + 10) * kU + store_ulp(pt, w);
        }));
        for (int64_t r = 0; r < B * H * Tq; ++r) {
          const int64_t b = r / (H * Tq);
          for (int64_t j = 0; j < Tk; ++j) {
            if (!kv[static_cast<size_t>(b * Tk + j)]) {
              ASSERT_EQ(gp.get(r * Tk + j), 0.0f) << "padded key " << j;
            }
          }
        }
        if (pt == st) {  // in place: probs over the scores
          DeviceBuffer inplace = put(*gpu_, s);
          gpu_->masked_softmax_forward(inplace, inplace, key_valid.gpu, scale, mask);
          EXPECT_TRUE(identical(fetch(*gpu_, inplace), gp));
        }

        // Backward from the same probabilities on both sides.
        Pair pin = both(cp);
        const Host dp = random(pt, ss);
        Pair pdp = both(dp), ds = both(filled(pt, ss, NAN));
        cpu_->softmax_backward(ds.cpu, pin.cpu, pdp.cpu, scale);
        gpu_->softmax_backward(ds.gpu, pin.gpu, pdp.gpu, scale);
        std::vector<double> dot(static_cast<size_t>(B * H * Tq)), mag(dot.size());
        for (int64_t r = 0; r < B * H * Tq; ++r)
          for (int64_t j = 0; j < Tk; ++j) {
            dot[static_cast<size_t>(r)] += cp.get(r * Tk + j) * dp.get(r * Tk + j);
            mag[static_cast<size_t>(r)] += std::fabs(cp.get(r * Tk + j) * dp.get(r * Tk + j));
          }
        EXPECT_TRUE(close(from_gpu(ds), from_cpu(ds), [&](int64_t i, double w) {
          const auto r = static_cast<size_t>(i / Tk);
          const double p = std::fabs(cp.get(i)), d = dp.get(i);
          return scale * p * (2 * Tk * kU * mag[r] + 8 * kU * (std::fabs(d) + std::fabs(dot[r]))) +
                 4 * kU * std::fabs(w) + store_ulp(pt, w);
        }));
      }
  Pair scores = both(random(DType::F32, Shape{1, 2, 5, 5}));
  DeviceBuffer kv_bad = put(*gpu_, ints({1, 1, 1, 1}, Shape{1, 4}));
  EXPECT_THROW(gpu_->masked_softmax_forward(scores.gpu, scores.gpu, kv_bad, 0.5f, -1e9f), std::invalid_argument);
}

// The mask rule (ops/attention.h): -1e9 rounds to -inf in fp16, and a real
// key's (1 - 1) * -inf is NaN: every probability / output of the batch
// element is NaN, on the GPU exactly as on the CPU. attention_mask_value(F16)
// is finite: rows sum to 1, padded keys get 0. -1e9 is harmless in fp32/bf16.
TEST_F(CudaTransformer, MaskRuleFp16) {
  const int64_t T = 4, D = 8;
  const std::vector<int32_t> kv{1, 1, 1, 0};
  DeviceBuffer key_valid = put(*gpu_, ints(kv, Shape{1, T}));
  const Host s16 = random_nonzero(DType::F16, Shape{1, 1, T, T}, 0.1f, 4.0f);
  DeviceBuffer s = put(*gpu_, s16);
  DeviceBuffer p = gpu_->alloc(Shape{1, 1, T, T}, DType::F16, MemCategory::Activations);
  gpu_->masked_softmax_forward(p, s, key_valid, 0.5f, -1e9f);
  EXPECT_EQ(count_nonfinite(fetch(*gpu_, p)), T * T);
  gpu_->masked_softmax_forward(p, s, key_valid, 0.5f, attention_mask_value(DType::F16));
  const Host good = fetch(*gpu_, p);
  EXPECT_EQ(count_nonfinite(good), 0);
  for (int64_t r = 0; r < T; ++r) {
    double sum = 0.0;
    for (int64_t j = 0; j < T; ++j) sum += good.get(r * T + j);
    EXPECT_NEAR(sum, 1.0, 4 * 0x1p-11);  // 3 non-zero terms, each rounded to fp16
    EXPECT_EQ(good.get(r * T + T - 1), 0.0f);
  }
  for (DType t : {DType::F32, DType::BF16}) {
    DeviceBuffer st = gpu_->alloc(Shape{1, 1, T, T}, t, MemCategory::Activations);
    DeviceBuffer pt = gpu_->alloc(Shape{1, 1, T, T}, t, MemCategory::Activations);
    gpu_->cast(st, s);
    gpu_->masked_softmax_forward(pt, st, key_valid, 0.5f, -1e9f);
    EXPECT_EQ(count_nonfinite(fetch(*gpu_, pt)), 0) << dtype_name(t);
  }

  // Fused attention: the same rule on q's dtype.
  const Shape qs{1, 1, T, D};
  DeviceBuffer q = put(*gpu_, random_nonzero(DType::F16, qs));
  DeviceBuffer k = put(*gpu_, random_nonzero(DType::F16, qs));
  DeviceBuffer v = put(*gpu_, random_nonzero(DType::F16, qs));
  DeviceBuffer out = gpu_->alloc(qs, DType::F16, MemCategory::Activations);
  DeviceBuffer lse = gpu_->alloc(Shape{1, 1, T}, DType::F32, MemCategory::Activations);
  const float scale = 0.35355339f;
  gpu_->attention_forward(out, lse, q, k, v, key_valid, scale, -1e9f);
  EXPECT_EQ(count_nonfinite(fetch(*gpu_, out)), T * D);
  EXPECT_EQ(count_nonfinite(fetch(*gpu_, lse)), T);
  gpu_->attention_forward(out, lse, q, k, v, key_valid, scale, attention_mask_value(DType::F16));
  EXPECT_EQ(count_nonfinite(fetch(*gpu_, out)), 0);
  EXPECT_EQ(count_nonfinite(fetch(*gpu_, lse)), 0);
  DeviceBuffer dq = gpu_->alloc(qs, DType::F16, MemCategory::Activations);
  DeviceBuffer dk = gpu_->alloc(qs, DType::F16, MemCategory::Activations);
  DeviceBuffer dv = gpu_->alloc(qs, DType::F16, MemCategory::Activations);
  gpu_->attention_backward(dq, dk, dv, v, out, lse, q, k, v, key_valid, scale, attention_mask_value(DType::F16));
  EXPECT_EQ(count_nonfinite(fetch(*gpu_, dq)), 0);
  EXPECT_EQ(count_nonfinite(fetch(*gpu_, dk)), 0);
  EXPECT_EQ(count_nonfinite(fetch(*gpu_, dv)), 0);
  const Host dk_h = fetch(*gpu_, dk), dv_h = fetch(*gpu_, dv);
  for (int64_t d = 0; d < D; ++d) {  // the padded key: probability exactly 0, so exactly zero gradients
    EXPECT_EQ(dk_h.get((T - 1) * D + d), 0.0f);
    EXPECT_EQ(dv_h.get((T - 1) * D + d), 0.0f);
  }
}

// ==== fused attention ================================================================================
// The float64 reference and its error bounds are those of the CPU's test
// (tests/core/test_transformer_ops.cpp, TransformerAttention), which hold for
// any order of the fp32 sums, so for the GPU's tiles too. One addition: the
// GPU visits keys in tiles of 32 (the CPU 64), so P passes through up to
// ceil(T/32) online rescales: 2u each, added to P's relative bound.
struct AttnProblem {
  int64_t B, H, T, D;
  float scale, mask;
  DType dt;
  std::vector<int32_t> kv;
  Host q, k, v, dout, key_valid;
  size_t at(int64_t bh, int64_t t, int64_t d) const { return static_cast<size_t>((bh * T + t) * D + d); }
};

struct AttnRef {
  std::vector<double> P, O, lse, eps_p, tol_o, tol_lse;
};
struct AttnGradRef {
  std::vector<double> dq, dk, dv, tol_dq, tol_dk, tol_dv;
};

// extra_p: extra relative error of P (a 16-bit probs tensor); gemm: the
// factor on the dot-product bound (2 for tensor-core GEMMs of the unfused path).
AttnRef attention_ref(const AttnProblem& p, double extra_p, DType out_dt, double gemm = 1.0) {
  const int64_t T = p.T, D = p.D, BH = p.B * p.H;
  const double mask_r = scalar::attention_mask_rounded(p.dt, p.mask);
  const double rescales = 2.0 * static_cast<double>((T + 31) / 32) * kU;
  AttnRef r;
  r.P.assign(static_cast<size_t>(BH * T * T), 0.0);
  r.O.assign(static_cast<size_t>(BH * T * D), 0.0);
  r.lse.assign(static_cast<size_t>(BH * T), 0.0);
  r.eps_p.assign(r.lse.size(), 0.0);
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
          dot += static_cast<double>(p.q.get(static_cast<int64_t>(p.at(bh, i, d)))) * p.k.get(static_cast<int64_t>(p.at(bh, j, d)));
          mag += std::fabs(static_cast<double>(p.q.get(static_cast<int64_t>(p.at(bh, i, d)))) *
                           p.k.get(static_cast<int64_t>(p.at(bh, j, d))));
        }
        const bool valid = p.kv[static_cast<size_t>(b * T + j)] != 0;
        l[static_cast<size_t>(j)] = p.scale * dot + (valid ? 0.0 : mask_r);
        mx = std::max(mx, l[static_cast<size_t>(j)]);
        if (valid)
          dl = std::max(dl, gemm * p.scale * (D + 5) * kU * mag + kU * std::fabs(l[static_cast<size_t>(j)]));
      }
      double sum = 0.0, range = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        sum += std::exp(l[static_cast<size_t>(j)] - mx);
        if (p.kv[static_cast<size_t>(b * T + j)]) range = std::max(range, mx - l[static_cast<size_t>(j)]);
      }
      const size_t row = static_cast<size_t>(bh * T + i);
      r.lse[row] = mx + std::log(sum);
      r.eps_p[row] = 2 * dl + 2 * kU * range + gemm * (T + 16) * kU + rescales + extra_p;
      r.tol_lse[row] = 3 * dl + r.eps_p[row] + 4 * kU * (std::fabs(r.lse[row]) + 1.0);
      for (int64_t j = 0; j < T; ++j)
        r.P[static_cast<size_t>((bh * T + i) * T + j)] = std::exp(l[static_cast<size_t>(j)] - mx) / sum;
      for (int64_t d = 0; d < D; ++d) {
        double o = 0.0, mag = 0.0;
        for (int64_t j = 0; j < T; ++j) {
          const double pij = r.P[static_cast<size_t>((bh * T + i) * T + j)];
          const double vv = p.v.get(static_cast<int64_t>(p.at(bh, j, d)));
          o += pij * vv;
          mag += pij * std::fabs(vv);
        }
        r.O[p.at(bh, i, d)] = o;
        r.tol_o[p.at(bh, i, d)] = (r.eps_p[row] + gemm * (T + 4) * kU) * mag + half_ulp(out_dt, o);
      }
    }
  }
  return r;
}

AttnGradRef attention_grad_ref(const AttnProblem& p, const AttnRef& f, const std::vector<double>& d_err,
                               double extra_ds, DType out_dt, double gemm = 1.0) {
  const int64_t T = p.T, D = p.D, BH = p.B * p.H;
  auto val = [](const Host& h, size_t e) { return static_cast<double>(h.get(static_cast<int64_t>(e))); };
  AttnGradRef g;
  const size_t n = static_cast<size_t>(BH * T * D);
  g.dq.assign(n, 0.0), g.dk.assign(n, 0.0), g.dv.assign(n, 0.0);
  g.tol_dq.assign(n, 0.0), g.tol_dk.assign(n, 0.0), g.tol_dv.assign(n, 0.0);
  std::vector<double> mag_dq(n, 0.0), mag_dk(n, 0.0);
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t i = 0; i < T; ++i) {
      const size_t row = static_cast<size_t>(bh * T + i);
      std::vector<double> dP(static_cast<size_t>(T)), dP_err(static_cast<size_t>(T));
      double Di = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        double s = 0.0, mag = 0.0;
        for (int64_t d = 0; d < D; ++d) {
          s += val(p.dout, p.at(bh, i, d)) * val(p.v, p.at(bh, j, d));
          mag += std::fabs(val(p.dout, p.at(bh, i, d)) * val(p.v, p.at(bh, j, d)));
        }
        dP[static_cast<size_t>(j)] = s;
        dP_err[static_cast<size_t>(j)] = gemm * (D + 2) * kU * mag;
        Di += f.P[static_cast<size_t>((bh * T + i) * T + j)] * s;
      }
      for (int64_t j = 0; j < T; ++j) {
        const double pij = f.P[static_cast<size_t>((bh * T + i) * T + j)];
        if (pij == 0.0) continue;
        const double diff = dP[static_cast<size_t>(j)] - Di, ds = pij * diff;
        const double ds_err = f.eps_p[row] * pij * std::fabs(diff) + pij * (dP_err[static_cast<size_t>(j)] + d_err[row]) +
                              (3 * kU + extra_ds) * std::fabs(ds);
        for (int64_t d = 0; d < D; ++d) {
          const double qv = val(p.q, p.at(bh, i, d)), kv = val(p.k, p.at(bh, j, d)), dov = val(p.dout, p.at(bh, i, d));
          g.dq[p.at(bh, i, d)] += p.scale * ds * kv;
          g.dk[p.at(bh, j, d)] += p.scale * ds * qv;
          g.dv[p.at(bh, j, d)] += pij * dov;
          g.tol_dq[p.at(bh, i, d)] += p.scale * ds_err * std::fabs(kv);
          g.tol_dk[p.at(bh, j, d)] += p.scale * ds_err * std::fabs(qv);
          g.tol_dv[p.at(bh, j, d)] += (f.eps_p[row] + gemm * (T + 4) * kU) * pij * std::fabs(dov);
          mag_dq[p.at(bh, i, d)] += p.scale * std::fabs(ds * kv);
          mag_dk[p.at(bh, j, d)] += p.scale * std::fabs(ds * qv);
        }
      }
    }
  for (size_t e = 0; e < n; ++e) {
    g.tol_dq[e] += gemm * (T + 4) * kU * mag_dq[e] + half_ulp(out_dt, g.dq[e]);
    g.tol_dk[e] += gemm * (T + 4) * kU * mag_dk[e] + half_ulp(out_dt, g.dk[e]);
    g.tol_dv[e] += half_ulp(out_dt, g.dv[e]);
  }
  return g;
}

// D_i's error when computed from a stored O: |sum_d dO (O_stored - O)| plus
// its fp32 sum. Unfused: rowsum(P dP) with P's error.
std::vector<double> d_err_fused(const AttnProblem& p, const AttnRef& f, const Host& o_stored) {
  std::vector<double> e(static_cast<size_t>(p.B * p.H * p.T), 0.0);
  for (int64_t bh = 0; bh < p.B * p.H; ++bh)
    for (int64_t i = 0; i < p.T; ++i) {
      double diff = 0.0, mag = 0.0;
      for (int64_t d = 0; d < p.D; ++d) {
        const auto a = static_cast<int64_t>(p.at(bh, i, d));
        diff += static_cast<double>(p.dout.get(a)) * (o_stored.get(a) - f.O[static_cast<size_t>(a)]);
        mag += std::fabs(static_cast<double>(p.dout.get(a)) * o_stored.get(a));
      }
      e[static_cast<size_t>(bh * p.T + i)] = std::fabs(diff) + (p.D + 2) * kU * mag;
    }
  return e;
}
std::vector<double> d_err_unfused(const AttnProblem& p, const AttnRef& f, double gemm) {
  std::vector<double> e(static_cast<size_t>(p.B * p.H * p.T), 0.0);
  for (int64_t bh = 0; bh < p.B * p.H; ++bh)
    for (int64_t i = 0; i < p.T; ++i) {
      const size_t row = static_cast<size_t>(bh * p.T + i);
      double mag = 0.0;
      for (int64_t j = 0; j < p.T; ++j) {
        double dp = 0.0, dp_mag = 0.0;
        for (int64_t d = 0; d < p.D; ++d) {
          const double x = static_cast<double>(p.dout.get(static_cast<int64_t>(p.at(bh, i, d)))) *
                           p.v.get(static_cast<int64_t>(p.at(bh, j, d)));
          dp += x, dp_mag += std::fabs(x);
        }
        const double pij = f.P[static_cast<size_t>((bh * p.T + i) * p.T + j)];
        mag += pij * (std::fabs(dp) * (1 + f.eps_p[row]) + gemm * (p.D + 2) * kU * dp_mag);
      }
      e[row] = (f.eps_p[row] + gemm * (p.T + 2) * kU) * mag;
    }
  return e;
}

std::vector<double> sum_of(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> s(a.size());
  for (size_t e = 0; e < a.size(); ++e) s[e] = a[e] + b[e];
  return s;
}

// |got - want| <= tol[e], elementwise, for two computed tensors (NaN == NaN).
::testing::AssertionResult agree(const Host& got, const Host& want, const std::vector<double>& tol) {
  return close(got, want, [&](int64_t i, double) { return tol[static_cast<size_t>(i)]; });
}

class CudaAttention : public CudaTransformer {
 protected:
  AttnProblem make(int64_t B, int64_t H, int64_t T, int64_t D, DType dt) {
    AttnProblem p;
    p.B = B, p.H = H, p.T = T, p.D = D, p.dt = dt;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    p.mask = attention_mask_value(dt);
    p.kv = padding_mask(B, T);
    const Shape s{B, H, T, D};
    // q, k up to 2 in magnitude: logits up to ~4 sqrt(D), a softmax far from uniform.
    p.q = random_nonzero(dt, s, 0.1f, 2.0f);
    p.k = random_nonzero(dt, s, 0.1f, 2.0f);
    p.v = random_nonzero(dt, s);
    p.dout = random_nonzero(dt, s);
    p.key_valid = ints(p.kv, Shape{B, T});
    return p;
  }

  struct Run {
    Host out, lse, dq, dk, dv;
  };
  // The fused forward and backward on `dev`.
  static Run run_fused(Device& dev, const AttnProblem& p) {
    const Shape qs{p.B, p.H, p.T, p.D};
    DeviceBuffer q = put(dev, p.q), k = put(dev, p.k), v = put(dev, p.v), dout = put(dev, p.dout);
    DeviceBuffer kv = put(dev, p.key_valid);
    DeviceBuffer out = dev.alloc(qs, p.dt, MemCategory::Activations);
    DeviceBuffer lse = dev.alloc(Shape{p.B, p.H, p.T}, DType::F32, MemCategory::Activations);
    dev.attention_forward(out, lse, q, k, v, kv, p.scale, p.mask);
    DeviceBuffer dq = dev.alloc(qs, p.dt, MemCategory::Activations);
    DeviceBuffer dk = dev.alloc(qs, p.dt, MemCategory::Activations);
    DeviceBuffer dv = dev.alloc(qs, p.dt, MemCategory::Activations);
    dev.attention_backward(dq, dk, dv, dout, out, lse, q, k, v, kv, p.scale, p.mask);
    return Run{fetch(dev, out), fetch(dev, lse), fetch(dev, dq), fetch(dev, dk), fetch(dev, dv)};
  }
  // The unfused composition on `dev` (as the BERT model's unfused path):
  // S = Q K^T (fp32), P = masked_softmax(S) (in p.dt), O = P V, and back.
  static Run run_unfused(Device& dev, const AttnProblem& p) {
    const int64_t T = p.T, D = p.D, BH = p.B * p.H;
    const GemmCompute compute = p.dt == DType::F32 ? GemmCompute::F32
                                : p.dt == DType::F16 ? GemmCompute::F16
                                                     : GemmCompute::BF16;
    const Shape qs{p.B, p.H, T, D}, ss{p.B, p.H, T, T};
    auto gemm = [&](const Tensor& a, const Tensor& b, const Tensor& c, int64_t m, int64_t n, int64_t k, bool ta,
                    bool tb) {
      GemmArgs g;
      g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb;
      g.a = a, g.b = b, g.c = c, g.compute = compute;
      g.batch = BH, g.stride_a = m * k, g.stride_b = k * n, g.stride_c = m * n;
      dev.gemm(g);
    };
    DeviceBuffer q = put(dev, p.q), k = put(dev, p.k), v = put(dev, p.v), dout = put(dev, p.dout);
    DeviceBuffer kv = put(dev, p.key_valid);
    DeviceBuffer scores = dev.alloc(ss, DType::F32, MemCategory::Workspace);
    DeviceBuffer probs = dev.alloc(ss, p.dt, MemCategory::Workspace);
    DeviceBuffer out = dev.alloc(qs, p.dt, MemCategory::Activations);
    gemm(q, k, scores, T, T, D, false, true);
    dev.masked_softmax_forward(probs, scores, kv, p.scale, p.mask);
    gemm(probs, v, out, T, D, T, false, false);
    DeviceBuffer dprobs = dev.alloc(ss, DType::F32, MemCategory::Workspace);
    DeviceBuffer dscores = dev.alloc(ss, p.dt, MemCategory::Workspace);
    gemm(dout, v, dprobs, T, T, D, false, true);
    dev.softmax_backward(dscores, probs, dprobs, p.scale);
    DeviceBuffer dq = dev.alloc(qs, p.dt, MemCategory::Activations);
    DeviceBuffer dk = dev.alloc(qs, p.dt, MemCategory::Activations);
    DeviceBuffer dv = dev.alloc(qs, p.dt, MemCategory::Activations);
    gemm(dscores, k, dq, T, D, T, false, false);  // dQ = dS K
    gemm(dscores, q, dk, T, D, T, true, false);   // dK = dS^T Q
    gemm(probs, dout, dv, T, D, T, true, false);  // dV = P^T dO
    return Run{fetch(dev, out), Host{}, fetch(dev, dq), fetch(dev, dk), fetch(dev, dv)};
  }
};

// Fused forward (out, lse) and backward (dq, dk, dv) on the GPU: within the
// float64 bound of the exact values, within the sum of both backends' bounds
// of the CPU, padded keys' dk/dv exactly 0, deterministic. Shapes: T = 67
// (three key tiles, the last partial) and T = 5 (one partial tile), D = 16,
// 40 (not a multiple of the 8 threads per row), 64, 128 (the maximum).
TEST_F(CudaAttention, FusedVsFloat64AndCpu) {
  struct Case {
    int64_t B, H, T, D;
  };
  for (Case c : {Case{2, 2, 67, 16}, Case{2, 1, 5, 40}, Case{1, 2, 33, 64}, Case{2, 1, 40, 128}})
    for (DType dt : kFloatTypes) {
      SCOPED_TRACE("B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " T=" + std::to_string(c.T) +
                   " D=" + std::to_string(c.D) + " " + dtype_name(dt));
      const AttnProblem p = make(c.B, c.H, c.T, c.D, dt);
      const Run g = run_fused(*gpu_, p), h = run_fused(*cpu_, p);
      const AttnRef f = attention_ref(p, 0.0, dt);
      EXPECT_TRUE(within(g.out, f.O, f.tol_o, "out"));
      EXPECT_TRUE(within(g.lse, f.lse, f.tol_lse, "lse"));
      EXPECT_TRUE(agree(g.out, h.out, sum_of(f.tol_o, f.tol_o)));
      EXPECT_TRUE(agree(g.lse, h.lse, sum_of(f.tol_lse, f.tol_lse)));
      const AttnGradRef gg = attention_grad_ref(p, f, d_err_fused(p, f, g.out), 0.0, dt);
      const AttnGradRef gc = attention_grad_ref(p, f, d_err_fused(p, f, h.out), 0.0, dt);
      EXPECT_TRUE(within(g.dq, gg.dq, gg.tol_dq, "dq"));
      EXPECT_TRUE(within(g.dk, gg.dk, gg.tol_dk, "dk"));
      EXPECT_TRUE(within(g.dv, gg.dv, gg.tol_dv, "dv"));
      EXPECT_TRUE(agree(g.dq, h.dq, sum_of(gg.tol_dq, gc.tol_dq)));
      EXPECT_TRUE(agree(g.dk, h.dk, sum_of(gg.tol_dk, gc.tol_dk)));
      EXPECT_TRUE(agree(g.dv, h.dv, sum_of(gg.tol_dv, gc.tol_dv)));
      for (int64_t bh = 0; bh < p.B * p.H; ++bh)
        for (int64_t j = 0; j < p.T; ++j) {
          if (p.kv[static_cast<size_t>((bh / p.H) * p.T + j)]) continue;
          for (int64_t d = 0; d < p.D; ++d) {
            ASSERT_EQ(g.dk.get(static_cast<int64_t>(p.at(bh, j, d))), 0.0f);
            ASSERT_EQ(g.dv.get(static_cast<int64_t>(p.at(bh, j, d))), 0.0f);
          }
        }
      const Run again = run_fused(*gpu_, p);
      EXPECT_TRUE(identical(again.out, g.out));
      EXPECT_TRUE(identical(again.lse, g.lse));
      EXPECT_TRUE(identical(again.dq, g.dq));
      EXPECT_TRUE(identical(again.dk, g.dk));
      EXPECT_TRUE(identical(again.dv, g.dv));
    }
}

// Fused vs the unfused composition, both on the GPU: each within its bound of
// the exact values, so within the sum of the bounds of each other. The
// unfused path's GEMMs run on cuBLASLt (tensor cores for bf16: the dot/sum
// terms of its bound are doubled, as test_cuda_ops.cpp's GEMM bound does), and
// in bf16 it also rounds probs and dscores to bf16 (2^-8 relative).
TEST_F(CudaAttention, FusedVsUnfusedOnGpu) {
  for (DType dt : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    const AttnProblem p = make(2, 2, 67, 16, dt);
    const Run fz = run_fused(*gpu_, p), uf = run_unfused(*gpu_, p);
    const double extra = dt == DType::F32 ? 0.0 : 0x1p-8;
    const double gemm = dt == DType::F32 ? 1.0 : 2.0;
    const AttnRef f = attention_ref(p, 0.0, dt);
    const AttnRef fu = attention_ref(p, extra, dt, gemm);
    const AttnGradRef g = attention_grad_ref(p, f, d_err_fused(p, f, fz.out), 0.0, dt);
    const AttnGradRef gu = attention_grad_ref(p, fu, d_err_unfused(p, fu, gemm), extra, dt, gemm);
    EXPECT_TRUE(agree(uf.out, fz.out, sum_of(f.tol_o, fu.tol_o)));
    EXPECT_TRUE(agree(uf.dq, fz.dq, sum_of(g.tol_dq, gu.tol_dq)));
    EXPECT_TRUE(agree(uf.dk, fz.dk, sum_of(g.tol_dk, gu.tol_dk)));
    EXPECT_TRUE(agree(uf.dv, fz.dv, sum_of(g.tol_dv, gu.tol_dv)));
  }
}

TEST_F(CudaAttention, RejectsBadShapesAndLargeHeadDim) {
  auto alloc = [&](Shape s, DType t) { return gpu_->alloc(s, t, MemCategory::Activations); };
  DeviceBuffer q = alloc(Shape{1, 2, 5, 4}, DType::F32), k16 = alloc(Shape{1, 2, 5, 4}, DType::BF16);
  DeviceBuffer lse = alloc(Shape{1, 2, 5}, DType::F32), bad_lse = alloc(Shape{1, 2, 4}, DType::F32);
  DeviceBuffer kv = put(*gpu_, ints({1, 1, 1, 1, 1}, Shape{1, 5}));
  DeviceBuffer kv_bad = put(*gpu_, ints({1, 1, 1, 1}, Shape{1, 4}));
  gpu_->fill(q, 0.5f);
  EXPECT_NO_THROW(gpu_->attention_forward(q, lse, q, q, q, kv, 0.5f, -1e9f));
  EXPECT_THROW(gpu_->attention_forward(q, lse, q, k16, q, kv, 0.5f, -1e9f), std::invalid_argument);
  EXPECT_THROW(gpu_->attention_forward(q, bad_lse, q, q, q, kv, 0.5f, -1e9f), std::invalid_argument);
  EXPECT_THROW(gpu_->attention_forward(q, lse, q, q, q, kv_bad, 0.5f, -1e9f), std::invalid_argument);
  DeviceBuffer big = alloc(Shape{1, 1, 5, 129}, DType::F32), big_lse = alloc(Shape{1, 1, 5}, DType::F32);
  DeviceBuffer kv1 = put(*gpu_, ints({1, 1, 1, 1, 1}, Shape{1, 5}));
  EXPECT_THROW(gpu_->attention_forward(big, big_lse, big, big, big, kv1, 0.1f, -1e9f), std::invalid_argument);
  EXPECT_THROW(gpu_->attention_backward(big, big, big, big, big, big_lse, big, big, big, kv1, 0.1f, -1e9f),
               std::invalid_argument);
  gpu_->synchronize();
}

// ==== embedding ======================================================================================
// Forward: a gather, bit for bit. Backward: every table row summed over its
// positions in ascending order, from 0 (Overwrite) or from the old value
// (Accumulate), rounded once: the CPU's sum in the CPU's order, bit for bit.
// Ids repeat heavily (one id on ~40% of the positions, a bucket of 1600), some
// table rows are never used (zeroed / untouched).
TEST_F(CudaTransformer, EmbeddingForwardBackwardBitExact) {
  struct Case {
    int64_t V, C, N;
  };
  for (Case cs : {Case{50, 24, 40}, Case{1000, 96, 4096}})
    for (DType table_t : kFloatTypes)
      for (DType act_t : {DType::F32, DType::BF16}) {
        SCOPED_TRACE("V=" + std::to_string(cs.V) + " N=" + std::to_string(cs.N) + " table " + dtype_name(table_t) +
                     " activations " + dtype_name(act_t));
        std::vector<int32_t> ids(static_cast<size_t>(cs.N));
        std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(cs.V * 9 / 10) - 1);
        std::bernoulli_distribution heavy(0.4);
        for (auto& id : ids) id = heavy(rng_) ? 3 : any(rng_);
        Pair pid = both(ints(ids, Shape{cs.N}));
        Pair table = both(random(table_t, Shape{cs.V, cs.C}));
        Pair out = both(filled(act_t, Shape{cs.N, cs.C}, NAN));
        cpu_->embedding_forward(out.cpu, table.cpu, pid.cpu);
        gpu_->embedding_forward(out.gpu, table.gpu, pid.gpu);
        EXPECT_TRUE(identical(from_gpu(out), from_cpu(out)));

        const Host dout = random(act_t, Shape{cs.N, cs.C});
        Pair pdout = both(dout);
        for (GradMode mode : {GradMode::Overwrite, GradMode::Accumulate}) {
          const Host t0 = mode == GradMode::Accumulate ? random(table_t, Shape{cs.V, cs.C})
                                                       : filled(table_t, Shape{cs.V, cs.C}, NAN);
          Pair dt = both(t0);
          cpu_->embedding_backward(dt.cpu, pdout.cpu, pid.cpu, mode);
          gpu_->embedding_backward(dt.gpu, pdout.gpu, pid.gpu, mode);
          const Host got = from_gpu(dt);
          EXPECT_TRUE(identical(got, from_cpu(dt)));
          // Unreferenced rows (ids stay below 9V/10): untouched or zeroed.
          for (int64_t r = cs.V * 9 / 10; r < cs.V; ++r)
            for (int64_t c = 0; c < cs.C; ++c) {
              const int64_t e = r * cs.C + c;
              if (mode == GradMode::Accumulate) {
                ASSERT_EQ(std::memcmp(got.bytes.data() + e * dtype_size(table_t),
                                      t0.bytes.data() + e * dtype_size(table_t), dtype_size(table_t)),
                          0);
              } else {
                ASSERT_EQ(got.get(e), 0.0f);
              }
            }
          // Deterministic.
          DeviceBuffer again = put(*gpu_, t0);
          gpu_->embedding_backward(again, pdout.gpu, pid.gpu, mode);
          EXPECT_TRUE(identical(fetch(*gpu_, again), got));
        }
      }
}

// The CPU throws std::out_of_range before touching anything; the GPU finds
// bad ids in its kernels and reports them (DeviceError) at the next
// synchronising call, after which the device is usable again.
TEST_F(CudaTransformer, EmbeddingBadIdsAreReported) {
  DeviceBuffer table = put(*gpu_, random(DType::F32, Shape{10, 4}));
  DeviceBuffer out = gpu_->alloc(Shape{3, 4}, DType::F32, MemCategory::Activations);
  for (int32_t bad : {-1, 10}) {
    SCOPED_TRACE(bad);
    DeviceBuffer ids = put(*gpu_, ints({0, bad, 2}, Shape{3}));
    gpu_->embedding_forward(out, table, ids);
    EXPECT_THROW(gpu_->synchronize(), DeviceError);
    gpu_->synchronize();  // consumed
    gpu_->embedding_backward(table, out, ids, GradMode::Accumulate);
    EXPECT_THROW(gpu_->synchronize(), DeviceError);
    gpu_->synchronize();
  }
  DeviceBuffer wrong_type = gpu_->alloc(Shape{3}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(gpu_->embedding_forward(out, table, wrong_type), std::invalid_argument);
}

// ==== dropout ========================================================================================
// The same counter-based hash of the same flat index against the same
// threshold (computed on the host, as on the CPU) and the same fp32 scaling:
// bit for bit, any dtypes, in place too.
TEST_F(CudaTransformer, DropoutBitExact) {
  const int64_t n = 1'000'003;
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f})
    for (auto [it, ot] : {std::pair<DType, DType>{DType::F32, DType::F32}, {DType::BF16, DType::BF16},
                          {DType::F16, DType::F32}, {DType::F32, DType::F16}}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " " + dtype_name(it) + "->" + dtype_name(ot));
      const Host x = random(it, Shape{n});
      Pair in = both(x), out = both(filled(ot, Shape{n}, NAN));
      cpu_->dropout(out.cpu, in.cpu, p, 1234);
      gpu_->dropout(out.gpu, in.gpu, p, 1234);
      const Host got = from_gpu(out);
      EXPECT_TRUE(identical(got, from_cpu(out)));
      if (it == ot) {
        DeviceBuffer inplace = put(*gpu_, x);
        gpu_->dropout(inplace, inplace, p, 1234);
        EXPECT_TRUE(identical(fetch(*gpu_, inplace), got));
      }
      if (p > 0.0f) {  // another seed: another mask
        gpu_->dropout(out.gpu, in.gpu, p, 1235);
        int64_t differ = 0;
        const Host other = from_gpu(out);
        for (int64_t i = 0; i < n; ++i) differ += (other.get(i) == 0.0f) != (got.get(i) == 0.0f);
        EXPECT_GT(differ, n / 100);
      }
    }
  Pair x = both(random(DType::F32, Shape{16}));
  EXPECT_THROW(gpu_->dropout(x.gpu, x.gpu, 1.0f, 1), std::invalid_argument);
  EXPECT_THROW(gpu_->dropout(x.gpu, x.gpu, -0.1f, 1), std::invalid_argument);
}

// ==== cross-entropy with ignored labels ==============================================================
// Labels < 0 (-100 as PyTorch's ignore_index, -1): loss 0, dlogits row exactly
// 0 (fused and unfused), not counted by count_correct; the unfused forward
// still writes the row's probabilities. Against the CPU with the bound of
// test_cuda_ops.cpp's SoftmaxXent: (2C + 16) u relative on a probability and a
// row loss (expf and the row sums differ); a label >= C is still an error.
TEST_F(CudaTransformer, SoftmaxXentIgnoredLabels) {
  const int64_t R = 40, C = 37;
  for (DType lt : {DType::F32, DType::BF16})
    for (DType dt : {DType::F32, DType::F16}) {
      SCOPED_TRACE(std::string("logits ") + dtype_name(lt) + " dlogits " + dtype_name(dt));
      Host y(DType::I32, Shape{R});
      std::uniform_int_distribution<int32_t> cls(0, static_cast<int32_t>(C) - 1);
      int64_t real = 0;
      for (int64_t r = 0; r < R; ++r) {
        const int32_t lab = r % 3 == 0 ? -100 : (r % 7 == 0 ? -1 : cls(rng_));
        y.set_label(r, lab);
        real += lab >= 0;
      }
      Pair py = both(y), logits = both(random(lt, Shape{R, C}, -6.0f, 6.0f));
      Pair probs = both(filled(DType::F32, Shape{R, C}, NAN));
      const double loss_cpu = cpu_->softmax_xent_forward(probs.cpu, logits.cpu, py.cpu);
      const double loss_gpu = gpu_->softmax_xent_forward(probs.gpu, logits.gpu, py.gpu);
      const double rel = static_cast<double>(2 * C + 16) * kU;
      EXPECT_NEAR(loss_gpu, loss_cpu, rel * (static_cast<double>(real) + std::fabs(loss_cpu)) + 1e-12);
      const Host pc = from_cpu(probs);
      EXPECT_TRUE(close(from_gpu(probs), pc, [&](int64_t, double w) { return rel * std::fabs(w) + ulp(DType::F32, w); }));
      const float gs = 1.0f / static_cast<float>(real);
      Pair unfused = both(filled(dt, Shape{R, C}, NAN)), fused = both(filled(dt, Shape{R, C}, NAN));
      cpu_->softmax_xent_backward(unfused.cpu, probs.cpu, py.cpu, gs);
      gpu_->softmax_xent_backward(unfused.gpu, probs.gpu, py.gpu, gs);
      const double fused_gpu = gpu_->softmax_xent_fused(fused.gpu, logits.gpu, py.gpu, gs);
      EXPECT_EQ(fused_gpu, loss_gpu);  // the same expressions: identical
      const Host gu = from_gpu(unfused), gf = from_gpu(fused), gp = from_gpu(probs);
      EXPECT_TRUE(identical(gf, gu));
      EXPECT_TRUE(close(gu, from_cpu(unfused), [&](int64_t i, double w) {
        return (rel * pc.get(i) + ulp(DType::F32, pc.get(i))) * gs + 2 * ulp(DType::F32, w) + store_ulp(dt, w);
      }));
      for (int64_t r = 0; r < R; ++r) {
        if (y.label(r) >= 0) continue;
        for (int64_t c = 0; c < C; ++c) {
          ASSERT_EQ(gu.get(r * C + c), 0.0f) << "ignored row " << r;
          ASSERT_EQ(gf.get(r * C + c), 0.0f) << "ignored row " << r;
          ASSERT_FALSE(std::isnan(gp.get(r * C + c))) << "an ignored row still gets its probabilities";
        }
      }
      EXPECT_EQ(gpu_->count_correct(logits.gpu, py.gpu), cpu_->count_correct(logits.cpu, py.cpu));
      // Every row's argmax as its label: only the real rows count.
      Host y2 = y;
      const Host lh = from_gpu(logits);
      for (int64_t r = 0; r < R; ++r) {
        if (y.label(r) < 0) continue;
        int64_t best = 0;
        for (int64_t c = 1; c < C; ++c)
          if (lh.get(r * C + c) > lh.get(r * C + best)) best = c;
        y2.set_label(r, static_cast<int32_t>(best));
      }
      DeviceBuffer py2 = put(*gpu_, y2);
      EXPECT_EQ(gpu_->count_correct(logits.gpu, py2), real);
    }
  // Negative labels are not errors; a label >= C is.
  Pair logits = both(random(DType::F32, Shape{4, 10}));
  DeviceBuffer neg = put(*gpu_, ints({1, -1, -100, 2}, Shape{4}));
  DeviceBuffer big = put(*gpu_, ints({1, 10, 0, 2}, Shape{4}));
  DeviceBuffer probs = gpu_->alloc(Shape{4, 10}, DType::F32, MemCategory::Activations);
  EXPECT_NO_THROW(gpu_->softmax_xent_forward(probs, logits.gpu, neg));
  EXPECT_NO_THROW(gpu_->count_correct(logits.gpu, neg));
  EXPECT_THROW(gpu_->softmax_xent_forward(probs, logits.gpu, big), DeviceError);
  EXPECT_THROW(gpu_->count_correct(logits.gpu, big), DeviceError);
  gpu_->softmax_xent_backward(probs, probs, big, 1.0f);
  EXPECT_THROW(gpu_->synchronize(), DeviceError);
  gpu_->synchronize();
}

// ==== AdamW's param_copy ===============================================================================
// The fused kernel writes the copy of each updated (stored) parameter in its
// pass; the unfused path casts after. Either way: copy == cast(param) bit for
// bit, and param, m, v are exactly what the same step without a copy gives.
TEST_F(CudaTransformer, AdamWParamCopyIsCastOfParam) {
  const Shape s{777, 13};
  const AdamWHyper h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3};
  for (DType pt : kFloatTypes)
    for (DType gt : {DType::F32, DType::BF16})
      for (DType ct : kFloatTypes)
        for (bool fused : {true, false}) {
          SCOPED_TRACE(std::string("param ") + dtype_name(pt) + " grad " + dtype_name(gt) + " copy " +
                       dtype_name(ct) + (fused ? " fused" : " unfused"));
          const Host p0 = random(pt, s), g0 = random(gt, s, -100.0f, 100.0f);
          const Host m0 = random(DType::F32, s, -0.01f, 0.01f), v0 = random(DType::F32, s, 0.0f, 1e-4f);
          DeviceBuffer p = put(*gpu_, p0), g = put(*gpu_, g0), m = put(*gpu_, m0), v = put(*gpu_, v0);
          DeviceBuffer copy = put(*gpu_, filled(ct, s, NAN));
          gpu_->adamw_step(p, g, m, v, h, 0.5f, fused, copy);
          DeviceBuffer p2 = put(*gpu_, p0), m2 = put(*gpu_, m0), v2 = put(*gpu_, v0);
          gpu_->adamw_step(p2, g, m2, v2, h, 0.5f, fused, Tensor{});
          const Host pg = fetch(*gpu_, p);
          EXPECT_TRUE(identical(pg, fetch(*gpu_, p2)));
          EXPECT_TRUE(identical(fetch(*gpu_, m), fetch(*gpu_, m2)));
          EXPECT_TRUE(identical(fetch(*gpu_, v), fetch(*gpu_, v2)));
          DeviceBuffer want = gpu_->alloc(s, ct, MemCategory::Activations);
          gpu_->cast(want, p);
          EXPECT_TRUE(identical(fetch(*gpu_, copy), fetch(*gpu_, want)));
        }
  DeviceBuffer p = put(*gpu_, random(DType::F32, Shape{8})), m = put(*gpu_, filled(DType::F32, Shape{8}, 0.0f));
  DeviceBuffer v = put(*gpu_, filled(DType::F32, Shape{8}, 0.0f)), g = put(*gpu_, random(DType::F32, Shape{8}));
  DeviceBuffer short_copy = gpu_->alloc(Shape{7}, DType::F16, MemCategory::Params);
  EXPECT_THROW(gpu_->adamw_step(p, g, m, v, h, 1.0f, true, short_copy), std::invalid_argument);
}

}  // namespace
}  // namespace mpb
