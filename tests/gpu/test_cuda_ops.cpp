// The CUDA backend's own behaviour: availability (runs with or without a
// GPU), device info, memory tracking and copies, timers, and what only the
// GPU does: errors found in kernels reported at the next synchronising call,
// cuBLASLt's output-dtype rule, the fused attention's head-dimension limit.
// Every Device op against float64 and the CPU backend is in the op-check
// table (opcheck/, tests/ops: test_ops_cuda), the argument contracts both
// backends share in tests/opcheck/test_op_contracts.cpp. Each test here skips
// (with the reason) where no usable CUDA device exists, except the
// availability tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "backends/cuda/cuda_device.h"
#include "core/device.h"
#include "opcheck/host.h"

namespace mpb {
namespace {

using namespace opcheck;  // the host-side tensors and generators (opcheck/host.h)

// ---- availability (runs with or without a GPU) ------------------------------------

TEST(CudaAvailability, ReasonIsWellFormedAndStable) {
  const std::optional<std::string> reason = cuda_unavailable_reason();
  if (!reason) {
    SUCCEED() << "a usable CUDA device is present";
    return;
  }
  EXPECT_EQ(reason->rfind("no CUDA device: ", 0), 0u) << *reason;
  EXPECT_GT(reason->size(), std::string("no CUDA device: ").size()) << "the reason must say why";
  EXPECT_EQ(reason->find('\n'), std::string::npos) << "one line";
  EXPECT_EQ(cuda_unavailable_reason(), reason);
}

TEST(CudaAvailability, MakeDeviceThrowsTheSameReason) {
  const std::optional<std::string> reason = cuda_unavailable_reason();
  if (!reason) GTEST_SKIP() << "a usable CUDA device is present";
  try {
    auto dev = make_cuda_device();
    FAIL() << "make_cuda_device() succeeded although: " << *reason;
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()), *reason);
  }
}

TEST(CudaAvailability, BadOrdinalThrowsDeviceError) {
  for (int ordinal : {-1, 4096}) {
    try {
      auto dev = make_cuda_device(ordinal);
      FAIL() << "make_cuda_device(" << ordinal << ") succeeded";
    } catch (const DeviceError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("no CUDA device: ", 0), 0u) << e.what();
    }
  }
}

// ---- the fixture ------------------------------------------------------------------------

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
    gpu_ = make_cuda_device();
  }
  Host random(DType t, Shape s) { return gen_.uniform(t, s); }

  std::unique_ptr<Device> gpu_;
  Gen gen_{20240611u};
};

// ---- device basics ----------------------------------------------------------------------

// The memory triple's "process" figure on a GPU (runner/measure/memory_triple.h):
// every cudaMalloc'd byte counts, at its peak, and a freed buffer leaves it.
TEST_F(CudaOps, ReservedPeakCountsEveryCudaMallocAtOnce) {
  const size_t before = gpu_->reserved_peak_bytes().value_or(0);
  {
    DeviceBuffer a = gpu_->alloc(Shape{1 << 18}, DType::F32, MemCategory::Activations);  // 1 MiB
    DeviceBuffer b = gpu_->alloc(Shape{3 << 18}, DType::F32, MemCategory::Workspace);    // 3 MiB
    ASSERT_TRUE(gpu_->reserved_peak_bytes().has_value());
    EXPECT_GE(*gpu_->reserved_peak_bytes(), before + (size_t{4} << 20));
  }
  const size_t peak = *gpu_->reserved_peak_bytes();
  DeviceBuffer c = gpu_->alloc(Shape{1 << 18}, DType::F32, MemCategory::Activations);
  EXPECT_EQ(*gpu_->reserved_peak_bytes(), peak) << "the freed 4 MiB made room: no new peak";
}

TEST_F(CudaOps, Info) {
  const DeviceInfo& info = gpu_->info();
  EXPECT_EQ(info.kind, DeviceKind::Cuda);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.cores, 0);
  ASSERT_TRUE(info.compute_capability.has_value());
  const std::string& cc = *info.compute_capability;
  ASSERT_GE(cc.size(), 3u);
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(cc[0])) && cc.find('.') != std::string::npos) << cc;
  EXPECT_GE(std::stoi(cc), 8) << cc;
  EXPECT_GT(info.memory_bytes, size_t{1} << 30);
  std::vector<std::string> keys;
  for (const auto& kv : info.versions) {
    keys.push_back(kv.first);
    EXPECT_FALSE(kv.second.empty()) << kv.first;
  }
  std::vector<std::string> want = {"cuda_runtime", "cuda_driver", "cublas", "cublasLt"};
#ifdef MPB_HAVE_CUDNN
  want.push_back("cudnn");
#endif
  for (const auto& k : want) EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  for (GemmCompute c : {GemmCompute::F32, GemmCompute::TF32, GemmCompute::F16, GemmCompute::BF16})
    EXPECT_EQ(gpu_->supports(gemm_feature(c)).level, SupportLevel::Native) << gemm_compute_name(c);
}

TEST_F(CudaOps, MemoryTrackingAndCopies) {
  const size_t before = gpu_->memory().snapshot().current[static_cast<size_t>(MemCategory::Params)];
  Host h = random(DType::BF16, Shape{7, 9});
  {
    DeviceBuffer a = put(*gpu_, h, MemCategory::Params);
    EXPECT_EQ(gpu_->memory().snapshot().current[static_cast<size_t>(MemCategory::Params)], before + 7 * 9 * 2);
    EXPECT_TRUE(identical(fetch(*gpu_, a), h));
    DeviceBuffer b = gpu_->alloc(Shape{63}, DType::BF16, MemCategory::Params);
    gpu_->copy(b, a.tensor().reshaped(Shape{63}));
    EXPECT_TRUE(identical(fetch(*gpu_, b.tensor().reshaped(Shape{7, 9})), h));
    EXPECT_THROW(gpu_->copy(b, put(*gpu_, random(DType::F16, Shape{63}))), std::invalid_argument);
  }
  EXPECT_EQ(gpu_->memory().snapshot().current[static_cast<size_t>(MemCategory::Params)], before);
  gpu_->synchronize();
}

TEST_F(CudaOps, Timer) {
  auto timer = gpu_->make_timer();
  EXPECT_THROW(timer->elapsed_ms(), DeviceError);
  DeviceBuffer t = gpu_->alloc(Shape{1 << 20}, DType::F32, MemCategory::Workspace);
  timer->start();
  for (int i = 0; i < 10; ++i) gpu_->fill(t, static_cast<float>(i));
  timer->stop();
  const double ms = timer->elapsed_ms();
  EXPECT_GE(ms, 0.0);
  EXPECT_LT(ms, 10000.0);
}

// ---- what only the GPU does --------------------------------------------------------------

// A label outside [0, C) is found in the kernels: the synchronous forward
// and count_correct throw DeviceError, the asynchronous backward reports it
// at the next synchronising call; the flag is consumed and the device stays
// usable. (Negative labels are ignored rows, not errors: tests/ops.)
TEST_F(CudaOps, SoftmaxXentBadLabelIsReported) {
  DeviceBuffer logits = put(*gpu_, random(DType::F32, Shape{4, 10}));
  DeviceBuffer big = put(*gpu_, ints({1, 10, 0, 2}, Shape{4}));
  DeviceBuffer probs = gpu_->alloc(Shape{4, 10}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(gpu_->softmax_xent_forward(probs, logits, big), DeviceError);
  gpu_->synchronize();  // the flag was consumed; the device stays usable
  gpu_->softmax_xent_backward(probs, probs, big, 1.0f);
  EXPECT_THROW(gpu_->synchronize(), DeviceError);
  DeviceBuffer bigger = put(*gpu_, ints({1, 11, 0, 2}, Shape{4}));
  EXPECT_THROW(gpu_->count_correct(logits, bigger), DeviceError);
  gpu_->synchronize();
  // Deferred: reported at the next synchronising call, which also drops the
  // NaN the bad row put into the loss sum; later losses read alone.
  gpu_->softmax_xent_forward_deferred(probs, logits, big);
  EXPECT_THROW(gpu_->synchronize(), DeviceError);
  DeviceBuffer good = put(*gpu_, ints({1, 2, 0, 2}, Shape{4}));
  const double one = gpu_->softmax_xent_forward(probs, logits, good);
  EXPECT_TRUE(std::isfinite(one));
  gpu_->softmax_xent_forward_deferred(probs, logits, good);
  EXPECT_EQ(gpu_->read_loss_sum(), one);
  // A bad row found by the read itself: raised there, and the sum is zero after.
  gpu_->softmax_xent_fused_deferred(probs, logits, big, 1.0f);
  EXPECT_THROW(gpu_->read_loss_sum(), DeviceError);
  EXPECT_EQ(gpu_->read_loss_sum(), 0.0);
}

// cuBLASLt computes a 16-bit C only from 16-bit compute: an fp16 C with fp32
// compute is rejected (the CPU backend computes it; noted for the Device
// contract).
TEST_F(CudaOps, GemmRejectsHalfOutputWithFp32Compute) {
  DeviceBuffer a = put(*gpu_, random(DType::F32, Shape{4, 8})), b = put(*gpu_, random(DType::F32, Shape{8, 16}));
  DeviceBuffer h = gpu_->alloc(Shape{4, 16}, DType::F16, MemCategory::Activations);
  GemmArgs g;
  g.m = 4, g.n = 16, g.k = 8, g.a = a, g.b = b, g.c = h, g.compute = GemmCompute::F32;
  EXPECT_THROW(gpu_->gemm(g), std::invalid_argument);
  gpu_->synchronize();
}

// The fused attention kernels keep a query row in registers: head dimensions
// above 128 are rejected.
TEST_F(CudaOps, AttentionRejectsLargeHeadDim) {
  auto alloc = [&](Shape s) { return gpu_->alloc(s, DType::F32, MemCategory::Activations); };
  DeviceBuffer big = alloc(Shape{1, 1, 5, 129}), big_lse = alloc(Shape{1, 1, 5});
  DeviceBuffer kv = put(*gpu_, ints({1, 1, 1, 1, 1}, Shape{1, 5}));
  gpu_->fill(big, 0.5f);
  EXPECT_THROW(gpu_->attention_forward(big, big_lse, big, big, big, kv, 0.1f, -1e9f), std::invalid_argument);
  EXPECT_THROW(gpu_->attention_backward(big, big, big, big, big, big_lse, big, big, big, kv, 0.1f, -1e9f),
               std::invalid_argument);
  gpu_->synchronize();
}

// The element-wise map kernels (and add, dropout) move 8 elements per 16-byte access where every
// pointer is aligned and one at a time otherwise (backends/cuda/vec_io.cuh),
// with the same conversions: an aligned call, a call on views one element
// off alignment (the scalar path) and the CPU give the same bits, for every
// pair of dtypes, with a tail (n % 8 != 0) and a NaN and infinities among
// the inputs (rounding rules; a NaN's sign and payload may differ between
// the CPU and the GPU, opcheck/host.h identical()).
TEST_F(CudaOps, VectorisedMapKernelsGiveTheScalarPathsBits) {
  auto cpu = make_cpu_device();
  const int64_t n = 8 * 1000 + 5;
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  for (DType st : types)
    for (DType dt : types) {
      SCOPED_TRACE(std::string(dtype_name(st)) + " -> " + dtype_name(dt));
      Host src = random(st, Shape{n + 1});
      src.set(3, NAN), src.set(17, INFINITY), src.set(40, -INFINITY), src.set(n - 2, 65504.0f * 2);
      // out = op(in) on dev, over the first n elements (aligned) or elements 1..n (one off).
      auto run = [&](Device& dev, bool offset) {
        DeviceBuffer in = put(dev, src), out = put(dev, opcheck::filled(dt, Shape{n + 1}, 0.0f));
        const Tensor i = in.tensor().flat_slice(offset ? 1 : 0, n), o = out.tensor().flat_slice(offset ? 1 : 0, n);
        std::vector<Host> r;
        if (st != dt) dev.cast(o, i), r.push_back(fetch(dev, o));
        dev.activation_forward(Activation::Gelu, o, i), r.push_back(fetch(dev, o));
        dev.activation_backward(Activation::Gelu, o, i, i), r.push_back(fetch(dev, o));
        dev.scale(o, 0.375f), r.push_back(fetch(dev, o));
        dev.add(o, i, o), r.push_back(fetch(dev, o));
        dev.dropout(o, i, 0.25f, 7), r.push_back(fetch(dev, o));
        dev.fill(o, 1.0f / 3.0f), r.push_back(fetch(dev, o));
        return r;
      };
      const std::vector<Host> aligned = run(*gpu_, false), off = run(*gpu_, true);
      // The CPU on the same inputs (its bits are the reference for both paths).
      const std::vector<Host> c_aligned = run(*cpu, false), c_off = run(*cpu, true);
      ASSERT_EQ(aligned.size(), c_aligned.size());
      std::string where;
      for (size_t k = 0; k < aligned.size(); ++k) {
        EXPECT_TRUE(identical(aligned[k], c_aligned[k], &where)) << "op " << k << " aligned vs the CPU: " << where;
        EXPECT_TRUE(identical(off[k], c_off[k], &where)) << "op " << k << " one element off vs the CPU: " << where;
      }
    }
}

}  // namespace
}  // namespace mpb
