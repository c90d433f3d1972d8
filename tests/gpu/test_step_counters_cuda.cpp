// Issue 10 on a GPU: a warmed-up training step makes no allocation, builds
// no cuBLASLt plan and waits for the device only where the trainer means to
// (the gradient statistics, the timer and the step's loss, read once after the
// timer whatever the number of micro-batches: batches are uploaded
// asynchronously through pinned staging); and cuBLASLt's forward
// epilogues at m == 1 and n == 1, where the heuristic may refuse them, give
// the CPU's result through the counted fallback, with "no algorithm" cached;
// and the asynchronous uploads behind the first part.
// The CPU half of the first part is tests/train/test_step_counters.cpp.
// Every test skips (with the reason) where no usable CUDA device exists.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "backends/cuda/cuda_device.h"
#include "config/schema.h"
#include "opcheck/host.h"
#include "tests/models/model_test_helpers.h"
#include "tests/train/train_test_helpers.h"
#include "train/cell_factory.h"
#include "train/trainer.h"

namespace mpb {
namespace {

using opcheck::fetch;
using opcheck::Gen;
using opcheck::Host;
using opcheck::put;

// 8 steps, 2 of them warm-up: BERT-tiny at sequence 32 on a 256-token corpus,
// batch 16, or an MLP 64-(128 x 2)-8, batch 64.
CellConfig sized_cell(bool bert) {
  if (!bert)
    return model_test::mlp_cell({/*hidden_layers=*/2, /*width=*/128, /*input_dim=*/64, /*classes=*/8,
                                 /*batch_size=*/64, /*steps=*/8, /*warmup_steps=*/2, /*eval_samples=*/100});
  CellConfig c;
  c.steps = 8;
  c.warmup_steps = 2;
  c.model.kind = ModelKind::Bert;
  c.model.size = "tiny";
  c.model.seq_len = 32;
  c.data.kind = DataKind::Markov;
  c.data.vocab = 256;
  c.data.eval_samples = 20;
  c.batch_size = 16;
  return c;
}

CellConfig cell(bool bert, const std::string& precision, bool fused, int accumulation) {
  CellConfig c = sized_cell(bert);
  train_test::take_every_step_path(c, precision, fused, accumulation);
  return c;
}

// The cell trained on a fresh CUDA device (its counters see this run alone).
RunRecord run_on_cuda(const CellConfig& c) {
  auto dev = make_cuda_device();
  return train_test::train_cell(*dev, c);
}

TEST(CudaStepCounters, WarmedUpStepsAllocateNothingBuildNoPlanAndSyncOnlyWhereMeant) {
  if (auto reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
  for (bool bert : {false, true})
    for (const char* precision : {"fp32", "amp_bf16", "amp_fp16"})
      for (bool fused : {false, true})
        for (int accumulation : {1, 2, 4}) {
          const CellConfig c = cell(bert, precision, fused, accumulation);
          SCOPED_TRACE(std::string(bert ? "bert " : "mlp ") + precision + (fused ? " fused" : " unfused") +
                       " accumulation " + std::to_string(accumulation));
          const RunRecord r = run_on_cuda(c);
          for (int s = 0; s < c.steps; ++s) {
            EXPECT_EQ(r.allocs[s], 0) << "step " << s + 1;
            EXPECT_EQ(r.plans_created[s], 0) << "step " << s + 1;
            if (!r.probed[s]) {
              EXPECT_EQ(r.host_syncs[s], 2) << "step " << s + 1;  // the timer, then loss + decision
            }
          }
        }
}

// LAMB: the norms for the trust ratios stay on the device (no sync, no
// allocation inside a step).
TEST(CudaStepCounters, LambStepsAllocateNothingAndAddNoSync) {
  if (auto reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
  for (const char* precision : {"fp32", "amp_bf16"})
    for (bool fused : {false, true}) {
      CellConfig c = cell(true, precision, fused, 2);
      c.optimizer.kind = OptimizerKind::Lamb;
      SCOPED_TRACE(std::string("bert lamb ") + precision + (fused ? " fused" : " unfused"));
      const RunRecord r = run_on_cuda(c);
      for (int s = 0; s < c.steps; ++s) {
        EXPECT_EQ(r.allocs[s], 0) << "step " << s + 1;
        if (!r.probed[s]) {
          EXPECT_EQ(r.host_syncs[s], 2) << "step " << s + 1;  // the timer, then loss + decision
        }
      }
    }
}

// Device::upload through pinned staging: it returns before the copy runs, the
// caller's buffer is free at once (each upload sees the values it had then),
// more uploads than staging slots are in flight, and none waits once the slots
// have grown; a set-up upload above the staging limit waits, counted.
TEST(CudaUploads, StagedUploadsNeitherWaitNorMixUpTheirData) {
  if (auto reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
  auto dev = make_cuda_device();
  constexpr int kUploads = 40;  // more than PinnedStaging::kSlots
  constexpr int64_t kN = 4096;
  DeviceBuffer d = dev->alloc(Shape{kUploads, kN}, DType::I32, MemCategory::Activations);
  std::vector<int32_t> host(kN);
  auto fill = [&](int u) {
    for (int64_t i = 0; i < kN; ++i) host[static_cast<size_t>(i)] = static_cast<int32_t>(u * 100000 + i);
  };
  fill(0);
  dev->upload(d.tensor().row_slice(0, 1), host.data());  // grows the slots
  const int64_t syncs = dev->counters().host_syncs, pinned = dev->counters().pinned_allocs;
  for (int u = 1; u < kUploads; ++u) {
    fill(u);  // overwritten right after the previous upload returned
    dev->upload(Tensor(static_cast<int32_t*>(d.tensor().data) + u * kN, DType::I32, Shape{1, kN}), host.data());
  }
  EXPECT_EQ(dev->counters().host_syncs, syncs) << "a staged upload waited for the device";
  EXPECT_EQ(dev->counters().pinned_allocs, pinned);
  std::vector<int32_t> back(static_cast<size_t>(kUploads * kN));
  dev->download(back.data(), d);
  for (int u = 0; u < kUploads; ++u)
    for (int64_t i = 0; i < kN; i += 511)
      ASSERT_EQ(back[static_cast<size_t>(u * kN + i)], u * 100000 + i) << "upload " << u << ", element " << i;

  // Above the staging limit (16 MiB): copied from the caller's memory, waited for.
  DeviceBuffer big = dev->alloc(Shape{int64_t{5} << 20}, DType::F32, MemCategory::Params);
  std::vector<float> ones(static_cast<size_t>(big.tensor().numel()), 1.0f);
  const int64_t before_big = dev->counters().host_syncs;
  dev->upload(big, ones.data());
  EXPECT_EQ(dev->counters().host_syncs, before_big + 1);
}

// C[m,n] = A[m,k] B[k,n] (+ bias, activation) at m == 1 and n == 1 with every
// forward epilogue, against the CPU backend; the second identical call builds
// no plan (the first cached the plan, or cuBLASLt's "no algorithm"), and
// takes the fallback exactly when the first did.
TEST(CudaGemmEpilogues, DegenerateShapesMatchTheCpuAndAreCached) {
  if (auto reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
  auto gpu = make_cuda_device();
  auto cpu = make_cpu_device();
  Gen gen(7u);
  struct Mode {
    GemmCompute compute;
    DType t;
    double tol;  // relative to the largest |C|: fp32 sums vs tensor-core sums, and the bf16 output's rounding
  };
  for (const Mode mode : {Mode{GemmCompute::F32, DType::F32, 1e-5}, Mode{GemmCompute::BF16, DType::BF16, 2e-2}})
    for (const auto& [m, n] : {std::pair<int64_t, int64_t>{1, 24}, {24, 1}, {1, 1}})
      for (Epilogue e : {Epilogue::None, Epilogue::Bias, Epilogue::BiasRelu, Epilogue::BiasGelu})
        for (bool with_pre : {false, true}) {
          if (e == Epilogue::None && with_pre) continue;
          SCOPED_TRACE(std::string(gemm_compute_name(mode.compute)) + " m=" + std::to_string(m) +
                       " n=" + std::to_string(n) + " " + opcheck::epilogue_name(e) + (with_pre ? " +pre_act" : ""));
          const int64_t k = 40;
          const Host a = gen.uniform(mode.t, Shape{m, k}), b = gen.uniform(mode.t, Shape{k, n});
          const Host bias = gen.uniform(DType::F32, Shape{n});
          Host out[2], pre[2];

          for (int backend = 0; backend < 2; ++backend) {
            Device& dev = backend == 0 ? *cpu : *gpu;
            DeviceBuffer da = put(dev, a), db = put(dev, b), dbias = put(dev, bias);
            DeviceBuffer dc = dev.alloc(Shape{m, n}, mode.t, MemCategory::Activations);
            DeviceBuffer dp = dev.alloc(Shape{m, n}, mode.t, MemCategory::Activations);
            GemmArgs g;
            g.m = m;
            g.n = n;
            g.k = k;
            g.a = da;
            g.b = db;
            g.c = dc;
            g.compute = mode.compute;
            g.epilogue = e;
            if (e != Epilogue::None) g.bias = dbias;
            if (with_pre) g.pre_act = dp;
            auto fallbacks = [&] {
              int64_t total = 0;
              for (const auto& [name, count] : dev.counters().gemm_fallbacks) total += count;
              return total;
            };
            const int64_t f0 = fallbacks();
            dev.gemm(g);
            if (backend == 1) {
              const int64_t plans = dev.counters().plans_created, f1 = fallbacks();
              dev.gemm(g);
              EXPECT_EQ(dev.counters().plans_created, plans) << "the second call built a plan";
              EXPECT_EQ(fallbacks() - f1, f1 - f0) << "the second call decided otherwise than the first";
              EXPECT_LE(f1 - f0, 1);
              if (e == Epilogue::None) {
                EXPECT_EQ(f1, f0) << "a plain GEMM has no fallback";
              }
            }
            out[backend] = fetch(dev, dc);
            if (with_pre) pre[backend] = fetch(dev, dp);
          }
          // The scale of the tolerance: the largest sum_k |a b| + |bias| of an
          // element, the magnitude a dot product's rounding errors are relative
          // to (the GPU sums in another order than the CPU, or on tensor cores:
          // the fp32 results differ by ulps, never bit-equal by contract). Not
          // max |C|: with ReLU every C may be 0 (m = n = 1, a negative
          // pre-activation), which made the pre_act check demand bit equality
          // of two fp32 dot products (the first H200 run: -5.2294549942 vs
          // -5.2294540405, 1 ulp). fp32, k = 40: each side is within (k + 2)
          // 2^-24 ~ 2.5e-6 of the exact value, so 1e-5 of this scale; bf16:
          // the output's half ulp (2^-9) plus tensor-core sums, 2e-2.
          double scale = 0.0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double s = e != Epilogue::None ? std::abs(bias.value(j)) : 0.0;
              for (int64_t kk = 0; kk < k; ++kk) s += std::abs(a.value(i * k + kk) * b.value(kk * n + j));
              scale = std::max(scale, s);
            }
          for (int64_t i = 0; i < m * n; ++i) {
            EXPECT_NEAR(out[1].value(i), out[0].value(i), mode.tol * scale) << "C[" << i << "]";
            if (with_pre) {
              EXPECT_NEAR(pre[1].value(i), pre[0].value(i), mode.tol * scale) << "pre_act[" << i << "]";
            }
          }
        }
}

}  // namespace
}  // namespace mpb
