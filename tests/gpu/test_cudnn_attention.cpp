// Fused attention on the CUDA backend through cuDNN SDPA (backends/cuda/
// attention_cudnn.cpp) against the CPU backend, fp16 and bf16, at BERT-tiny
// and BERT-base shapes with non-prefix padding: forward (out, lse), backward
// (dq, dk, dv from the same out/lse/dout on both devices), padded keys'
// exact zeros, the fp16 mask hazard (NaN everywhere, as the CPU), graph
// caching (no plan creation on a repeated shape), deterministic backward,
// the packed layout BERT's fused path runs, dropout (cuDNN's own mask, checked
// by statistics), and which implementation ran (DeviceCounters::attention_impls). Each test
// skips where no usable CUDA device exists; the build-level tests run
// everywhere. Without cudnn_frontend (MPB_HAVE_CUDNN_FRONTEND unset) the
// same comparisons run the hand-written kernel, and the implementation
// tests expect "cuda_kernel".
//
// Run on a GPU: ctest --test-dir build -R 'CudnnAttention' --output-on-failure
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/cuda_device.h"
#include "core/device.h"
#include "core/numerics.h"
#include "core/precision.h"
#include "opcheck/host.h"

namespace mpb {
namespace {

using namespace opcheck;  // the host-side tensors and generators (opcheck/host.h)

#ifdef MPB_HAVE_CUDNN_FRONTEND
constexpr const char* kHalfImpl = "cudnn_sdpa";
#else
constexpr const char* kHalfImpl = "cuda_kernel";
#endif

// ---- build level (runs with or without a GPU) -----------------------------------------

TEST(CudnnAttentionBuild, LibraryVersionsSayWhetherCudnnFrontendIsIn) {
  std::string fe;
  for (const auto& [k, v] : cuda_library_versions())
    if (k == "cudnn_frontend") fe = v;
#ifdef MPB_HAVE_CUDNN_FRONTEND
  EXPECT_EQ(fe, "1.32.0");
#else
  EXPECT_EQ(fe.rfind("absent", 0), 0u) << fe;
#endif
}

// ---- the fixture ------------------------------------------------------------------------

struct Dims {
  const char* name;
  int64_t B, H, Tq, Tk, D;
};

// BERT-tiny (2 heads of 64), BERT-base (12 heads of 64) at sequence 128, and
// a ragged shape (Tq != Tk, neither a multiple of a tile, D = 32).
const Dims kDims[] = {{"bert_tiny", 8, 2, 128, 128, 64}, {"bert_base", 4, 12, 128, 128, 64}, {"ragged", 2, 3, 40, 67, 32}};

// Non-prefix padding: key j of batch b is padding when (j * 7 + b * 3) % 5
// == 0 (holes spread through the sequence, never a suffix), batch 0 has
// every key, and the last batch element also loses its last third.
std::vector<int32_t> key_valid(int64_t B, int64_t Tk) {
  std::vector<int32_t> kv(static_cast<size_t>(B * Tk), 1);
  for (int64_t b = 1; b < B; ++b)
    for (int64_t j = 0; j < Tk; ++j) {
      const bool hole = (j * 7 + b * 3) % 5 == 0 || (b == B - 1 && j >= 2 * Tk / 3);
      if (hole) kv[static_cast<size_t>(b * Tk + j)] = 0;
    }
  return kv;
}

// The exact (float64) attention of the stored inputs, and the magnitudes the
// tolerances need.
struct Exact {
  std::vector<double> P;                 // [B,H,Tq,Tk] probabilities
  std::vector<double> mag_o;             // sum_j P_ij |v_jd|            [B,H,Tq,D]
  std::vector<double> mag_dv;            // sum_i P_ij |dO_id|           [B,H,Tk,D]
  std::vector<double> mag_dq, mag_dk;    // scale sum |dS| |k|, |q|
  std::vector<double> fp32_dq, fp32_dk;  // scale sum P (|dP| + |D_i|) |k|, |q|
};

class CudnnAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto reason = cuda_unavailable_reason()) GTEST_SKIP() << *reason;
    gpu_ = make_cuda_device();
    cpu_ = make_cpu_device();
  }

  int64_t impl_calls(const char* impl) const {
    const auto& m = gpu_->counters().attention_impls;
    const auto it = m.find(impl);
    return it == m.end() ? 0 : it->second;
  }
  // Calls of every label that begins with `prefix`: kHalfImpl's calls in
  // either bias form ("cudnn_sdpa", "cudnn_sdpa_bias_per_query": which one
  // cuDNN takes only the GPU's cuDNN can tell, backends/cuda/sdpa_policy.h).
  static int64_t calls_starting(const Device& dev, const std::string& prefix) {
    int64_t n = 0;
    for (const auto& [impl, calls] : dev.counters().attention_impls)
      if (impl.rfind(prefix, 0) == 0) n += calls;
    return n;
  }
  int64_t half_calls() const { return calls_starting(*gpu_, kHalfImpl); }

  // The inputs of one case, in dtype t.
  struct Case {
    Dims d;
    DType t;
    float scale, mask;
    Host q, k, v, dout;
    std::vector<int32_t> kv;
  };
  Case make_case(const Dims& d, DType t) {
    Case c{d, t, static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.D))), attention_mask_value(t), {}, {}, {}, {}, {}};
    const Shape qs{d.B, d.H, d.Tq, d.D}, ks{d.B, d.H, d.Tk, d.D};
    // |q|, |k| up to 2: logits up to ~4 sqrt(D), a softmax far from uniform.
    c.q = gen_.uniform(t, qs, -2.0f, 2.0f), c.k = gen_.uniform(t, ks, -2.0f, 2.0f);
    c.v = gen_.uniform(t, ks, -1.0f, 1.0f), c.dout = gen_.uniform(t, qs, -1.0f, 1.0f);
    c.kv = key_valid(d.B, d.Tk);
    return c;
  }

  // One attention_forward of case c on dev, output in out_dtype; returns the output.
  static Host forward_once(Device& dev, const Case& c, DType out_dtype) {
    const Dims& d = c.d;
    DeviceBuffer q = put(dev, c.q), k = put(dev, c.k), v = put(dev, c.v);
    DeviceBuffer kv = put(dev, ints(c.kv, Shape{d.B, d.Tk}));
    DeviceBuffer o = dev.alloc(Shape{d.B, d.H, d.Tq, d.D}, out_dtype, MemCategory::Activations);
    DeviceBuffer l = dev.alloc(Shape{d.B, d.H, d.Tq}, DType::F32, MemCategory::Activations);
    dev.attention_forward(o, l, q, k, v, kv, c.scale, c.mask);
    return fetch(dev, o);
  }

  static Exact exact(const Case& c, const Host& out) {
    const Dims& d = c.d;
    const auto q = c.q.values(), k = c.k.values(), v = c.v.values(), dout = c.dout.values(), o = out.values();
    const double mask = opcheck::stored(c.t, c.mask);
    Exact e;
    const size_t nq = static_cast<size_t>(d.B * d.H * d.Tq * d.D), nk = static_cast<size_t>(d.B * d.H * d.Tk * d.D);
    e.P.assign(static_cast<size_t>(d.B * d.H * d.Tq * d.Tk), 0.0);
    e.mag_o.assign(nq, 0.0), e.mag_dq.assign(nq, 0.0), e.fp32_dq.assign(nq, 0.0);
    e.mag_dv.assign(nk, 0.0), e.mag_dk.assign(nk, 0.0), e.fp32_dk.assign(nk, 0.0);
    std::vector<double> l(static_cast<size_t>(d.Tk)), dP(static_cast<size_t>(d.Tk));
    for (int64_t bh = 0; bh < d.B * d.H; ++bh) {
      const int64_t b = bh / d.H;
      const auto qi = [&](int64_t i, int64_t x) { return static_cast<size_t>((bh * d.Tq + i) * d.D + x); };
      const auto kj = [&](int64_t j, int64_t x) { return static_cast<size_t>((bh * d.Tk + j) * d.D + x); };
      for (int64_t i = 0; i < d.Tq; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < d.Tk; ++j) {
          double s = 0.0;
          for (int64_t x = 0; x < d.D; ++x) s += q[qi(i, x)] * k[kj(j, x)];
          l[static_cast<size_t>(j)] = c.scale * s + (c.kv[static_cast<size_t>(b * d.Tk + j)] ? 0.0 : mask);
          mx = std::max(mx, l[static_cast<size_t>(j)]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < d.Tk; ++j) sum += std::exp(l[static_cast<size_t>(j)] - mx);
        double Di = 0.0;  // from the stored O both devices' backward read
        for (int64_t x = 0; x < d.D; ++x) Di += dout[qi(i, x)] * o[qi(i, x)];
        for (int64_t j = 0; j < d.Tk; ++j) {
          const double p = std::exp(l[static_cast<size_t>(j)] - mx) / sum;
          e.P[static_cast<size_t>((bh * d.Tq + i) * d.Tk + j)] = p;
          double dp = 0.0;
          for (int64_t x = 0; x < d.D; ++x) dp += dout[qi(i, x)] * v[kj(j, x)];
          const double ds = p * (dp - Di), ds32 = p * (std::fabs(dp) + std::fabs(Di));
          for (int64_t x = 0; x < d.D; ++x) {
            e.mag_o[qi(i, x)] += p * std::fabs(v[kj(j, x)]);
            e.mag_dv[kj(j, x)] += p * std::fabs(dout[qi(i, x)]);
            e.mag_dq[qi(i, x)] += c.scale * std::fabs(ds) * std::fabs(k[kj(j, x)]);
            e.mag_dk[kj(j, x)] += c.scale * std::fabs(ds) * std::fabs(q[qi(i, x)]);
            e.fp32_dq[qi(i, x)] += c.scale * ds32 * std::fabs(k[kj(j, x)]);
            e.fp32_dk[kj(j, x)] += c.scale * ds32 * std::fabs(q[qi(i, x)]);
          }
        }
      }
    }
    return e;
  }

  // |got - want| <= tol(i) for every element; the first few failures printed.
  static void expect_near(const char* what, const Host& got, const Host& want, const std::function<double(size_t)>& tol) {
    ASSERT_EQ(got.numel(), want.numel());
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double g = got.value(i), w = want.value(i), t = tol(static_cast<size_t>(i));
      const double err = std::fabs(g - w);
      if (!(err <= t)) {
        if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "]: gpu " << g << ", cpu " << w << ", tolerance " << t;
      } else if (t > 0) {
        worst = std::max(worst, err / t);
      }
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.numel() << " elements outside the tolerance";
    RecordProperty(std::string(what) + "_worst_error_over_tolerance", std::to_string(worst));
  }

  void run_case(const Dims& d, DType t, bool require_half_impl = true);

  // The packed ops' operands for shape d (Tq = Tk) in dtype t: qkv uniform in
  // [-qkv_max, qkv_max], dout in [-1, 1], the key padding of key_valid.
  struct Packed {
    DeviceBuffer qkv, dout, kv, out, lse, dqkv;
    float scale = 1.0f, mask = 0.0f;
    void run(Device& dev, AttnDropout drop = {}) const {
      dev.attention_forward_packed(out, lse, qkv, kv, scale, mask, drop);
      dev.attention_backward_packed(dqkv, dout, out, lse, qkv, kv, scale, mask, drop);
    }
  };
  Packed packed(const Dims& d, DType t, float qkv_max) {
    const int64_t N = d.B * d.Tq, C = d.H * d.D;
    Packed p;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.D)));
    p.mask = attention_mask_value(t);
    p.qkv = put(*gpu_, gen_.uniform(t, Shape{N, 3 * C}, -qkv_max, qkv_max));
    p.dout = put(*gpu_, gen_.uniform(t, Shape{N, C}, -1.0f, 1.0f));
    p.kv = put(*gpu_, ints(key_valid(d.B, d.Tk), Shape{d.B, d.Tk}));
    p.out = gpu_->alloc(Shape{N, C}, t, MemCategory::Activations);
    p.lse = gpu_->alloc(Shape{d.B, d.H, d.Tq}, DType::F32, MemCategory::Activations);
    p.dqkv = gpu_->alloc(Shape{N, 3 * C}, t, MemCategory::Activations);
    return p;
  }

  std::unique_ptr<Device> gpu_, cpu_;
  Gen gen_{20250301u};
};

// Tolerances, GPU (cuDNN) vs CPU, both from the same stored inputs. u is the
// I/O dtype's unit roundoff, the largest relative error of one
// round-to-nearest (bf16 2^-8, fp16 2^-11). Both backends compute the logits,
// the softmax and every sum in fp32, so the dtype-level differences are what
// cuDNN rounds to the I/O dtype on the way (flash attention feeds its tensor
// cores in that dtype), plus each side's one rounding of its outputs:
//  - O = P V with P rounded: each P_ij off by <= u relative, so O by <= u
//    sum_j P_ij |v_jd|; each side rounds O once (<= u |O| each, and |O| <=
//    sum P|v|): u sum P|v| + 2u |O| in all. The fp32 sums and exponentials
//    (reduction lengths D, Tk <= 128: (D + Tk) 2^-24 ~ 2^-16, far below
//    u = 2^-8 or 2^-11) get the headroom of one more u sum P|v| + ... :
//    tol_o = 3u sum_j P_ij |v_jd| + 2u |O| + 2^-24.
//  - lse: fp32 on both sides (cuDNN's Stats = max + log(sum exp), natural
//    log, what the CPU stores): the logits' fp32 dot (D terms) and the sum
//    (Tk terms), a few (D + Tk) 2^-24 relative: tol 2^-14 (|lse| + 1).
//  - dV = P^T dO with P rounded: 3u sum_i P_ij |dO_id| + 2u |dV|.
//  - dQ = scale dS K, dK = scale dS^T Q, with dS = P (dP - D_i) rounded to
//    the I/O dtype: 3u scale sum |dS||k| (|q|) + 2u |dQ| (|dK|), plus the
//    fp32 cancellation in dP - D_i: (D + Tk) 2^-24 scale sum P (|dP| +
//    |D_i|) |k|, taken 16 times.
// Every bound is a unit roundoff times a magnitude summed over the reduction
// (the keys for O and dQ, the queries for dK and dV), computed in float64.
void CudnnAttention::run_case(const Dims& d, DType t, bool require_half_impl) {
  SCOPED_TRACE(std::string(d.name) + " " + dtype_name(t));
  const Case c = make_case(d, t);
  const double u = t == DType::BF16 ? 0x1p-8 : 0x1p-11;
  const Shape qs{d.B, d.H, d.Tq, d.D}, ks{d.B, d.H, d.Tk, d.D}, ls{d.B, d.H, d.Tq};
  const Host kvh = ints(c.kv, Shape{d.B, d.Tk});

  // Forward on both.
  auto forward = [&](Device& dev, Host* out, Host* lse) {
    DeviceBuffer q = put(dev, c.q), k = put(dev, c.k), v = put(dev, c.v), kv = put(dev, kvh);
    DeviceBuffer o = dev.alloc(qs, t, MemCategory::Activations), l = dev.alloc(ls, DType::F32, MemCategory::Activations);
    dev.attention_forward(o, l, q, k, v, kv, c.scale, c.mask);
    *out = fetch(dev, o), *lse = fetch(dev, l);
  };
  Host out_g, lse_g, out_c, lse_c;
  const int64_t half_before = half_calls();
  forward(*gpu_, &out_g, &lse_g);
  if (require_half_impl) {
    EXPECT_EQ(half_calls(), half_before + 1) << "the forward did not run on " << kHalfImpl;
  }
  forward(*cpu_, &out_c, &lse_c);

  const Exact e = exact(c, out_c);
  expect_near("out", out_g, out_c, [&](size_t i) { return 3 * u * e.mag_o[i] + 2 * u * std::fabs(out_c.value(static_cast<int64_t>(i))) + 0x1p-24; });
  expect_near("lse", lse_g, lse_c, [&](size_t i) { return 0x1p-14 * (std::fabs(lse_c.value(static_cast<int64_t>(i))) + 1.0); });

  // Backward on both, from the CPU's out and lse (the same stored inputs).
  auto backward = [&](Device& dev, Host* dq, Host* dk, Host* dv) {
    DeviceBuffer q = put(dev, c.q), k = put(dev, c.k), v = put(dev, c.v), kv = put(dev, kvh);
    DeviceBuffer o = put(dev, out_c), l = put(dev, lse_c), g = put(dev, c.dout);
    DeviceBuffer gq = dev.alloc(qs, t, MemCategory::Activations), gk = dev.alloc(ks, t, MemCategory::Activations);
    DeviceBuffer gv = dev.alloc(ks, t, MemCategory::Activations);
    dev.attention_backward(gq, gk, gv, g, o, l, q, k, v, kv, c.scale, c.mask);
    *dq = fetch(dev, gq), *dk = fetch(dev, gk), *dv = fetch(dev, gv);
  };
  Host dq_g, dk_g, dv_g, dq_c, dk_c, dv_c;
  const int64_t half_mid = half_calls();
  backward(*gpu_, &dq_g, &dk_g, &dv_g);
  if (require_half_impl) {
    EXPECT_EQ(half_calls(), half_mid + 1) << "the backward did not run on " << kHalfImpl;
  }
  backward(*cpu_, &dq_c, &dk_c, &dv_c);
  const double fp32 = 16 * static_cast<double>(d.D + d.Tk) * 0x1p-24;
  expect_near("dq", dq_g, dq_c, [&](size_t i) {
    return 3 * u * e.mag_dq[i] + fp32 * e.fp32_dq[i] + 2 * u * std::fabs(dq_c.value(static_cast<int64_t>(i))) + 0x1p-24;
  });
  expect_near("dk", dk_g, dk_c, [&](size_t i) {
    return 3 * u * e.mag_dk[i] + fp32 * e.fp32_dk[i] + 2 * u * std::fabs(dk_c.value(static_cast<int64_t>(i))) + 0x1p-24;
  });
  expect_near("dv", dv_g, dv_c, [&](size_t i) { return 3 * u * e.mag_dv[i] + 2 * u * std::fabs(dv_c.value(static_cast<int64_t>(i))) + 0x1p-24; });

  // Padded keys: probability exactly 0, so exactly zero dk and dv.
  int64_t nonzero = 0;
  for (int64_t bh = 0; bh < d.B * d.H; ++bh)
    for (int64_t j = 0; j < d.Tk; ++j)
      if (!c.kv[static_cast<size_t>((bh / d.H) * d.Tk + j)])
        for (int64_t x = 0; x < d.D; ++x) {
          const int64_t at = (bh * d.Tk + j) * d.D + x;
          nonzero += dk_g.value(at) != 0.0 || dv_g.value(at) != 0.0;
        }
  EXPECT_EQ(nonzero, 0) << "padded keys must get exactly zero dk and dv";
}

TEST_F(CudnnAttention, BertTinyBf16MatchesCpu) { run_case(kDims[0], DType::BF16); }
TEST_F(CudnnAttention, BertTinyF16MatchesCpu) { run_case(kDims[0], DType::F16); }
TEST_F(CudnnAttention, BertBaseBf16MatchesCpu) { run_case(kDims[1], DType::BF16); }
TEST_F(CudnnAttention, BertBaseF16MatchesCpu) { run_case(kDims[1], DType::F16); }
#ifdef MPB_HAVE_CUDNN_FRONTEND
// The forward's fallback bias form, [B,1,1,Tk] (sdpa_policy.h): on a GPU
// whose cuDNN takes the per-query form it would never run, so this test makes
// it the first forward form for a shape no other test builds, then holds the
// forward and the backward (always per-query) to the CPU like the rest and
// each to its label. On the first lease the backward in this form gave wrong
// dQ/dK/dV without an error, which is why no backward is built with it.
TEST_F(CudnnAttention, BroadcastBiasFormForwardMatchesCpu) {
  struct Restore {
    ~Restore() { cuda::CudnnSdpa::set_first_bias_form(cuda::SdpaBiasForm::kPerQuery); }
  } restore;
  cuda::CudnnSdpa::set_first_bias_form(cuda::SdpaBiasForm::kBroadcast);
  const Dims d{"broadcast_bias_forward", 3, 4, 96, 96, 64};
  const int64_t broadcast = impl_calls("cudnn_sdpa"), per_query = impl_calls("cudnn_sdpa_bias_per_query");
  run_case(d, DType::BF16);
  EXPECT_EQ(impl_calls("cudnn_sdpa"), broadcast + 1) << "cuDNN did not run the forward in the broadcast form";
  EXPECT_EQ(impl_calls("cudnn_sdpa_bias_per_query"), per_query + 1) << "the backward did not run the per-query form";
}
#endif

// cuDNN may accept or refuse this one (its own check_support decides); either
// way the numbers must agree and every call is counted under some
// implementation.
TEST_F(CudnnAttention, RaggedBf16MatchesCpu) { run_case(kDims[2], DType::BF16, false); }
TEST_F(CudnnAttention, RaggedF16MatchesCpu) { run_case(kDims[2], DType::F16, false); }

// A shape's graphs are built once: the second forward/backward creates no
// plan, and the deterministic backward gives the same bits twice.
TEST_F(CudnnAttention, GraphsAreCachedAndBackwardIsDeterministic) {
  const Dims d = kDims[1];
  const DType t = DType::BF16;
  const Case c = make_case(d, t);
  const Shape qs{d.B, d.H, d.Tq, d.D}, ls{d.B, d.H, d.Tq};
  DeviceBuffer q = put(*gpu_, c.q), k = put(*gpu_, c.k), v = put(*gpu_, c.v), g = put(*gpu_, c.dout);
  DeviceBuffer kv = put(*gpu_, ints(c.kv, Shape{d.B, d.Tk}));
  DeviceBuffer o = gpu_->alloc(qs, t, MemCategory::Activations), l = gpu_->alloc(ls, DType::F32, MemCategory::Activations);
  DeviceBuffer dq = gpu_->alloc(qs, t, MemCategory::Activations), dk = gpu_->alloc(qs, t, MemCategory::Activations);
  DeviceBuffer dv = gpu_->alloc(qs, t, MemCategory::Activations);
  gpu_->attention_forward(o, l, q, k, v, kv, c.scale, c.mask);
  gpu_->attention_backward(dq, dk, dv, g, o, l, q, k, v, kv, c.scale, c.mask);
  const Host dq1 = fetch(*gpu_, dq), dk1 = fetch(*gpu_, dk), dv1 = fetch(*gpu_, dv), o1 = fetch(*gpu_, o);
  const int64_t plans = gpu_->counters().plans_created;
  const auto allocs = gpu_->memory().snapshot().allocations;
  gpu_->attention_forward(o, l, q, k, v, kv, c.scale, c.mask);
  gpu_->attention_backward(dq, dk, dv, g, o, l, q, k, v, kv, c.scale, c.mask);
  gpu_->synchronize();
  EXPECT_EQ(gpu_->counters().plans_created, plans) << "a repeated shape built a graph";
  EXPECT_EQ(gpu_->memory().snapshot().allocations, allocs) << "a repeated shape allocated (bias or workspace)";
  std::string where;
  EXPECT_TRUE(identical(fetch(*gpu_, o), o1, &where)) << "forward not reproducible: " << where;
  EXPECT_TRUE(identical(fetch(*gpu_, dq), dq1, &where)) << "dq not reproducible: " << where;
  EXPECT_TRUE(identical(fetch(*gpu_, dk), dk1, &where)) << "dk not reproducible: " << where;
  EXPECT_TRUE(identical(fetch(*gpu_, dv), dv1, &where)) << "dv not reproducible: " << where;
}

// Graphs outlive the device (issue 30 item 6): the runner makes a device per
// repeat, and the next device of the same GPU must find the shape's graphs
// in the process-wide cache, build none, and give the same bits; its calls
// carry the same label (the bias form cuDNN took, printed here).
TEST_F(CudnnAttention, ANewDeviceReusesTheGraphsOfTheLastOne) {
  const Dims d = kDims[0];
  const DType t = DType::BF16;
  const Case c = make_case(d, t);
  const Shape qs{d.B, d.H, d.Tq, d.D}, ls{d.B, d.H, d.Tq};
  struct Result {
    Host o, dq;
    int64_t plans = 0;
    std::map<std::string, int64_t> impls;
  };
  auto run = [&](Device& dev) {
    DeviceBuffer q = put(dev, c.q), k = put(dev, c.k), v = put(dev, c.v), g = put(dev, c.dout);
    DeviceBuffer kv = put(dev, ints(c.kv, Shape{d.B, d.Tk}));
    DeviceBuffer o = dev.alloc(qs, t, MemCategory::Activations), l = dev.alloc(ls, DType::F32, MemCategory::Activations);
    DeviceBuffer dq = dev.alloc(qs, t, MemCategory::Activations), dk = dev.alloc(qs, t, MemCategory::Activations);
    DeviceBuffer dv = dev.alloc(qs, t, MemCategory::Activations);
    const int64_t plans = dev.counters().plans_created;
    dev.attention_forward(o, l, q, k, v, kv, c.scale, c.mask);
    dev.attention_backward(dq, dk, dv, g, o, l, q, k, v, kv, c.scale, c.mask);
    Result r{fetch(dev, o), fetch(dev, dq), dev.counters().plans_created - plans, dev.counters().attention_impls};
    return r;
  };
  const Result first = run(*gpu_);  // builds the graphs unless an earlier test of this process did
  gpu_.reset();                     // the repeat's device goes
  std::unique_ptr<Device> next = make_cuda_device();
  const Result second = run(*next);
  EXPECT_EQ(second.plans, 0) << "the next device rebuilt graphs of a shape built in this process";
  EXPECT_EQ(second.impls, first.impls) << "the next device ran another implementation or bias form";
  EXPECT_EQ(calls_starting(*next, kHalfImpl), 2) << "the calls did not run on " << kHalfImpl;
  for (const auto& [impl, calls] : second.impls) std::printf("attention_impl %s: %lld call(s)\n", impl.c_str(), static_cast<long long>(calls));
  std::string where;
  EXPECT_TRUE(identical(second.o, first.o, &where)) << "forward differs on the next device: " << where;
  EXPECT_TRUE(identical(second.dq, first.dq, &where)) << "dq differs on the next device: " << where;
}

// BERT's fused path runs the packed ops (Q/K/V read by stride from the QKV
// projection, merged output, dQKV; core/attention_layout.h). At BERT-base in
// fp16 and bf16 cuDNN must run both calls with the packed strides (a refusal
// would put every BERT cell on the hand-written kernel), build their graphs
// once, allocate nothing on a repeat, and give reproducible bits. Their
// numbers are the op-check cases' (attention_packed, against float64).
TEST_F(CudnnAttention, PackedLayoutRunsOnCudnnAtBertBase) {
  for (DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    const Packed p = packed(kDims[1], t, 2.0f);
    const int64_t half = half_calls();
    p.run(*gpu_);
    EXPECT_EQ(half_calls(), half + 2) << "the packed calls did not both run on " << kHalfImpl;
    const Host o1 = fetch(*gpu_, p.out), g1 = fetch(*gpu_, p.dqkv);
    const int64_t plans = gpu_->counters().plans_created;
    const auto allocs = gpu_->memory().snapshot().allocations;
    p.run(*gpu_);
    gpu_->synchronize();
    EXPECT_EQ(gpu_->counters().plans_created, plans) << "a repeated packed shape built a graph";
    EXPECT_EQ(gpu_->memory().snapshot().allocations, allocs) << "a repeated packed shape allocated";
    std::string where;
    EXPECT_TRUE(identical(fetch(*gpu_, p.out), o1, &where)) << "packed forward not reproducible: " << where;
    EXPECT_TRUE(identical(fetch(*gpu_, p.dqkv), g1, &where)) << "packed dqkv not reproducible: " << where;
  }
}

// Dropout on the probabilities through cuDNN, which draws its own Philox
// mask from the seed (not the CPU's hash mask, so no element-wise comparison
// with the CPU exists): one seed gives the same bits twice, another seed
// other outputs; lse is the no-dropout lse (dropout acts after it); and
// because out and every gradient are linear in the mask, each is an unbiased
// estimate of its no-dropout value: over 64 seeds the mean lies within a few
// standard errors (from the seeds' own spread) plus the rounding bound of
// one no-dropout call (4u of the magnitudes: cuDNN's P and dS roundings and
// the outputs'), element by element and as a whole (the slope of the means
// against the no-dropout values is 1: a missing 1/(1-p) makes it 0.9).
TEST_F(CudnnAttention, DropoutIsReproducibleUnbiasedAndLeavesLseAlone) {
  const double u = 0x1p-8;  // bf16
  const Packed p = packed(kDims[0], DType::BF16, 1.0f);
  auto run = [&](AttnDropout drop, Host* o, Host* l, Host* g) {
    p.run(*gpu_, drop);
    *o = fetch(*gpu_, p.out), *l = fetch(*gpu_, p.lse), *g = fetch(*gpu_, p.dqkv);
  };
  Host o0, l0, g0, o1, l1, g1, o1b, l1b, g1b, o2, l2, g2;
  run(AttnDropout{}, &o0, &l0, &g0);
  const int64_t half = half_calls();
  run(AttnDropout{0.1f, 1}, &o1, &l1, &g1);
  EXPECT_EQ(half_calls(), half + 2) << "the dropout calls did not run on " << kHalfImpl;
  run(AttnDropout{0.1f, 1}, &o1b, &l1b, &g1b);
  run(AttnDropout{0.1f, 2}, &o2, &l2, &g2);
  std::string where;
  EXPECT_TRUE(identical(o1, o1b, &where)) << "one seed, two outputs: " << where;
  EXPECT_TRUE(identical(g1, g1b, &where)) << "one seed, two gradients: " << where;
  EXPECT_FALSE(identical(o1, o2)) << "two seeds, one output: no dropout ran";
  EXPECT_FALSE(identical(o1, o0)) << "dropout changed nothing";
  expect_near("lse with dropout", l1, l0, [&](size_t i) { return 0x1p-14 * (std::fabs(l0.value(static_cast<int64_t>(i))) + 1.0); });

  constexpr int kSeeds = 64;
  std::vector<double> so(static_cast<size_t>(o0.numel()), 0.0), so2(so.size(), 0.0);
  std::vector<double> sg(static_cast<size_t>(g0.numel()), 0.0), sg2(sg.size(), 0.0);
  for (int seed = 0; seed < kSeeds; ++seed) {
    Host o, l, g;
    run(AttnDropout{0.1f, 1000 + static_cast<uint64_t>(seed)}, &o, &l, &g);
    for (size_t i = 0; i < so.size(); ++i) so[i] += o.value(static_cast<int64_t>(i)), so2[i] += o.value(static_cast<int64_t>(i)) * o.value(static_cast<int64_t>(i));
    for (size_t i = 0; i < sg.size(); ++i) sg[i] += g.value(static_cast<int64_t>(i)), sg2[i] += g.value(static_cast<int64_t>(i)) * g.value(static_cast<int64_t>(i));
  }
  // Per element within 7 standard errors (6 for the slope): with 64 seeds and
  // ~5e5 elements a false alarm is below 1%. The slope of the means against
  // the no-dropout values (least squares through 0) must be 1: a wrong scale
  // is a systematic bias, which no element alone may show.
  auto unbiased = [&](const char* what, const Host& ref, const std::vector<double>& sum, const std::vector<double>& sum2) {
    int64_t bad = 0;
    double mr = 0.0, rr = 0.0, slope_var = 0.0, round = 0.0;
    for (size_t i = 0; i < sum.size(); ++i) {
      const double mean = sum[i] / kSeeds, var = std::max(0.0, sum2[i] / kSeeds - mean * mean);
      const double r = ref.value(static_cast<int64_t>(i)), se2 = var / (kSeeds - 1);
      const double tol = 7 * std::sqrt(se2) + 4 * u * (std::fabs(r) + std::fabs(mean)) + 0x1p-20;
      if (!(std::fabs(mean - r) <= tol) && ++bad <= 5)
        ADD_FAILURE() << what << "[" << i << "]: mean over seeds " << mean << ", without dropout " << r << ", tolerance " << tol;
      mr += mean * r, rr += r * r, slope_var += r * r * se2, round += 4 * u * r * r;
    }
    EXPECT_EQ(bad, 0) << what << ": elements whose mean over seeds is not the no-dropout value";
    ASSERT_GT(rr, 0.0);
    const double slope = mr / rr, slope_tol = 6 * std::sqrt(slope_var) / rr + round / rr;
    EXPECT_NEAR(slope, 1.0, slope_tol) << what << ": the means over seeds scale the no-dropout values by " << slope;
  };
  unbiased("out", o0, so, so2);
  unbiased("dqkv", g0, sg, sg2);
}

// The fp16 hazard of the mask rule (ops/attention.h): mask_value -1e9 rounds
// to -inf in fp16, so a real key's bias 0 * -inf is NaN, and every output of
// a batch element with a real key is NaN, on the CPU and through cuDNN alike.
TEST_F(CudnnAttention, F16MinusInfMaskGivesNaNLikeTheCpu) {
  const Dims d{"hazard", 2, 2, 16, 16, 64};
  Case c = make_case(d, DType::F16);
  c.mask = -1e9f;
  for (Device* dev : {gpu_.get(), cpu_.get()}) {
    const Host oh = forward_once(*dev, c, DType::F16);
    int64_t finite = 0;
    for (int64_t i = 0; i < oh.numel(); ++i) finite += !std::isnan(oh.value(i));
    EXPECT_EQ(finite, 0) << device_kind_name(dev->info().kind) << ": outputs that are not NaN";
  }
}

// fp32 fused attention has no cuDNN path: the hand-written kernel runs it,
// and the counters say so.
TEST_F(CudnnAttention, F32RunsTheHandWrittenKernelAndSaysSo) {
  const Dims d{"f32", 2, 2, 33, 33, 64};
  const Case c = make_case(d, DType::F32);
  const int64_t kernel = impl_calls("cuda_kernel"), sdpa = impl_calls("cudnn_sdpa");
  forward_once(*gpu_, c, DType::F32);
  EXPECT_EQ(impl_calls("cuda_kernel"), kernel + 1);
  EXPECT_EQ(impl_calls("cudnn_sdpa"), sdpa);
}

// An output dtype other than q's (the contract allows it) is outside the
// graph's single I/O dtype: the hand-written kernel runs it, counted.
TEST_F(CudnnAttention, MixedOutputDtypeRunsTheHandWrittenKernel) {
  const Dims d{"mixed", 1, 2, 32, 32, 64};
  const Case c = make_case(d, DType::BF16);
  const int64_t kernel = impl_calls("cuda_kernel");
  forward_once(*gpu_, c, DType::F32);
  EXPECT_EQ(impl_calls("cuda_kernel"), kernel + 1);
}

}  // namespace
}  // namespace mpb
