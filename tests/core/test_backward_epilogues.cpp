// The backward GEMM epilogues (Epilogue::DGelu, DGeluBGrad; core/device.h) on
// the CPU backend (ops/cpu/gemm_onednn.cpp).
//
// What is proven
//  * DGelu / DGeluBGrad == the unfused composition gemm; activation_backward
//    (Gelu, C, C, pre_act); bias_grad(db, C, Overwrite), bit for bit (C and
//    db), for fp32/bf16/fp16 compute, fp32 and 16-bit C, fp32 and 16-bit db,
//    every transpose, alpha != 1.
//  * Against float64: C = alpha * op(A) op(B) * gelu'(pre) within the fp32
//    accumulation bound plus the approximate tanh's error plus C's rounding;
//    db = column sums of the stored C within m fp32 roundings plus db's.
//  * DGeluBGrad overwrites db (stale contents are ignored).
//  * Misuse is rejected: beta != 0, no pre_act, pre_act aliasing C, wrong
//    bias_grad_out size, bias_grad_out with another epilogue, batch > 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "tests/core/reference.h"

namespace {

using namespace mpb;

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  GemmCompute compute;
  DType c_dtype, db_dtype;
  float alpha;
};

DType operand_dtype(GemmCompute c) {
  switch (c) {
    case GemmCompute::F16: return DType::F16;
    case GemmCompute::BF16: return DType::BF16;
    default: return DType::F32;
  }
}

std::vector<uint8_t> raw(Device& dev, const Tensor& t) {
  std::vector<uint8_t> h(t.bytes());
  dev.download(h.data(), t);
  return h;
}

// Uploads x rounded to dt; returns the buffer (values via download_values).
DeviceBuffer upload_as(Device& dev, const std::vector<float>& x, Shape shape, DType dt) {
  DeviceBuffer f = testref::upload(dev, x, shape, DType::F32);
  if (dt == DType::F32) return f;
  DeviceBuffer b = dev.alloc(shape, dt, MemCategory::Activations);
  dev.cast(b, f);
  return b;
}

void run_case(const Case& c) {
  SCOPED_TRACE(::testing::Message() << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << c.ta << " tb="
                                    << c.tb << " compute=" << gemm_compute_name(c.compute) << " C="
                                    << dtype_name(c.c_dtype) << " db=" << dtype_name(c.db_dtype)
                                    << " alpha=" << c.alpha);
  auto dev = make_cpu_device();
  const DType op = operand_dtype(c.compute);
  const Shape sa = c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k};
  const Shape sb = c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n};
  DeviceBuffer a = upload_as(*dev, testref::random_nonzero(static_cast<size_t>(c.m * c.k), 11), sa, op);
  DeviceBuffer b = upload_as(*dev, testref::random_nonzero(static_cast<size_t>(c.k * c.n), 12), sb, op);
  // Pre-activations over +-3: both GELU tails and the curved middle.
  DeviceBuffer pre =
      upload_as(*dev, testref::random_nonzero(static_cast<size_t>(c.m * c.n), 13, 0.01f, 3.0f), Shape{c.m, c.n},
                c.c_dtype);
  DeviceBuffer cf = dev->alloc(Shape{c.m, c.n}, c.c_dtype, MemCategory::Activations);
  DeviceBuffer cu = dev->alloc(Shape{c.m, c.n}, c.c_dtype, MemCategory::Activations);
  DeviceBuffer dbf = dev->alloc(Shape{c.n}, c.db_dtype, MemCategory::Grads);
  DeviceBuffer dbu = dev->alloc(Shape{c.n}, c.db_dtype, MemCategory::Grads);
  dev->fill(dbf, 123.0f);  // stale contents: DGeluBGrad overwrites

  GemmArgs g;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.trans_a = c.ta;
  g.trans_b = c.tb;
  g.a = a;
  g.b = b;
  g.alpha = c.alpha;
  g.compute = c.compute;

  // Unfused composition.
  GemmArgs u = g;
  u.c = cu;
  dev->gemm(u);
  dev->activation_backward(Activation::Gelu, cu, cu, pre);
  dev->bias_grad(dbu, cu, GradMode::Overwrite);

  // Fused: DGelu alone, then DGeluBGrad (same C).
  GemmArgs f = g;
  f.c = cf;
  f.pre_act = pre;
  f.epilogue = Epilogue::DGelu;
  dev->gemm(f);
  EXPECT_EQ(raw(*dev, cf), raw(*dev, cu)) << "DGelu differs from gemm + activation_backward";
  dev->fill(cf, 0.0f);
  f.epilogue = Epilogue::DGeluBGrad;
  f.bias_grad_out = dbf;
  dev->gemm(f);
  EXPECT_EQ(raw(*dev, cf), raw(*dev, cu)) << "DGeluBGrad's C differs from the unfused composition";
  EXPECT_EQ(raw(*dev, dbf), raw(*dev, dbu)) << "DGeluBGrad's bias gradient differs from bias_grad";

  // Float64 references.
  const auto av = testref::download_values(*dev, a), bv = testref::download_values(*dev, b);
  const auto pv = testref::download_values(*dev, pre), cv = testref::download_values(*dev, cf);
  const auto dv = testref::download_values(*dev, dbf);
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double dot = 0, mag = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double x = av[static_cast<size_t>(c.ta ? p * c.m + i : i * c.k + p)];
        const double y = bv[static_cast<size_t>(c.tb ? j * c.k + p : p * c.n + j)];
        dot += x * y;
        mag += std::fabs(x * y);
      }
      const size_t ij = static_cast<size_t>(i * c.n + j);
      const double ref = c.alpha * dot * testref::gelu_grad(pv[ij]);
      // fp32 sums (k roundings), rounding to C's dtype before the multiply
      // and after it, and scalar::gelu_grad's approximate tanh (< 1e-5).
      const double s = std::fabs(c.alpha) * mag;
      const double tol = testref::kGeluLipschitz * (2.0 * c.k * testref::kU32 * s +
                                                     2.0 * testref::half_ulp_of(c.c_dtype, s)) +
                         1e-5 * s + 2.0 * testref::half_ulp_of(c.c_dtype, ref);
      ASSERT_NEAR(cv[ij], ref, tol) << "C[" << i << "," << j << "]";
    }
  }
  for (int64_t j = 0; j < c.n; ++j) {
    double sum = 0, mag = 0;
    for (int64_t i = 0; i < c.m; ++i) {
      sum += cv[static_cast<size_t>(i * c.n + j)];
      mag += std::fabs(cv[static_cast<size_t>(i * c.n + j)]);
    }
    const double tol = 2.0 * c.m * testref::kU32 * mag + testref::half_ulp_of(c.db_dtype, sum);
    ASSERT_NEAR(dv[static_cast<size_t>(j)], sum, tol) << "db[" << j << "]";
  }
}

using Param = std::tuple<GemmCompute, bool, bool>;
class BackwardEpilogues : public ::testing::TestWithParam<Param> {};

TEST_P(BackwardEpilogues, FusedEqualsUnfusedAndFloat64) {
  const auto [compute, ta, tb] = GetParam();
  const DType op = operand_dtype(compute);
  for (DType cdt : {DType::F32, op}) {
    for (DType dbt : {DType::F32, op}) {
      run_case(Case{37, 29, 53, ta, tb, compute, cdt, dbt, 1.0f});
      if (cdt == DType::F32 && dbt == DType::F32) run_case(Case{64, 40, 96, ta, tb, compute, cdt, dbt, 0.5f});
      if (op == DType::F32) break;
    }
    if (op == DType::F32) break;
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, BackwardEpilogues,
                         ::testing::Combine(::testing::Values(GemmCompute::F32, GemmCompute::BF16, GemmCompute::F16),
                                            ::testing::Bool(), ::testing::Bool()));

TEST(BackwardEpiloguesArgs, MisuseIsRejected) {
  auto dev = make_cpu_device();
  const int64_t m = 8, n = 16, k = 4;
  DeviceBuffer a = testref::upload(*dev, testref::random_nonzero(m * k, 1), Shape{m, k}, DType::F32);
  DeviceBuffer b = testref::upload(*dev, testref::random_nonzero(k * n, 2), Shape{k, n}, DType::F32);
  DeviceBuffer c = dev->alloc(Shape{m, n}, DType::F32, MemCategory::Activations);
  DeviceBuffer pre = testref::upload(*dev, testref::random_nonzero(m * n, 3), Shape{m, n}, DType::F32);
  DeviceBuffer db = dev->alloc(Shape{n}, DType::F32, MemCategory::Grads);
  DeviceBuffer db_short = dev->alloc(Shape{n - 1}, DType::F32, MemCategory::Grads);
  GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.b = b;
  g.c = c;
  g.pre_act = pre;
  g.epilogue = Epilogue::DGeluBGrad;
  g.bias_grad_out = db;
  EXPECT_NO_THROW(dev->gemm(g));

  GemmArgs x = g;
  x.beta = 1.0f;
  EXPECT_THROW(dev->gemm(x), std::invalid_argument);
  x = g;
  x.pre_act = Tensor();
  EXPECT_THROW(dev->gemm(x), std::invalid_argument);
  x = g;
  x.pre_act = c;
  EXPECT_THROW(dev->gemm(x), std::invalid_argument);
  x = g;
  x.bias_grad_out = db_short;
  EXPECT_THROW(dev->gemm(x), std::invalid_argument);
  x = g;
  x.bias_grad_out = Tensor();
  EXPECT_THROW(dev->gemm(x), std::invalid_argument);
  x = g;
  x.epilogue = Epilogue::DGelu;  // bias_grad_out only with DGeluBGrad
  EXPECT_THROW(dev->gemm(x), std::invalid_argument);
  x = g;
  x.batch = 2;
  x.stride_a = m * k;
  x.stride_b = k * n;
  x.stride_c = m * n;
  EXPECT_ANY_THROW(dev->gemm(x));
}

}  // namespace
