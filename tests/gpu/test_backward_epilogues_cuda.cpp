// The backward GEMM epilogues (Epilogue::DGelu, DGeluBGrad; core/device.h) on
// the CUDA backend (ops/cuda/gemm_cublaslt.cu: CUBLASLT_EPILOGUE_DGELU /
// DGELU_BGRAD, or the documented explicit fallback) against the CPU device
// (whose result is the unfused composition, proven bit for bit in
// tests/core/test_backward_epilogues.cpp). Skipped without a usable GPU.
//
// Cases cover: the fused path (n % 8 == 0, pre_act in C's dtype, aligned;
// db in C's dtype -> DGELU_BGRAD, db fp32 with a 16-bit C -> DGELU + the
// bias_grad kernel), a misaligned db view (scratch + copy), and the fallback
// (n % 8 != 0; pre_act in another dtype than C).
//
// Bounds: the two backends' fp32 accumulations differ by up to gamma sum|ab|
// with gamma = 2 (k + 2) 2^-23 (tensor cores' accumulation is not IEEE); the
// GELU derivative: cuBLASLt's own implementation (possibly the hardware tanh,
// relative error ~2^-11) vs scalar::gelu_grad, allowed 2^-9 (1 + |pre|) of
// |dot|; a 16-bit C: the CPU rounds the product to C before the multiply and
// after, cuBLASLt once (two ulps of C). db: the per-element allowances summed
// over the m rows, plus m 2^-23 sum|C| and one ulp of db.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/cuda/cuda_device.h"
#include "core/device.h"
#include "tests/core/reference.h"

namespace {

using namespace mpb;

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  GemmCompute compute;
  DType c_dtype, pre_dtype, db_dtype;
  bool bgrad;
  int64_t db_offset = 0;  // element offset of the db view (misaligned when odd)
  float alpha = 1.0f;
  std::string str() const {
    std::ostringstream s;
    s << "m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb << " " << gemm_compute_name(compute)
      << " C=" << dtype_name(c_dtype) << " pre=" << dtype_name(pre_dtype) << " db=" << dtype_name(db_dtype)
      << " bgrad=" << bgrad << " db_off=" << db_offset << " alpha=" << alpha;
    return s.str();
  }
};

DType operand_dtype(GemmCompute c) {
  switch (c) {
    case GemmCompute::F16: return DType::F16;
    case GemmCompute::BF16: return DType::BF16;
    default: return DType::F32;
  }
}

DeviceBuffer upload_as(Device& dev, const std::vector<float>& x, Shape shape, DType dt) {
  DeviceBuffer f = testref::upload(dev, x, shape, DType::F32);
  if (dt == DType::F32) return f;
  DeviceBuffer b = dev.alloc(shape, dt, MemCategory::Activations);
  dev.cast(b, f);
  return b;
}

class CudaBackwardEpilogues : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
    cpu_ = make_cpu_device();
    gpu_ = make_cuda_device();
  }

  struct Out {
    std::vector<double> c, db;
  };
  Out run_on(Device& dev, const Case& cs) {
    const DType op = operand_dtype(cs.compute);
    const Shape sa = cs.ta ? Shape{cs.k, cs.m} : Shape{cs.m, cs.k};
    const Shape sb = cs.tb ? Shape{cs.n, cs.k} : Shape{cs.k, cs.n};
    DeviceBuffer a = upload_as(dev, testref::random_nonzero(static_cast<size_t>(cs.m * cs.k), 21), sa, op);
    DeviceBuffer b = upload_as(dev, testref::random_nonzero(static_cast<size_t>(cs.k * cs.n), 22), sb, op);
    DeviceBuffer pre = upload_as(dev, testref::random_nonzero(static_cast<size_t>(cs.m * cs.n), 23, 0.01f, 3.0f),
                                 Shape{cs.m, cs.n}, cs.pre_dtype);
    DeviceBuffer c = dev.alloc(Shape{cs.m, cs.n}, cs.c_dtype, MemCategory::Activations);
    DeviceBuffer db = dev.alloc(Shape{cs.db_offset + cs.n}, cs.db_dtype, MemCategory::Grads);
    dev.fill(db, 77.0f);  // stale: DGeluBGrad overwrites
    GemmArgs g;
    g.m = cs.m;
    g.n = cs.n;
    g.k = cs.k;
    g.trans_a = cs.ta;
    g.trans_b = cs.tb;
    g.a = a;
    g.b = b;
    g.c = c;
    g.alpha = cs.alpha;
    g.compute = cs.compute;
    g.pre_act = pre;
    g.epilogue = cs.bgrad ? Epilogue::DGeluBGrad : Epilogue::DGelu;
    const Tensor dbv = db.tensor().flat_slice(cs.db_offset, cs.n);
    if (cs.bgrad) g.bias_grad_out = dbv;
    dev.gemm(g);
    Out o;
    o.c = testref::download_values(dev, c);
    if (cs.bgrad) o.db = testref::download_values(dev, dbv);
    // Reference magnitudes need the operands and pre; stash them on the CPU run.
    if (&dev == cpu_.get()) {
      av_ = testref::download_values(dev, a);
      bv_ = testref::download_values(dev, b);
      pv_ = testref::download_values(dev, pre);
    }
    return o;
  }

  void run_case(const Case& cs) {
    SCOPED_TRACE(cs.str());
    const Out ref = run_on(*cpu_, cs);
    const Out got = run_on(*gpu_, cs);
    const double gamma = 2.0 * (cs.k + 2) * 0x1p-23;
    std::vector<double> tol_c(static_cast<size_t>(cs.m * cs.n));
    for (int64_t i = 0; i < cs.m; ++i) {
      for (int64_t j = 0; j < cs.n; ++j) {
        double dot = 0, mag = 0;
        for (int64_t p = 0; p < cs.k; ++p) {
          const double x = av_[static_cast<size_t>(cs.ta ? p * cs.m + i : i * cs.k + p)];
          const double y = bv_[static_cast<size_t>(cs.tb ? j * cs.k + p : p * cs.n + j)];
          dot += x * y;
          mag += std::fabs(x * y);
        }
        const size_t ij = static_cast<size_t>(i * cs.n + j);
        const double s = std::fabs(cs.alpha) * mag;
        const double t = testref::kGeluLipschitz * (gamma * s + 2.0 * testref::half_ulp_of(cs.c_dtype, s)) +
                         0x1p-9 * (1.0 + std::fabs(pv_[ij])) * std::fabs(cs.alpha * dot) +
                         4.0 * testref::half_ulp_of(cs.c_dtype, ref.c[ij]);
        tol_c[ij] = t;
        ASSERT_NEAR(got.c[ij], ref.c[ij], t) << "C[" << i << "," << j << "]";
      }
    }
    if (!cs.bgrad) return;
    for (int64_t j = 0; j < cs.n; ++j) {
      double tsum = 0, mag = 0;
      for (int64_t i = 0; i < cs.m; ++i) {
        tsum += tol_c[static_cast<size_t>(i * cs.n + j)];
        mag += std::fabs(ref.c[static_cast<size_t>(i * cs.n + j)]);
      }
      const double dbj = ref.db[static_cast<size_t>(j)];
      const double t = tsum + cs.m * 0x1p-23 * mag + 2.0 * testref::half_ulp_of(cs.db_dtype, dbj);
      ASSERT_NEAR(got.db[static_cast<size_t>(j)], dbj, t) << "db[" << j << "]";
    }
  }

  std::unique_ptr<Device> cpu_, gpu_;
  std::vector<double> av_, bv_, pv_;
};

TEST_F(CudaBackwardEpilogues, FusedPathAllModes) {
  for (GemmCompute cm : {GemmCompute::F32, GemmCompute::TF32, GemmCompute::F16, GemmCompute::BF16}) {
    if (cm == GemmCompute::TF32) continue;  // operands rounded differently per backend; covered by CudaGemm
    const DType op = operand_dtype(cm);
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        run_case(Case{48, 64, 40, ta, tb, cm, op, op, op, false});
        run_case(Case{48, 64, 40, ta, tb, cm, op, op, op, true});
        run_case(Case{48, 64, 40, ta, tb, cm, op, op, DType::F32, true});  // db dtype != C: DGELU + bias_grad
      }
    }
    run_case(Case{33, 24, 72, false, true, cm, DType::F32, DType::F32, DType::F32, true, 0, 0.5f});
  }
}

TEST_F(CudaBackwardEpilogues, MisalignedBiasGradient) {
  run_case(Case{32, 64, 48, false, false, GemmCompute::F32, DType::F32, DType::F32, DType::F32, true, 1});
  run_case(Case{32, 64, 48, false, true, GemmCompute::BF16, DType::BF16, DType::BF16, DType::BF16, true, 3});
}

TEST_F(CudaBackwardEpilogues, FallbackPaths) {
  // n % 8 != 0: the aux ld rule fails.
  run_case(Case{37, 29, 53, false, false, GemmCompute::F32, DType::F32, DType::F32, DType::F32, true});
  run_case(Case{37, 29, 53, true, false, GemmCompute::BF16, DType::BF16, DType::BF16, DType::F32, true});
  // pre_act in another dtype than C.
  run_case(Case{32, 64, 48, false, true, GemmCompute::F16, DType::F16, DType::F32, DType::F16, true});
  run_case(Case{32, 64, 48, false, false, GemmCompute::BF16, DType::F32, DType::BF16, DType::F32, false});
}

}  // namespace
