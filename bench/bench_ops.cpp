// Per-op benchmarks on the CPU device at BERT-mini and BERT-base shapes, in
// fp32 and bf16 storage: every fused op against its unfused composition (the
// exact calls models/bert.cpp makes on each path), the GEMMs of a layer per
// compute mode, AdamW and the sparse MLM head's cross-entropy.
//
// Counters (all per second of real time, so they read as rates):
//   bytes/s      the op's compulsory traffic (every input read once, every
//                output written once) over its time
//   FLOP/s       its arithmetic (GEMMs 2mnk; the rest counted in the comments)
//   frac_triad   bytes/s as a fraction of this binary's STREAM triad
//   frac_ceiling FLOP/s as a fraction of the same mode's GEMM ceiling (GEMMs)
// scripts/bench_ops_table.py turns --benchmark_format=json into the table in
// docs/PERFORMANCE.md, with which bound limits each op and the fused/unfused
// ratios. The CPU kernels' ISA build is in the context (MPB_CPU_ISA picks one).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/rng.h"
#include "runner/measure/ceiling.h"

namespace {

using namespace mpb;

// ---- shapes --------------------------------------------------------------------------------

struct BertShape {
  const char* name;
  int64_t batch, seq, hidden, heads, ffn, vocab, params;
  int64_t tokens() const { return batch * seq; }
  int64_t head_dim() const { return hidden / heads; }
  int64_t labelled() const { return tokens() * 15 / 100; }  // the sparse MLM head's rows (15% masked)
};
// BERT-mini as experiments/bert_speed.yaml runs it; BERT-base at a batch that
// fits a small machine. params: the AdamW step's element count (BERT-mini's
// whole model; one BERT-base encoder layer).
constexpr BertShape kMini{"mini", 16, 128, 256, 4, 1024, 8192, 5'300'000};
constexpr BertShape kBase{"base", 8, 128, 768, 12, 3072, 30522, 7'100'000};
// BERT-mini's tokens as 4 sequences of 512: where the [T,T] score matrices
// (1 MiB per head in fp32) no longer stay in the caches, the case
// flash-style attention exists for (docs/PERFORMANCE.md).
constexpr BertShape kMiniSeq512{"mini512", 4, 512, 256, 4, 1024, 8192, 5'300'000};

// ---- the machine's bounds, measured once in this binary --------------------------------------

// STREAM triad a = b + s c over three 256 MiB arrays (far past the caches),
// OpenMP-parallel with static schedules like the kernels, the pages first
// touched by the threads that use them: best of 5, in bytes/s, counting the
// 3 arrays as STREAM does (the write-allocate read of a is not counted).
double triad_bytes_per_s() {
  static const double rate = [] {
    const int64_t n = int64_t{64} << 20;
    std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
    float* pa = a.get();
    float* pb = b.get();
    float* pc = c.get();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = 0.0f, pb[i] = 1.0f, pc[i] = 2.0f;
    double best = 0.0;
    for (int rep = 0; rep < 6; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + 0.5f * pc[i];
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep > 0) best = std::max(best, 3.0 * 4.0 * double(n) / s);  // rep 0 faults the pages in
    }
    benchmark::DoNotOptimize(pa);
    return best;
  }();
  return rate;
}

double ceiling_flops_per_s(GemmCompute mode) {
  static std::map<GemmCompute, double> cache;
  auto it = cache.find(mode);
  if (it == cache.end()) {
    const std::unique_ptr<Device> dev = make_cpu_device();
    it = cache.emplace(mode, 1e9 * measure_gemm_ceiling(*dev, mode)).first;
  }
  return it->second;
}

// The bounds themselves, for scripts/bench_ops_table.py: the triad and the fp32
// and bf16 GEMM ceilings (runner/measure/ceiling.h, the runner's own measurement).
void BM_MachineBounds(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(triad_bytes_per_s());
  state.counters["triad_bytes/s"] = triad_bytes_per_s();
  state.counters["ceiling_fp32_FLOP/s"] = ceiling_flops_per_s(GemmCompute::F32);
  state.counters["ceiling_bf16_FLOP/s"] = ceiling_flops_per_s(GemmCompute::BF16);
}
BENCHMARK(BM_MachineBounds)->Iterations(1)->Unit(benchmark::kMillisecond);

// ---- helpers ---------------------------------------------------------------------------------

// A device and its buffers for one benchmark, filled with values in [-1, 1).
struct Bench {
  std::unique_ptr<Device> dev = make_cpu_device();
  std::vector<DeviceBuffer> bufs;
  Rng rng{11};

  Tensor make(Shape s, DType t, float lo = -1.0f, float hi = 1.0f) {
    DeviceBuffer f = dev->alloc(s, DType::F32, MemCategory::Workspace);
    std::vector<float> h(static_cast<size_t>(f.tensor().numel()));
    for (float& v : h) v = float(rng.uniform(lo, hi));
    dev->upload(f, h.data());
    bufs.push_back(dev->alloc(s, t, MemCategory::Workspace));
    dev->cast(bufs.back(), f);
    return bufs.back();
  }
  Tensor ints(Shape s, int32_t value) {
    bufs.push_back(dev->alloc(s, DType::I32, MemCategory::Workspace));
    std::vector<int32_t> h(static_cast<size_t>(bufs.back().tensor().numel()), value);
    dev->upload(bufs.back(), h.data());
    return bufs.back();
  }
  Tensor labels(int64_t rows, int64_t classes) {
    bufs.push_back(dev->alloc(Shape{rows}, DType::I32, MemCategory::Workspace));
    std::vector<int32_t> h(static_cast<size_t>(rows));
    for (int32_t& y : h) y = int32_t(rng.uniform(0, double(classes) - 1));
    dev->upload(bufs.back(), h.data());
    return bufs.back();
  }
};

void set_counters(benchmark::State& state, double bytes, double flops, GemmCompute gemm_mode, bool gemm) {
  using C = benchmark::Counter;
  state.counters["bytes/s"] = C(bytes, C::kIsIterationInvariantRate);
  state.counters["FLOP/s"] = C(flops, C::kIsIterationInvariantRate);
  state.counters["frac_triad"] = C(bytes / triad_bytes_per_s(), C::kIsIterationInvariantRate);
  if (gemm) state.counters["frac_ceiling"] = C(flops / ceiling_flops_per_s(gemm_mode), C::kIsIterationInvariantRate);
}

GemmCompute mode_of(DType t) { return t == DType::BF16 ? GemmCompute::BF16 : GemmCompute::F32; }

void bgemm(Device& dev, const Tensor& c, const Tensor& a, const Tensor& b, int64_t m, int64_t n, int64_t k, bool ta,
           bool tb, int64_t batch, GemmCompute mode) {
  GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb;
  g.a = a, g.b = b, g.c = c, g.compute = mode;
  g.batch = batch, g.stride_a = m * k, g.stride_b = k * n, g.stride_c = m * n;
  dev.gemm(g);
}

// ---- attention: fused flash-style vs the unfused scores/softmax/GEMM path --------------------

// Forward and backward of one layer's attention core, as models/bert.cpp runs
// each path: from the QKV projection qkv [N,3C] to the merged heads [N,C] and
// back to dqkv. Fused: the packed ops, which read the heads by stride (no
// shuffles); unfused: split_heads, batched GEMM q.k^T, masked softmax, GEMM
// p.v, merge_heads, and back (split_heads_grad, four GEMMs, softmax_backward,
// merge_qkv_grads). Traffic: qkv, out, dout and dqkv once each (the unfused
// path's head copies and [B,H,T,T] scores and probabilities count only in its
// time, not its bytes, so both paths are held to the same useful traffic).
// FLOPs: 4 T^2 D per (b,h) forward (two GEMMs), 8 T^2 D backward (four).
void BM_Attention(benchmark::State& state, BertShape s, DType t, bool fused) {
  Bench b;
  const int64_t B = s.batch, H = s.heads, T = s.seq, D = s.head_dim(), BH = B * H, N = B * T, C = H * D;
  const Shape hs{B, H, T, D};
  const Tensor qkv = b.make(Shape{N, 3 * C}, t), dqkv = b.make(Shape{N, 3 * C}, t);
  const Tensor out = b.make(Shape{N, C}, t), dout = b.make(Shape{N, C}, t);
  const Tensor lse = b.make(Shape{B, H, T}, DType::F32);
  const Tensor key_valid = b.ints(Shape{B, T}, 1);
  const float scale = 1.0f / std::sqrt(float(D)), mask = -10000.0f;
  const GemmCompute mode = mode_of(t);
  Device& dev = *b.dev;
  // The unfused path's buffers (the fused one has none).
  Tensor q, k, v, att, datt, dq, dk, dv, scores, probs, s2;
  if (!fused) {
    q = b.make(hs, t), k = b.make(hs, t), v = b.make(hs, t), att = b.make(hs, t), datt = b.make(hs, t);
    dq = b.make(hs, t), dk = b.make(hs, t), dv = b.make(hs, t);
    scores = b.make(Shape{B, H, T, T}, t), probs = b.make(Shape{B, H, T, T}, t), s2 = b.make(Shape{B, H, T, T}, t);
  }
  for (auto _ : state) {
    if (fused) {
      dev.attention_forward_packed(out, lse, qkv, key_valid, scale, mask);
      dev.attention_backward_packed(dqkv, dout, out, lse, qkv, key_valid, scale, mask);
    } else {
      dev.split_heads(q, k, v, qkv);
      bgemm(dev, scores, q, k, T, T, D, false, true, BH, mode);
      dev.masked_softmax_forward(probs, scores, key_valid, scale, mask);
      bgemm(dev, att, probs, v, T, D, T, false, false, BH, mode);
      dev.merge_heads(out, att);
      dev.split_heads_grad(datt, dout);
      bgemm(dev, dv, probs, datt, T, D, T, true, false, BH, mode);
      bgemm(dev, scores, datt, v, T, T, D, false, true, BH, mode);
      dev.softmax_backward(s2, probs, scores, scale);
      bgemm(dev, dq, s2, k, T, D, T, false, false, BH, mode);
      bgemm(dev, dk, s2, q, T, D, T, true, false, BH, mode);
      dev.merge_qkv_grads(dqkv, dq, dk, dv);
    }
  }
  const double bytes = 8.0 * double(N * C) * double(dtype_size(t));
  set_counters(state, bytes, 12.0 * double(BH) * double(T) * double(T) * double(D), mode, false);
}

// ---- residual + LayerNorm: one pass vs add then LayerNorm ------------------------------------

// Traffic: a, b read, sum and out written (gamma, beta negligible). ~9 FLOPs/element.
void BM_ResidualLayerNorm(benchmark::State& state, BertShape s, DType t, bool fused) {
  Bench b;
  const Shape x{s.tokens(), s.hidden};
  const Tensor a = b.make(x, t), r = b.make(x, t), sum = b.make(x, t), out = b.make(x, t);
  const Tensor g = b.make(Shape{s.hidden}, DType::F32), beta = b.make(Shape{s.hidden}, DType::F32);
  const Tensor mean = b.make(Shape{s.tokens()}, DType::F32), rstd = b.make(Shape{s.tokens()}, DType::F32);
  Device& dev = *b.dev;
  for (auto _ : state) {
    if (fused) {
      dev.residual_layernorm_forward(out, sum, mean, rstd, a, r, g, beta, 1e-12f);
    } else {
      dev.add(sum, a, r);
      dev.layernorm_forward(out, mean, rstd, sum, g, beta, 1e-12f);
    }
  }
  set_counters(state, 4.0 * double(a.numel()) * double(dtype_size(t)), 9.0 * double(a.numel()), mode_of(t), false);
}

// ---- the FFN's first GEMM with bias + GELU: epilogue vs GEMM, bias, activation ---------------

// Traffic: X, W, bias read, pre-activation and output written. FLOPs: 2mnk.
void BM_GemmBiasGelu(benchmark::State& state, BertShape s, DType t, bool fused) {
  Bench b;
  const int64_t m = s.tokens(), n = s.ffn, k = s.hidden;
  const Tensor x = b.make(Shape{m, k}, t), w = b.make(Shape{n, k}, t), bias = b.make(Shape{n}, DType::F32);
  const Tensor pre = b.make(Shape{m, n}, t), out = b.make(Shape{m, n}, t);
  const GemmCompute mode = mode_of(t);
  Device& dev = *b.dev;
  GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.trans_b = true, g.a = x, g.b = w, g.compute = mode;
  for (auto _ : state) {
    if (fused) {
      g.c = out, g.epilogue = Epilogue::BiasGelu, g.bias = bias, g.pre_act = pre;
      dev.gemm(g);
    } else {
      g.c = pre, g.epilogue = Epilogue::None;
      dev.gemm(g);
      dev.add_bias(pre, bias);
      dev.activation_forward(Activation::Gelu, out, pre);
    }
  }
  const double bytes = double(m * k + n * k + 2 * m * n) * double(dtype_size(t));
  set_counters(state, bytes, 2.0 * double(m) * double(n) * double(k), mode, true);
}

// ---- the layer's GEMMs per compute mode, against that mode's ceiling --------------------------

// QKV projection forward ([N,H] x [H,3H]) and its weight gradient ([H,N] x [N,3H]).
void BM_GemmLayer(benchmark::State& state, BertShape s, GemmCompute mode, bool weight_grad) {
  Bench b;
  const DType t = mode == GemmCompute::BF16 ? DType::BF16 : (mode == GemmCompute::F16 ? DType::F16 : DType::F32);
  const int64_t N = s.tokens(), H = s.hidden;
  GemmArgs g;
  g.compute = mode;
  if (!weight_grad) {  // y[N,3H] = x[N,H] . W[3H,H]^T
    g.m = N, g.n = 3 * H, g.k = H, g.trans_b = true;
    g.a = b.make(Shape{N, H}, t), g.b = b.make(Shape{3 * H, H}, t), g.c = b.make(Shape{N, 3 * H}, t);
  } else {  // dW[3H,H] += dy[N,3H]^T . x[N,H], into an fp32 master gradient
    g.m = 3 * H, g.n = H, g.k = N, g.trans_a = true, g.beta = 1.0f;
    g.a = b.make(Shape{N, 3 * H}, t), g.b = b.make(Shape{N, H}, t), g.c = b.make(Shape{3 * H, H}, DType::F32);
  }
  for (auto _ : state) b.dev->gemm(g);
  const double bytes = double(g.a.bytes() + g.b.bytes() + g.c.bytes());
  set_counters(state, bytes, 2.0 * double(g.m) * double(g.n) * double(g.k), mode, true);
}

// ---- softmax cross-entropy over the sparse MLM head's rows: fused vs forward + backward -------

// Traffic: logits read, dlogits written (the unfused path's probs buffer is
// counted in its time only). ~5 FLOPs per logit (max, exp, sum, scale, subtract).
void BM_SoftmaxXent(benchmark::State& state, BertShape s, DType t, bool fused) {
  Bench b;
  const int64_t rows = s.labelled(), V = s.vocab;
  const Tensor logits = b.make(Shape{rows, V}, t, -4.0f, 4.0f), labels = b.labels(rows, V);
  const Tensor dlogits = b.make(Shape{rows, V}, t), probs = b.make(Shape{rows, V}, DType::F32);
  Device& dev = *b.dev;
  for (auto _ : state) {
    if (fused) {
      benchmark::DoNotOptimize(dev.softmax_xent_fused(dlogits, logits, labels, 1.0f));
    } else {
      benchmark::DoNotOptimize(dev.softmax_xent_forward(probs, logits, labels));
      dev.softmax_xent_backward(dlogits, probs, labels, 1.0f);
    }
  }
  set_counters(state, 2.0 * double(logits.numel()) * double(dtype_size(t)), 5.0 * double(logits.numel()), mode_of(t),
               false);
}

// ---- AdamW: one fused sweep vs the unfused step ---------------------------------------------

// fp32 master weights, moments and gradient (mixed precision keeps those in
// fp32): traffic param, m, v read and written, grad read = 7 x 4 bytes per
// element; ~15 FLOPs per element. Precision bf16 is amp_bf16's step: it also
// writes the bf16 compute copy of the weights (+2 bytes per element), in the
// same sweep when fused, as a separate cast when not.
void BM_AdamW(benchmark::State& state, BertShape s, DType copy, bool fused) {
  Bench b;
  const Shape n{s.params};
  const Tensor p = b.make(n, DType::F32), g = b.make(n, DType::F32), m = b.make(n, DType::F32);
  const Tensor v = b.make(n, DType::F32, 0.0f, 1e-3f);
  const Tensor c = copy == DType::F32 ? Tensor() : b.make(n, copy);
  AdamWHyper h{1e-4f, 0.9f, 0.999f, 1e-6f, 0.01f, 1};
  Device& dev = *b.dev;
  for (auto _ : state) {
    dev.adamw_step(p, g, m, v, h, 1.0f, fused, c);
    ++h.step;
  }
  const double copy_bytes = c.empty() ? 0.0 : double(dtype_size(copy));
  set_counters(state, (7.0 * 4.0 + copy_bytes) * double(s.params), 15.0 * double(s.params), GemmCompute::F32,
               false);
}

// ---- registrations: readable names, e.g. BM_Attention/mini_bf16_fused -------------------------

#define MPB_PAIR(fn, shape, name, dtype, tag, unit)                                                  \
  BENCHMARK_CAPTURE(fn, name##_##tag##_fused, shape, dtype, true)->UseRealTime()->Unit(unit);           \
  BENCHMARK_CAPTURE(fn, name##_##tag##_unfused, shape, dtype, false)->UseRealTime()->Unit(unit)

MPB_PAIR(BM_Attention, kMini, mini, DType::F32, fp32, benchmark::kMillisecond);
MPB_PAIR(BM_Attention, kMini, mini, DType::BF16, bf16, benchmark::kMillisecond);
MPB_PAIR(BM_Attention, kMiniSeq512, mini512, DType::F32, fp32, benchmark::kMillisecond);
MPB_PAIR(BM_Attention, kMiniSeq512, mini512, DType::BF16, bf16, benchmark::kMillisecond);
MPB_PAIR(BM_Attention, kBase, base, DType::F32, fp32, benchmark::kMillisecond);
MPB_PAIR(BM_Attention, kBase, base, DType::BF16, bf16, benchmark::kMillisecond);
MPB_PAIR(BM_ResidualLayerNorm, kMini, mini, DType::F32, fp32, benchmark::kMicrosecond);
MPB_PAIR(BM_ResidualLayerNorm, kMini, mini, DType::BF16, bf16, benchmark::kMicrosecond);
MPB_PAIR(BM_ResidualLayerNorm, kBase, base, DType::F32, fp32, benchmark::kMicrosecond);
MPB_PAIR(BM_ResidualLayerNorm, kBase, base, DType::BF16, bf16, benchmark::kMicrosecond);
MPB_PAIR(BM_GemmBiasGelu, kMini, mini, DType::F32, fp32, benchmark::kMillisecond);
MPB_PAIR(BM_GemmBiasGelu, kMini, mini, DType::BF16, bf16, benchmark::kMillisecond);
MPB_PAIR(BM_GemmBiasGelu, kBase, base, DType::F32, fp32, benchmark::kMillisecond);
MPB_PAIR(BM_GemmBiasGelu, kBase, base, DType::BF16, bf16, benchmark::kMillisecond);
MPB_PAIR(BM_SoftmaxXent, kMini, mini, DType::F32, fp32, benchmark::kMillisecond);
MPB_PAIR(BM_SoftmaxXent, kMini, mini, DType::BF16, bf16, benchmark::kMillisecond);
MPB_PAIR(BM_SoftmaxXent, kBase, base, DType::F32, fp32, benchmark::kMillisecond);
MPB_PAIR(BM_SoftmaxXent, kBase, base, DType::BF16, bf16, benchmark::kMillisecond);

MPB_PAIR(BM_AdamW, kMini, mini, DType::F32, fp32, benchmark::kMillisecond);
MPB_PAIR(BM_AdamW, kMini, mini, DType::BF16, bf16, benchmark::kMillisecond);
MPB_PAIR(BM_AdamW, kBase, base, DType::F32, fp32, benchmark::kMillisecond);
MPB_PAIR(BM_AdamW, kBase, base, DType::BF16, bf16, benchmark::kMillisecond);

#define MPB_GEMM_MODE(shape, name, wg, tag, mode, mname)                                                \
  BENCHMARK_CAPTURE(BM_GemmLayer, name##_##tag##_##mname, shape, mode, wg)->UseRealTime()->Unit(benchmark::kMillisecond)
#define MPB_GEMM_MODES(shape, name, wg, tag)                    \
  MPB_GEMM_MODE(shape, name, wg, tag, GemmCompute::F32, fp32);  \
  MPB_GEMM_MODE(shape, name, wg, tag, GemmCompute::TF32, tf32); \
  MPB_GEMM_MODE(shape, name, wg, tag, GemmCompute::F16, fp16);  \
  MPB_GEMM_MODE(shape, name, wg, tag, GemmCompute::BF16, bf16)

MPB_GEMM_MODES(kMini, mini, false, qkv);
MPB_GEMM_MODES(kMini, mini, true, qkv_dW);
MPB_GEMM_MODES(kBase, base, false, qkv);
MPB_GEMM_MODES(kBase, base, true, qkv_dW);

}  // namespace
