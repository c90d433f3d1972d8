// Embedding (forward gather, backward scatter-add) and the optimizers
// (adamw_step with and without param_copy, sgd_step, lamb_step).
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "opcheck/cases.h"

namespace mpb::opcheck {
namespace {

// ---- embedding ---------------------------------------------------------------------------------
// Forward: a gather, exact (the table value rounded to the activations'
// dtype). Backward: every table row summed over its positions in ascending
// order, from 0 (Overwrite: unreferenced rows zeroed) or from the old value
// (Accumulate: unreferenced rows untouched), rounded once: one fp32 sum of
// count (+1) terms, (count + 2) u sum|terms| + half an ulp of the table. The
// GPU sums each row in the CPU's order: the CPU's bits.
class Embedding : public Instance {
 public:
  Embedding(int64_t V, int64_t C, int64_t N, DType table, DType act, bool heavy) : V_(V), C_(C), N_(N) {
    Gen g(seed_of("embedding", V, C, table, act));
    ids_.resize(static_cast<size_t>(N));
    if (!heavy) {  // repeats: half the ids from {0..4}, id 3 many times; ids from 45 up never used
      for (int64_t i = 0; i < N; ++i) ids_[static_cast<size_t>(i)] = static_cast<int32_t>(i % 2 ? (i * 7) % 45 : i % 5);
      for (int64_t i = 0; i < N; i += 3) ids_[static_cast<size_t>(i)] = 3;
    } else {  // one id on ~40% of the positions; ids below 9V/10
      for (auto& id : ids_) id = g.coin(0.4) ? 3 : g.below(static_cast<int32_t>(V * 9 / 10));
    }
    table_ = g.nonzero(table, Shape{V, C});
    dout_ = g.nonzero(act, Shape{N, C});
    old_ = g.nonzero(table, Shape{V, C});
  }
  Outputs run(Device& dev) override {
    Outputs o;
    DeviceBuffer ids = put(dev, ints(ids_, Shape{N_})), table = put(dev, table_);
    DeviceBuffer out = put(dev, filled(dout_.dtype, Shape{N_, C_}, NAN));
    dev.embedding_forward(out, table, ids);
    o.add("out", dev, out);
    DeviceBuffer dout = put(dev, dout_);
    for (GradMode mode : {GradMode::Overwrite, GradMode::Accumulate}) {
      const bool acc = mode == GradMode::Accumulate;
      DeviceBuffer dt = put(dev, acc ? old_ : filled(table_.dtype, table_.shape, NAN));
      dev.embedding_backward(dt, dout, ids, mode);
      o.add(acc ? "dtable +=" : "dtable =", dev, dt);
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    std::vector<double> out(static_cast<size_t>(N_ * C_));
    for (int64_t i = 0; i < N_; ++i)
      for (int64_t k = 0; k < C_; ++k)
        out[static_cast<size_t>(i * C_ + k)] = stored(dout_.dtype, table_.value(ids_[static_cast<size_t>(i)] * C_ + k));
    c.exact("out", got["out"], out);
    std::vector<std::vector<int64_t>> pos(static_cast<size_t>(V_));
    for (int64_t i = 0; i < N_; ++i) pos[static_cast<size_t>(ids_[static_cast<size_t>(i)])].push_back(i);
    for (bool acc : {false, true}) {
      std::vector<double> ref(static_cast<size_t>(V_ * C_)), tol(ref.size(), 0.0);
      for (int64_t r = 0; r < V_; ++r)
        for (int64_t k = 0; k < C_; ++k) {
          const auto e = static_cast<size_t>(r * C_ + k);
          double s = acc ? old_.value(r * C_ + k) : 0.0, mag = std::fabs(s);
          const auto& p = pos[static_cast<size_t>(r)];
          for (int64_t i : p) s += dout_.value(i * C_ + k), mag += std::fabs(dout_.value(i * C_ + k));
          ref[e] = s;  // unreferenced: 0 or the old value, exactly
          if (!p.empty()) tol[e] = static_cast<double>(p.size() + 2) * kU32 * mag + half_ulp(table_.dtype, s);
        }
      const char* n = acc ? "dtable +=" : "dtable =";
      c.near(n, got[n], ref, tol);
    }
  }

 private:
  int64_t V_, C_, N_;
  std::vector<int32_t> ids_;
  Host table_, dout_, old_;
};

// ---- adamw_step -----------------------------------------------------------------------------------
// Against torch.optim.AdamW in double (adamw_ref_step), 3 steps. A 16-bit
// parameter (apex O3, no master copy) is rounded to its dtype after every
// step, in the reference too. Bounds: per step p takes 2 roundings (decay,
// update) of ~|p| and the update ~8 roundings of ~lr: over 3 steps <= 6u|p| +
// 24u lr few, under 1e-6 |p| since |p| stays >= 0.07 (|p0| >= 0.1, 3 steps
// of <= ~lr); a 16-bit p may land one of its ulps from the reference each
// step (the difference is carried on, never grown: p * decay, decay < 1), so
// + 3 ulps at |p| + 0.05. m: ~3 roundings per step of terms bounded by m's
// magnitude sum (1e-6 of it); v: all terms positive, 1e-6 v.
// Fused == unfused bit for bit (the same per-element arithmetic).
// vs the CPU: the same scalar core; m within 8 ulp + 2^-20 (m can cancel to
// near 0: absolute in the gradient magnitude), v 8 ulp + 2^-38, p 8 ulp +
// 1e-7 + 3 16-bit ulps.
// param_copy: the copy (any float dtype) == cast(param) bit for bit, and
// param, m, v exactly what the same step without a copy gives.
// no_decay (optimizer.decay_exclude): the reference takes weight_decay 0
// inside the ranges, with the same bounds; and the op equals, bit for bit,
// one call per run of the ranges with weight_decay 0 or the given one (the
// contract in core/device.h), fused and unfused.
struct AdamSpec {
  int64_t n;
  float lr, wd, grad_scale;
  float g_lo, g_hi;  // gradients uniform in [g_lo, g_hi]
  bool zero_state;
  int steps;
};

class AdamW : public Instance {
 public:
  AdamW(AdamSpec s, DType pt, DType gt, DType copy_t, std::vector<ElementRange> no_decay = {})
      : s_(s), copy_t_(copy_t), no_decay_(std::move(no_decay)) {
    Gen g(seed_of("adamw", s.n, pt, gt, copy_t));
    p0_ = g.nonzero(pt, Shape{s.n});
    m0_ = s.zero_state ? filled(DType::F32, Shape{s.n}, 0.0f) : g.uniform(DType::F32, Shape{s.n}, -0.01f, 0.01f);
    v0_ = s.zero_state ? filled(DType::F32, Shape{s.n}, 0.0f) : g.uniform(DType::F32, Shape{s.n}, 0.0f, 1e-4f);
    for (int i = 0; i < s.steps; ++i) grads_.push_back(g.uniform(gt, Shape{s.n}, s.g_lo, s.g_hi));
  }
  // The betas in double, as a configuration gives them: the op forms 1 - beta
  // from them in double (PyTorch's way). From 0.999f, v's (1 - beta2) g^2
  // term would be 1.3e-5 off, 13x v's bound below.
  AdamWHyper hyper(int step, bool decayed = true) const {
    return AdamWHyper{s_.lr, 0.9, 0.999, 1e-8f, decayed ? s_.wd : 0.0f, step};
  }
  Outputs run(Device& dev) override {
    Outputs o;
    const bool copy = copy_t_ != DType::I32;
    for (bool fused : {true, false}) {
      DeviceBuffer p = put(dev, p0_), m = put(dev, m0_), v = put(dev, v0_);
      DeviceBuffer c = copy ? put(dev, filled(copy_t_, p0_.shape, NAN)) : DeviceBuffer{};
      for (int step = 1; step <= s_.steps; ++step)
        dev.adamw_step(p, put(dev, grads_[static_cast<size_t>(step - 1)]), m, v, hyper(step), s_.grad_scale, fused,
                       copy ? c.tensor() : Tensor{}, no_decay_);
      const std::string f = fused ? " fused" : " unfused";
      o.add("param" + f, dev, p), o.add("m" + f, dev, m), o.add("v" + f, dev, v);
      if (!no_decay_.empty()) {  // one call per run, each with its own weight decay
        DeviceBuffer p3 = put(dev, p0_), m3 = put(dev, m0_), v3 = put(dev, v0_);
        for (int step = 1; step <= s_.steps; ++step) {
          DeviceBuffer g = put(dev, grads_[static_cast<size_t>(step - 1)]);
          for_each_run([&](int64_t lo, int64_t hi, bool decayed) {
            const auto part = [&](const DeviceBuffer& b) { return b.tensor().flat_slice(lo, hi - lo); };
            dev.adamw_step(part(p3), part(g), part(m3), part(v3), hyper(step, decayed), s_.grad_scale, fused, Tensor{});
          });
        }
        o.add("param split" + f, dev, p3), o.add("m split" + f, dev, m3), o.add("v split" + f, dev, v3);
      }
      if (copy) {
        DeviceBuffer cast = dev.alloc(p0_.shape, copy_t_, MemCategory::Params);
        dev.cast(cast, p);
        o.add("copy" + f, dev, c), o.add("cast(param)" + f, dev, cast);
        DeviceBuffer p2 = put(dev, p0_), m2 = put(dev, m0_), v2 = put(dev, v0_);
        for (int step = 1; step <= s_.steps; ++step)
          dev.adamw_step(p2, put(dev, grads_[static_cast<size_t>(step - 1)]), m2, v2, hyper(step), s_.grad_scale, fused,
                         Tensor{});
        o.add("param no copy" + f, dev, p2), o.add("m no copy" + f, dev, m2), o.add("v no copy" + f, dev, v2);
      }
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    const DType pt = p0_.dtype;
    std::vector<AdamRef> ref(static_cast<size_t>(s_.n));
    for (int64_t i = 0; i < s_.n; ++i) {
      AdamRef& r = ref[static_cast<size_t>(i)];
      r.p = p0_.value(i), r.m = m0_.value(i), r.v = v0_.value(i), r.m_mag = std::fabs(r.m);
      for (int step = 1; step <= s_.steps; ++step) {
        adamw_ref_step(r, grads_[static_cast<size_t>(step - 1)].value(i) * static_cast<double>(s_.grad_scale),
                       hyper(step, decayed(i)));
        r.p = stored(pt, r.p);
      }
    }
    std::vector<double> rp(ref.size()), rm(ref.size()), rv(ref.size()), tp(ref.size()), tm(ref.size()), tv(ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      rp[i] = ref[i].p, rm[i] = ref[i].m, rv[i] = ref[i].v;
      tp[i] = 1e-6 * std::fabs(rp[i]) + s_.steps * store_ulp(pt, std::fabs(rp[i]) + 0.05);
      tm[i] = 1e-6 * ref[i].m_mag;
      tv[i] = 1e-6 * rv[i];
      if (c.cuda()) {  // at the largest magnitude a CPU result may have
        tp[i] += p_cpu_tol(std::fabs(rp[i]) + tp[i]);
        tm[i] += m_cpu_tol(std::fabs(rm[i]) + tm[i]);
        tv[i] += v_cpu_tol(rv[i] + tv[i]);
      }
    }
    c.near("param", got["param fused"], rp, tp);
    c.near("m", got["m fused"], rm, tm);
    c.near("v", got["v fused"], rv, tv);
    for (const char* n : {"param", "m", "v"}) c.same_bits(std::string("fused vs unfused ") + n, got[std::string(n) + " fused"], got[std::string(n) + " unfused"]);
    if (!no_decay_.empty())
      for (const char* f : {" fused", " unfused"})
        for (const char* n : {"param", "m", "v"})
          c.same_bits(std::string("no_decay vs a call per run: ") + n + f, got[std::string(n) + f],
                      got[std::string(n) + " split" + f]);
    if (copy_t_ == DType::I32) return;
    for (const char* f : {" fused", " unfused"}) {
      c.same_bits(std::string("copy vs cast(param)") + f, got[std::string("copy") + f], got[std::string("cast(param)") + f]);
      for (const char* n : {"param", "m", "v"})
        c.same_bits(std::string("with vs without a copy: ") + n + f, got[std::string(n) + f], got[std::string(n) + " no copy" + f]);
    }
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    for (const auto& [name, h] : got.tensors) {
      const bool is_v = name[0] == 'v', is_m = name[0] == 'm';
      const DType t = h.dtype;
      c.vs_cpu(name, h, cpu[name], [&](int64_t, double w) {
        if (is_m) return m_cpu_tol(w);
        if (is_v) return v_cpu_tol(w);
        return p_cpu_tol(w) + (t != p0_.dtype ? store_ulp(t, w) : 0.0);  // a copy: one more rounding
      });
    }
  }

 private:
  double p_cpu_tol(double w) const {
    return 8 * ulp(DType::F32, w) + 1e-7 + s_.steps * store_ulp(p0_.dtype, std::fabs(w) + 0.05);
  }
  static double m_cpu_tol(double w) { return 8 * ulp(DType::F32, w) + std::ldexp(2.0, -21); }
  static double v_cpu_tol(double w) { return 8 * ulp(DType::F32, w) + std::ldexp(4.0, -40); }

  bool decayed(int64_t i) const {
    for (const ElementRange& r : no_decay_)
      if (i >= r.begin && i < r.end) return false;
    return true;
  }
  // run(lo, hi, decayed) over the maximal runs of [0, n) in or out of the ranges.
  template <class Run>
  void for_each_run(Run run) const {
    int64_t i = 0;
    for (const ElementRange& r : no_decay_) {
      if (r.begin > i) run(i, r.begin, true);
      run(r.begin, r.end, false);
      i = r.end;
    }
    if (i < s_.n) run(i, s_.n, true);
  }

  AdamSpec s_;
  DType copy_t_;  // I32: no copy
  std::vector<ElementRange> no_decay_;
  Host p0_, m0_, v0_;
  std::vector<Host> grads_;
};

// ---- sgd_step ---------------------------------------------------------------------------------------
// torch.optim.SGD (dampening 0, nesterov off) in double: g += wd p;
// buf = momentum buf + g; p -= lr buf, 3 steps from a given buffer. ~4
// roundings per step of terms bounded by the magnitudes: 1e-6 of them. A
// 16-bit p is rounded every step (in the reference too): 3 of its ulps at
// |p| + 1, which buf sees through wd p. vs the CPU: FMA contraction
// differences only: 8 ulp + 1e-6 on buf, 8 ulp + 1e-7 on p, plus the 16-bit
// ulps as above.
struct SgdSpec {
  int64_t n;
  SgdHyper h;
  float grad_scale;
  float p_lo, p_hi, g_lo, g_hi;  // p and g uniform (lo < 0) or magnitudes in [lo, hi]
  bool zero_buf;
};

class Sgd : public Instance {
 public:
  // no_decay: weight_decay 0 inside the ranges, in the reference too.
  Sgd(SgdSpec s, DType pt, DType gt, std::vector<ElementRange> no_decay = {}) : s_(s), no_decay_(std::move(no_decay)) {
    Gen g(seed_of("sgd", s.n, pt, gt));
    auto draw = [&](DType t, float lo, float hi) { return lo < 0 ? g.uniform(t, Shape{s.n}, lo, hi) : g.nonzero(t, Shape{s.n}, lo, hi); };
    p0_ = draw(pt, s.p_lo, s.p_hi);
    buf0_ = s.zero_buf ? filled(DType::F32, Shape{s.n}, 0.0f) : g.uniform(DType::F32, Shape{s.n}, -0.1f, 0.1f);
    for (int i = 0; i < kSteps; ++i) grads_.push_back(draw(gt, s.g_lo, s.g_hi));
  }
  Outputs run(Device& dev) override {
    DeviceBuffer p = put(dev, p0_), buf = put(dev, buf0_);
    for (const Host& g : grads_) dev.sgd_step(p, put(dev, g), buf, s_.h, s_.grad_scale, no_decay_);
    Outputs o;
    o.add("param", dev, p), o.add("momentum", dev, buf);
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    const DType pt = p0_.dtype;
    const double lr = s_.h.lr, mom = s_.h.momentum;
    std::vector<double> rp(static_cast<size_t>(s_.n)), rb(rp.size()), tp(rp.size()), tb(rp.size());
    for (int64_t i = 0; i < s_.n; ++i) {
      double wd = s_.h.weight_decay;
      for (const ElementRange& r : no_decay_)
        if (i >= r.begin && i < r.end) wd = 0.0;
      double p = p0_.value(i), b = buf0_.value(i), bmag = std::fabs(b);
      for (const Host& g : grads_) {
        const double gi = g.value(i) * static_cast<double>(s_.grad_scale) + wd * p;
        b = mom * b + gi;
        bmag = mom * bmag + std::fabs(gi);
        p = stored(pt, p - lr * b);
      }
      const auto e = static_cast<size_t>(i);
      rp[e] = p, rb[e] = b;
      const double dp = kSteps * store_ulp(pt, std::fabs(p) + 1.0);
      tb[e] = 1e-6 * bmag + kSteps * wd * dp;
      tp[e] = 1e-6 * (std::fabs(p) + 3 * lr * bmag) + dp;
      if (c.cuda()) {
        tb[e] += buf_cpu_tol(std::fabs(b) + tb[e]);
        tp[e] += p_cpu_tol(std::fabs(p) + tp[e]);
      }
    }
    c.near("momentum", got["momentum"], rb, tb);
    c.near("param", got["param"], rp, tp);
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    c.vs_cpu("momentum", got["momentum"], cpu["momentum"], [&](int64_t, double w) { return buf_cpu_tol(w); });
    c.vs_cpu("param", got["param"], cpu["param"], [&](int64_t, double w) { return p_cpu_tol(w); });
  }

 private:
  static constexpr int kSteps = 3;
  double dp16() const { return kSteps * store_ulp(p0_.dtype, 4.0); }
  double buf_cpu_tol(double w) const { return 8 * ulp(DType::F32, w) + 1e-6 + kSteps * s_.h.weight_decay * dp16(); }
  double p_cpu_tol(double w) const {
    return 8 * ulp(DType::F32, w) + 1e-7 + kSteps * store_ulp(p0_.dtype, std::fabs(w) + 1.0) + kSteps * s_.h.lr * buf_cpu_tol(16.0);
  }

  SgdSpec s_;
  std::vector<ElementRange> no_decay_;
  Host p0_, buf0_;
  std::vector<Host> grads_;
};

// ---- lamb_step -----------------------------------------------------------------------------------
// Against the paper's Algorithm 2 in double (paper_lamb_layer), 3 steps over a
// flat buffer of tensors: every third excluded from decay, one starting at
// zero (||x|| = 0: ratio 1), one undecayed with zero gradients (||u|| = 0: it
// never moves). The reference rounds its weights to the parameter dtype after
// each step, as the device stores them. Bounds (as tests/opcheck/test_lamb.cpp,
// which runs the long cases): fp32 weights 1e-6 * step * (|x| + 0.05), about
// ten fp32 roundings per element on a move the trust ratio keeps near
// lr * ||x|| per tensor, yet 1000x below one step's move, so a wrong ratio,
// moment, correction or decay fails; 16-bit weights two of their ulps (the
// device and the reference may round one value to either side of a
// boundary, carried but not grown); m and v 1e-6 of their magnitudes (a few
// fp32 roundings per step). The copy == cast(param) bit for bit. vs the CPU:
// both are within the reference's bounds, so within their sum of each other
// (the norms' partial sums are ordered differently on the GPU).
struct LambSpec {
  std::vector<int64_t> sizes;
  LambHyper h;
  float grad_scale;
};

class Lamb : public Instance {
 public:
  Lamb(LambSpec s, DType pt, DType gt, DType copy_t) : s_(std::move(s)), copy_t_(copy_t) {
    for (size_t k = 0; k < s_.sizes.size(); ++k) {
      tensors_.push_back({n_, n_ + s_.sizes[k], k % 3 != 2});
      n_ += s_.sizes[k];
    }
    Gen g(seed_of("lamb", n_, pt, gt, copy_t));
    p0_ = g.uniform(pt, Shape{n_}, -0.1f, 0.1f);
    for (int64_t i = tensors_[1].begin; i < tensors_[1].end; ++i) p0_.set(i, 0.0f);  // ||x|| = 0
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    for (int step = 0; step < kSteps; ++step) {
      Host gr(gt, Shape{n_});
      for (int64_t i = 0; i < n_; ++i) {  // gradients of mixed magnitude across tensors, as layers have
        const bool zero = i >= tensors_[2].begin && i < tensors_[2].end;
        gr.set(i, zero ? 0.0f : static_cast<float>(std::pow(10.0, double(i % 4) - 2.0) * unit(g.engine())));
      }
      grads_.push_back(gr);
    }
  }
  Outputs run(Device& dev) override {
    DeviceBuffer p = put(dev, p0_), m = put(dev, filled(DType::F32, Shape{n_}, 0.0f));
    DeviceBuffer v = put(dev, filled(DType::F32, Shape{n_}, 0.0f));
    DeviceBuffer c = put(dev, filled(copy_t_, Shape{n_}, NAN));
    DeviceBuffer scratch = dev.alloc(Shape{lamb_scratch_floats(tensors_.size())}, DType::F32, MemCategory::Optimizer);
    for (int step = 1; step <= kSteps; ++step) {
      LambHyper h = s_.h;
      h.step = step;
      dev.lamb_step(p, put(dev, grads_[static_cast<size_t>(step - 1)]), m, v, h, s_.grad_scale, c, tensors_, scratch);
    }
    DeviceBuffer cast = dev.alloc(Shape{n_}, copy_t_, MemCategory::Params);
    dev.cast(cast, p);
    Outputs o;
    o.add("param", dev, p), o.add("m", dev, m), o.add("v", dev, v);
    o.add("copy", dev, c), o.add("cast(param)", dev, cast);
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    Ref r = reference();  // a copy: the CUDA bound is doubled below
    if (c.cuda()) {  // the CPU's result is within the same bounds of the reference
      for (size_t i = 0; i < r.tp.size(); ++i) r.tp[i] *= 2, r.tm[i] *= 2, r.tv[i] *= 2;
    }
    c.near("param", got["param"], r.p, r.tp);
    c.near("m", got["m"], r.m, r.tm);
    c.near("v", got["v"], r.v, r.tv);
    c.same_bits("copy vs cast(param)", got["copy"], got["cast(param)"]);
    bool still = true;  // zero gradient, undecayed: the tensor never moves
    for (int64_t i = tensors_[2].begin; i < tensors_[2].end; ++i) still = still && got["param"].value(i) == p0_.value(i);
    c.expect(still, "the undecayed tensor with zero gradients keeps its weights");
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    const Ref& r = reference();
    auto sum_of = [](const std::vector<double>& t) { return [&t](int64_t i, double) { return 2 * t[static_cast<size_t>(i)]; }; };
    c.vs_cpu("param", got["param"], cpu["param"], sum_of(r.tp));
    c.vs_cpu("m", got["m"], cpu["m"], sum_of(r.tm));
    c.vs_cpu("v", got["v"], cpu["v"], sum_of(r.tv));
    c.vs_cpu("copy", got["copy"], cpu["copy"], [&](int64_t i, double w) { return 2 * r.tp[static_cast<size_t>(i)] + store_ulp(copy_t_, w); });
  }

 private:
  static constexpr int kSteps = 3;
  struct Ref {
    std::vector<double> p, m, v, tp, tm, tv;
  };
  // Computed once per instance: check and check_vs_cpu both need it.
  const Ref& reference() {
    if (!ref_.p.empty()) return ref_;
    const DType pt = p0_.dtype;
    const LambHyper& h = s_.h;
    const PaperLamb ph{double(h.lr), double(h.beta1), double(h.beta2), double(h.eps), double(h.weight_decay),
                       h.bias_correction};
    Ref r;
    r.p = p0_.values();
    r.m.assign(static_cast<size_t>(n_), 0.0);
    r.v.assign(static_cast<size_t>(n_), 0.0);
    std::vector<double> m_mag(static_cast<size_t>(n_), 0.0);
    for (int step = 1; step <= kSteps; ++step) {
      std::vector<double> g = grads_[static_cast<size_t>(step - 1)].values();
      for (size_t i = 0; i < g.size(); ++i) {
        g[i] *= double(s_.grad_scale);
        m_mag[i] = ph.beta1 * m_mag[i] + (1.0 - ph.beta1) * std::fabs(g[i]);
      }
      paper_lamb_step(r.p, r.m, r.v, g, tensors_, ph, pt, step);
    }
    for (size_t i = 0; i < r.p.size(); ++i) {
      r.tp.push_back(pt == DType::F32 ? 1e-6 * kSteps * (std::fabs(r.p[i]) + 0.05)
                                      : 2.0 * ulp(pt, r.p[i]) + 1e-6 * kSteps * 0.05);
      r.tm.push_back(1e-6 * m_mag[i]);
      r.tv.push_back(1e-6 * r.v[i]);
    }
    ref_ = std::move(r);
    return ref_;
  }

  LambSpec s_;
  Ref ref_;
  DType copy_t_;
  std::vector<LambTensor> tensors_;
  int64_t n_ = 0;
  Host p0_;
  std::vector<Host> grads_;
};

}  // namespace

void add_embedding_cases(std::vector<OpCase>& v) {
  struct Spec {
    int64_t V, C, N;
    bool heavy;
    Size size;
    const char* label;
  };
  const Spec specs[] = {{50, 24, 40, false, Size::Small, "V50 C24 N40 repeated ids"},
                        {1000, 96, 4096, true, Size::Small, "V1000 C96 N4096 one id on 40%"},
                        {512, 768, 128, true, Size::Bert, "BERT positions V512 C768 N128"}};
  for (const Spec& s : specs)
    for (DType table : kFloatTypes)
      for (DType act : {DType::F32, DType::BF16}) {
        if (s.size == Size::Bert && table != act) continue;
        v.push_back(make_case<Embedding>("embedding_forward/backward", s.label, "table " + dt(table) + " act " + dt(act),
                                         s.size, "forward exact; backward (count + 2) u sum|terms| + half an ulp", true,
                                         s.V, s.C, s.N, table, act, s.heavy));
      }
}

void add_optimizer_cases(std::vector<OpCase>& v) {
  const char* atol = "param 1e-6 |p| (+ 3 ulps of a 16-bit param), m 1e-6 sum|terms|, v 1e-6 v; fused == unfused";
  // torch's AdamW from zero state, 3 steps, a grad_scale that is not a power of two.
  v.push_back(make_case<AdamW>("adamw_step", "n40000 lr1e-2 zero state x3 steps", "param f32 grad f32", Size::Small, atol,
                               false, AdamSpec{40'000, 1e-2f, 0.05f, 0.37f, -4.0f, 4.0f, true, 3}, DType::F32, DType::F32, DType::I32));
  const AdamSpec mixed{37'000, 1e-3f, 0.01f, 1.0f / 1024.0f, -2048.0f, 2048.0f, false, 3};
  for (DType pt : kFloatTypes)
    for (DType gt : kFloatTypes)
      v.push_back(make_case<AdamW>("adamw_step", "n37000 x3 steps", "param " + dt(pt) + " grad " + dt(gt), Size::Small,
                                   atol, false, mixed, pt, gt, DType::I32));
  const AdamSpec one{100'003, 1e-3f, 0.01f, 0.5f, -100.0f, 100.0f, false, 1};
  for (DType pt : kFloatTypes)
    for (DType gt : {DType::F32, DType::BF16})
      for (DType ct : kFloatTypes)
        v.push_back(make_case<AdamW>("adamw_step (param_copy)", "n100003 one step",
                                     "param " + dt(pt) + " grad " + dt(gt) + " copy " + dt(ct), Size::Small,
                                     std::string(atol) + "; copy == cast(param) bit for bit", false, one, pt, gt, ct));
  // optimizer.decay_exclude: 70 no-decay ranges (the CUDA backend launches
  // at most 32 a time, so three pieces), the first at element 0 and the last
  // at the end; a large weight decay so that a range treated wrongly is far
  // outside the bounds.
  std::vector<ElementRange> ranges;
  for (int64_t k = 0; k < 70; ++k) ranges.push_back({k * 571, k * 571 + 1 + k % 37});
  ranges.push_back({40'000 - 300, 40'000});
  const AdamSpec decay{40'000, 1e-2f, 0.5f, 0.37f, -4.0f, 4.0f, false, 3};
  for (DType pt : {DType::F32, DType::BF16})
    v.push_back(make_case<AdamW>("adamw_step (no_decay)", "n40000 71 ranges x3 steps", "param " + dt(pt) + " grad f32",
                                 Size::Small, std::string(atol) + "; == a call per run bit for bit", false, decay, pt,
                                 DType::F32, DType::I32, ranges));
  const AdamSpec bert{768 * 3072, 1e-4f, 0.01f, 1.0f / 128.0f, -64.0f, 64.0f, false, 3};
  v.push_back(make_case<AdamW>("adamw_step (param_copy)", "BERT FFN weight 768x3072 x3 steps", "param f32 grad bf16 copy bf16",
                               Size::Bert, atol, false, bert, DType::F32, DType::BF16, DType::BF16));

  // LAMB: a tensor big enough for every CUDA block of a partial sum to loop,
  // the zero ones, a single element, an odd bias-sized one.
  const char* ltol = "param 1e-6 step (|p| + 0.05) (2 ulps of a 16-bit param), m, v 1e-6 of their magnitudes; copy == cast(param)";
  // Betas in double, as AdamW's cases have them (1 - beta formed in double).
  const LambSpec lamb{{3000, 64, 257, 1, 9001, 5}, LambHyper{1e-2f, 0.9, 0.999, 1e-6f, 0.01f, 1, true}, 0.5f};
  const DType lamb_types[][3] = {{DType::F32, DType::F32, DType::BF16}, {DType::F32, DType::BF16, DType::BF16},
                                 {DType::BF16, DType::BF16, DType::F32}, {DType::F16, DType::F32, DType::F16}};
  for (const auto& t : lamb_types)
    v.push_back(make_case<Lamb>("lamb_step", "6 tensors n12328 x3 steps",
                                "param " + dt(t[0]) + " grad " + dt(t[1]) + " copy " + dt(t[2]), Size::Small, ltol,
                                false, lamb, t[0], t[1], t[2]));

  const char* stol = "1e-6 of the magnitudes (+ 3 ulps of a 16-bit param)";
  v.push_back(make_case<Sgd>("sgd_step", "n40000 torch SGD x3 steps", "param f32 grad f32", Size::Small, stol, false,
                             SgdSpec{40'000, SgdHyper{0.05f, 0.9f, 1e-2f}, 0.37f, 0.1f, 1.0f, 0.1f, 1.0f, true}, DType::F32, DType::F32));
  for (DType pt : kFloatTypes)
    for (DType gt : kFloatTypes)
      v.push_back(make_case<Sgd>("sgd_step", "n4097 x3 steps", "param " + dt(pt) + " grad " + dt(gt), Size::Small, stol, false,
                                 SgdSpec{4097, SgdHyper{0.05f, 0.9f, 1e-4f}, 0.5f, -2.0f, 2.0f, -4.0f, 4.0f, false}, pt, gt));
  v.push_back(make_case<Sgd>("sgd_step (no_decay)", "n40000 71 ranges x3 steps", "param f32 grad f32", Size::Small, stol,
                             false, SgdSpec{40'000, SgdHyper{0.05f, 0.9f, 0.5f}, 0.37f, 0.1f, 1.0f, 0.1f, 1.0f, true},
                             DType::F32, DType::F32, ranges));
}

}  // namespace mpb::opcheck
