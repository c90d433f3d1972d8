// Attention: masked_softmax_forward, softmax_backward (the unfused path's
// softmax), attention_forward / attention_backward (fused, flash-style), the
// packed ops that read Q/K/V from the QKV projection by stride and write
// merged heads, and the unfused composition (batched GEMM -> masked softmax
// -> batched GEMM and back) against the fused one.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/precision.h"
#include "opcheck/cases.h"
#include "ops/dropout.h"

namespace mpb::opcheck {
namespace {

// key_valid for B sequences of T keys: sequence 0 pads its last 3 keys,
// sequence 1 keys 2 and T - 2 (padding inside and across tiles).
std::vector<int32_t> padding_mask(int64_t B, int64_t T) {
  std::vector<int32_t> kv(static_cast<size_t>(B * T), 1);
  for (int64_t j = T - 3; j < T; ++j) kv[static_cast<size_t>(j)] = 0;
  if (B > 1) kv[static_cast<size_t>(T + 2)] = 0, kv[static_cast<size_t>(T + T - 2)] = 0;
  return kv;
}

constexpr float kSoftmaxScale = 0.35355339f;  // 1/sqrt(8)

// ---- masked softmax ---------------------------------------------------------------------------
// Forward vs float64: the logits carry u |scale s| (the product) and the max
// subtraction u |l - max| <= 2u max|l|; p's relative error is at most twice
// the logit error plus the fp32 sum (Tk u), exp_approx (4u) and the division:
// p (6 max|scale s| + Tk + 10) u, plus half an ulp of a 16-bit probs. Padded
// keys: exactly 0.
// Backward (from given probabilities, the exact ones rounded to probs' dtype)
// vs float64: the dot sum p dp carries (Tk + 1) u of its magnitudes, then 3
// roundings: scale p ((Tk + 2) u sum|p dp| + 4u (|dp| + |dot|)) + half an ulp.
// vs the CPU: the logits, the row max and every exponential are the same fp32
// operations on both; the row sum differs in order: 2 (Tk - 1) u relative,
// plus the division (2u) and 8u in case exp_approx differs by an ulp between
// compilers (ops/approx_math.h says it doesn't): |p| (2 Tk + 10) u + one ulp
// of a 16-bit probs. Backward: the dot differs by 2 (Tk - 1) u sum|p dp|, ds
// = scale p (dp - dot) moves by scale p times that plus 8u of its terms.
// In place (probs over scores, dscores over dprobs): the same bits.
class MaskedSoftmax : public Instance {
 public:
  MaskedSoftmax(int64_t B, int64_t H, int64_t Tq, int64_t Tk, DType st, DType pt, bool backward)
      : B_(B), H_(H), Tq_(Tq), Tk_(Tk), st_(st), pt_(pt), backward_(backward) {
    Gen g(seed_of("masked_softmax", B, H, Tq, Tk, st, pt, backward));
    kv_ = padding_mask(B, Tk);
    mask_ = attention_mask_value(st);
    s_ = g.nonzero(st, Shape{B, H, Tq, Tk}, 0.1f, 6.0f);
    // The exact probabilities (the forward's reference and the backward's input).
    const double mask_r = stored(st, mask_);
    pref_.resize(static_cast<size_t>(s_.numel()));
    ptol_.resize(pref_.size());
    for (int64_t r = 0; r < B * H * Tq; ++r) {
      const int64_t b = r / (H * Tq);
      std::vector<double> l(static_cast<size_t>(Tk));
      double mx = -INFINITY, lmax_abs = 0.0, sum = 0.0;
      for (int64_t j = 0; j < Tk; ++j) {
        const double sc = static_cast<double>(kSoftmaxScale) * s_.value(r * Tk + j);
        l[static_cast<size_t>(j)] = sc + (1 - kv_[static_cast<size_t>(b * Tk + j)]) * mask_r;
        mx = std::max(mx, l[static_cast<size_t>(j)]);
        lmax_abs = std::max(lmax_abs, std::fabs(sc));
      }
      for (int64_t j = 0; j < Tk; ++j) sum += std::exp(l[static_cast<size_t>(j)] - mx);
      for (int64_t j = 0; j < Tk; ++j) {
        const auto e = static_cast<size_t>(r * Tk + j);
        pref_[e] = std::exp(l[static_cast<size_t>(j)] - mx) / sum;
        ptol_[e] = kv_[static_cast<size_t>(b * Tk + j)] == 0 ? 0.0
                                                             : pref_[e] * (6 * lmax_abs + Tk + 10) * kU32 + half_ulp(pt, pref_[e]);
      }
    }
    if (backward) {
      probs_ = Host(pt, s_.shape);
      for (size_t e = 0; e < pref_.size(); ++e) probs_.set(static_cast<int64_t>(e), static_cast<float>(pref_[e]));
      dp_ = g.nonzero(pt, s_.shape);
    }
  }
  Outputs run(Device& dev) override {
    Outputs o;
    DeviceBuffer kv = put(dev, ints(kv_, Shape{B_, Tk_}));
    if (!backward_) {
      DeviceBuffer s = put(dev, s_), p = put(dev, filled(pt_, s_.shape, NAN));
      dev.masked_softmax_forward(p, s, kv, kSoftmaxScale, mask_);
      o.add("probs", dev, p);
      if (pt_ == st_) {
        dev.masked_softmax_forward(s, s, kv, kSoftmaxScale, mask_);
        o.add("in place", dev, s);
      }
      return o;
    }
    DeviceBuffer p = put(dev, probs_), dp = put(dev, dp_), ds = put(dev, filled(pt_, s_.shape, NAN));
    dev.softmax_backward(ds, p, dp, kSoftmaxScale);
    o.add("dscores", dev, ds);
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    if (!backward_) {
      std::vector<double> tol(ptol_);
      if (c.cuda())
        for (size_t e = 0; e < tol.size(); ++e) tol[e] += fwd_cpu_tol(pref_[e] + ptol_[e]);
      c.near("probs", got["probs"], pref_, tol);
      if (pt_ == st_) c.same_bits("in place vs out of place", got["in place"], got["probs"]);
      return;
    }
    std::vector<double> ref(pref_.size()), tol(ref.size());
    const std::vector<double> dots = row_dots();
    for (int64_t r = 0; r < B_ * H_ * Tq_; ++r)
      for (int64_t j = 0; j < Tk_; ++j) {
        const auto e = static_cast<size_t>(r * Tk_ + j);
        const double p = probs_.value(static_cast<int64_t>(e)), d = dp_.value(static_cast<int64_t>(e));
        const double dot = dots[static_cast<size_t>(2 * r)], mag = dots[static_cast<size_t>(2 * r + 1)];
        ref[e] = kSoftmaxScale * p * (d - dot);
        tol[e] = kSoftmaxScale * p * ((Tk_ + 2) * kU32 * mag + 4 * kU32 * (std::fabs(d) + std::fabs(dot))) + half_ulp(pt_, ref[e]);
        if (c.cuda()) tol[e] += bwd_cpu_tol(static_cast<int64_t>(e), std::fabs(ref[e]) + tol[e], dots);
      }
    c.near("dscores", got["dscores"], ref, tol);
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    if (!backward_) {
      for (const char* n : {"probs", "in place"})
        if (pt_ == st_ || std::string(n) == "probs")
          c.vs_cpu(n, got[n], cpu[n], [&](int64_t, double w) { return fwd_cpu_tol(w); });
      return;
    }
    const std::vector<double> dots = row_dots();
    c.vs_cpu("dscores", got["dscores"], cpu["dscores"], [&](int64_t i, double w) { return bwd_cpu_tol(i, w, dots); });
  }

 private:
  // Per row: the dot sum p dp and sum |p dp|, interleaved.
  std::vector<double> row_dots() const {
    std::vector<double> d(static_cast<size_t>(2 * B_ * H_ * Tq_), 0.0);
    for (int64_t r = 0; r < B_ * H_ * Tq_; ++r)
      for (int64_t j = 0; j < Tk_; ++j) {
        const double x = probs_.value(r * Tk_ + j) * dp_.value(r * Tk_ + j);
        d[static_cast<size_t>(2 * r)] += x;
        d[static_cast<size_t>(2 * r + 1)] += std::fabs(x);
      }
    return d;
  }
  double fwd_cpu_tol(double w) const { return std::fabs(w) * (2 * Tk_ + 10) * kU32 + store_ulp(pt_, w); }
  double bwd_cpu_tol(int64_t i, double w, const std::vector<double>& dots) const {
    const auto r = static_cast<size_t>(i / Tk_);
    const double p = std::fabs(probs_.value(i)), d = dp_.value(i);
    return kSoftmaxScale * p * (2 * Tk_ * kU32 * dots[2 * r + 1] + 8 * kU32 * (std::fabs(d) + std::fabs(dots[2 * r]))) +
           4 * kU32 * std::fabs(w) + store_ulp(pt_, w);
  }

  int64_t B_, H_, Tq_, Tk_;
  DType st_, pt_;
  bool backward_;
  std::vector<int32_t> kv_;
  float mask_;
  Host s_, probs_, dp_;
  std::vector<double> pref_, ptol_;
};

// ---- fused attention ----------------------------------------------------------------------------
// vs float64: attention_ref / attention_grad_ref's bounds (reference.cpp),
// which hold for any order of the fp32 sums and any key tiling, so on every
// backend; padded keys get exactly zero dk and dv (their probabilities are
// exactly 0). vs the CPU: each side within its bound of the exact values, so
// within the sum of the bounds of each other (the backward's bound depends on
// the stored O each side used).
// Unfused: S = Q K^T (fp32 scores), P = masked_softmax(S) (probs in q's
// dtype), O = P V and back, on the same device, within the sum of the fused
// and unfused bounds of the fused result. The unfused bounds add 2^-8
// relative on P and dS in bf16 (16-bit probs and dscores tensors) and, on a
// GPU, double the dot/sum terms for tensor-core GEMMs.
// Packed: attention_forward_packed / attention_backward_packed on the same
// inputs laid out as the QKV projection [B*T, 3C] and merged heads [B*T, C];
// their outputs, put back in [B,H,T,D] order on the host, get the fused
// checks above, and the bits of the [B,H,T,D] ops on the same device where
// both ran the backend's own kernel (the same code, other addresses).
// Dropout (drop_p > 0): the fused ops' mask is the dropout op's on the
// [B,H,T,T] probabilities (ops/dropout.h), so the float64 references apply it
// exactly (AttnInputs::drop; the product by 1/(1-p) is one more fp32
// rounding), and the unfused composition runs Device::dropout on its
// probabilities and their gradient with the same seed. Where cuDNN SDPA ran
// a dropout call it drew its own Philox mask: then lse (which dropout does
// not touch) and the padded keys' exact zeros are checked here, and the
// outputs by statistics in tests/gpu/test_cudnn_attention.cpp.
class Attention : public Instance {
 public:
  enum class Mode { Forward, Backward, Unfused, Packed };
  Attention(int64_t B, int64_t H, int64_t T, int64_t D, DType t, Mode mode, float drop_p = 0.0f)
      : t_(t), mode_(mode) {
    Gen g(seed_of("attention", B, H, T, D, t, drop_p));
    p_.B = B, p_.H = H, p_.T = T, p_.D = D;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    p_.scale = scale;
    mask_ = attention_mask_value(t);
    p_.mask = stored(t, mask_);
    p_.kv = padding_mask(B, T);
    const Shape s{B, H, T, D};
    // q, k up to 2 in magnitude: logits up to ~4 sqrt(D), a softmax far from uniform.
    q_ = g.nonzero(t, s, 0.1f, 2.0f), k_ = g.nonzero(t, s, 0.1f, 2.0f), v_ = g.nonzero(t, s), dout_ = g.nonzero(t, s);
    p_.q = q_.values(), p_.k = k_.values(), p_.v = v_.values(), p_.dout = dout_.values();
    if (drop_p > 0.0f) {
      drop_ = AttnDropout{drop_p, seed_of("attention dropout", B, H, T, D, t)};
      const double keep_scale = scalar::dropout_scale(drop_p);
      const uint32_t threshold = scalar::dropout_threshold(drop_p);
      p_.drop.resize(static_cast<size_t>(B * H * T * T));
      for (size_t e = 0; e < p_.drop.size(); ++e)
        p_.drop[e] = scalar::dropout_bits(drop_.seed, e) >= threshold ? keep_scale : 0.0;
    }
  }
  Outputs run(Device& dev) override {
    if (mode_ == Mode::Packed) return run_packed(dev);
    Outputs o;
    const Shape qs{p_.B, p_.H, p_.T, p_.D};
    DeviceBuffer q = put(dev, q_), k = put(dev, k_), v = put(dev, v_), dout = put(dev, dout_);
    DeviceBuffer kv = put(dev, ints(p_.kv, Shape{p_.B, p_.T}));
    DeviceBuffer out = put(dev, filled(t_, qs, NAN)), lse = put(dev, filled(DType::F32, Shape{p_.B, p_.H, p_.T}, NAN));
    const int64_t sdpa = sdpa_calls(dev);
    dev.attention_forward(out, lse, q, k, v, kv, static_cast<float>(p_.scale), mask_, drop_);
    // What the device under test ran; run_case runs the CPU reference after
    // it, which must not clear the flags check_vs_cpu reads.
    const bool under_test = dev.info().kind != DeviceKind::Cpu;
    if (under_test) sdpa_fwd_ = sdpa_calls(dev) > sdpa;
    o.add("out", dev, out), o.add("lse", dev, lse);
    if (mode_ == Mode::Forward) return o;
    DeviceBuffer dq = put(dev, filled(t_, qs, NAN)), dk = put(dev, filled(t_, qs, NAN)), dv = put(dev, filled(t_, qs, NAN));
    const int64_t sdpa_b = sdpa_calls(dev);
    dev.attention_backward(dq, dk, dv, dout, out, lse, q, k, v, kv, static_cast<float>(p_.scale), mask_, drop_);
    if (under_test) sdpa_bwd_ = sdpa_calls(dev) > sdpa_b;
    o.add("dq", dev, dq), o.add("dk", dev, dk), o.add("dv", dev, dv);
    if (mode_ == Mode::Unfused) run_unfused(dev, o, q, k, v, dout, kv);
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    if (cudnn_dropout()) {
      check_cudnn_dropout(c, got);
      return;
    }
    if (mode_ == Mode::Unfused) {
      check_unfused(c, got, fused_ref(sdpa_fwd_));
      return;
    }
    const AttnRef f = fused_ref(sdpa_fwd_);
    c.near("out", got["out"], f.O, f.tol_o);
    c.near("lse", got["lse"], f.lse, f.tol_lse);
    if (mode_ == Mode::Forward) return;
    if (mode_ == Mode::Packed) check_packed_vs_heads(c, got);
    const AttnGradRef g = fused_grad_ref(f, got["out"].values(), sdpa_bwd_);
    c.near("dq", got["dq"], g.dq, g.tol_dq);
    c.near("dk", got["dk"], g.dk, g.tol_dk);
    c.near("dv", got["dv"], g.dv, g.tol_dv);
    c.expect(padded_keys_zero(got["dk"], got["dv"]), "padded keys must get exactly zero dk and dv");
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    if (mode_ == Mode::Unfused) return;  // the fused results are compared by the forward/backward cases
    if (cudnn_dropout()) {  // another mask: only lse is the CPU's
      const AttnRef f = fused_ref(false), fg = fused_ref(true);
      c.vs_cpu("lse", got["lse"], cpu["lse"], [&](int64_t i, double) {
        return fg.tol_lse[static_cast<size_t>(i)] + f.tol_lse[static_cast<size_t>(i)];
      });
      return;
    }
    // f: the CPU's bounds (the kernel's); fg: the device's (cuDNN's when it ran).
    const AttnRef f = fused_ref(false), fg = sdpa_fwd_ ? fused_ref(true) : f;
    const auto sum = [](const std::vector<double>& a, const std::vector<double>& b) {
      return [&a, &b](int64_t i, double) { return a[static_cast<size_t>(i)] + b[static_cast<size_t>(i)]; };
    };
    c.vs_cpu("out", got["out"], cpu["out"], sum(fg.tol_o, f.tol_o));
    c.vs_cpu("lse", got["lse"], cpu["lse"], sum(fg.tol_lse, f.tol_lse));
    if (mode_ == Mode::Forward) return;
    const AttnGradRef gg = fused_grad_ref(fg, got["out"].values(), sdpa_bwd_);
    const AttnGradRef gc = fused_grad_ref(f, cpu["out"].values(), false);
    c.vs_cpu("dq", got["dq"], cpu["dq"], sum(gg.tol_dq, gc.tol_dq));
    c.vs_cpu("dk", got["dk"], cpu["dk"], sum(gg.tol_dk, gc.tol_dk));
    c.vs_cpu("dv", got["dv"], cpu["dv"], sum(gg.tol_dv, gc.tol_dv));
  }

 private:
  // cuDNN ran a call with dropout, so with its own (Philox) mask.
  bool cudnn_dropout() const { return drop_.p > 0.0f && (sdpa_fwd_ || sdpa_bwd_); }
  // What holds whatever the mask: lse (dropout acts after it) and the padded
  // keys' exact zeros.
  void check_cudnn_dropout(Check& c, const Outputs& got) {
    c.note("cuDNN SDPA ran with dropout: its Philox mask is not the CPU's, so lse and the padded keys are checked "
           "here and the outputs by statistics (tests/gpu/test_cudnn_attention.cpp)");
    const AttnRef f = fused_ref(true);
    c.near("lse", got["lse"], f.lse, f.tol_lse);
    if (mode_ == Mode::Forward) return;
    c.expect(padded_keys_zero(got["dk"], got["dv"]), "padded keys must get exactly zero dk and dv");
  }
  bool padded_keys_zero(const Host& dk, const Host& dv) const {
    bool zero = true;
    for (int64_t bh = 0; bh < p_.B * p_.H; ++bh)
      for (int64_t j = 0; j < p_.T; ++j)
        if (!p_.kv[static_cast<size_t>((bh / p_.H) * p_.T + j)])
          for (int64_t d = 0; d < p_.D; ++d) {
            const auto e = static_cast<int64_t>(p_.at(bh, j, d));
            zero = zero && dk.value(e) == 0.0 && dv.value(e) == 0.0;
          }
    return zero;
  }
  // Calls cuDNN ran, in either bias form ("cudnn_sdpa", "cudnn_sdpa_bias_per_query").
  static int64_t sdpa_calls(const Device& dev) {
    int64_t n = 0;
    for (const auto& [impl, calls] : dev.counters().attention_impls)
      if (impl.rfind("cudnn_sdpa", 0) == 0) n += calls;
    return n;
  }
  // cuDNN SDPA (the CUDA backend in fp16/bf16) rounds P to the I/O dtype
  // before O = P V and dS before dQ/dK (tensor-core operands): the unfused
  // path's extra relative error on P and dS (the I/O dtype's unit roundoff)
  // and the GEMM factor 2 for its tensor-core sums.
  double sdpa_extra() const { return t_ == DType::BF16 ? 0x1p-8 : t_ == DType::F16 ? 0x1p-11 : 0.0; }
  AttnRef fused_ref(bool sdpa) const { return attention_ref(p_, sdpa ? sdpa_extra() : 0.0, t_, sdpa ? 2.0 : 1.0); }
  AttnGradRef fused_grad_ref(const AttnRef& f, const std::vector<double>& out, bool sdpa) const {
    return attention_grad_ref(p_, f, d_err_fused(p_, f, out), sdpa ? sdpa_extra() : 0.0, t_, sdpa ? 2.0 : 1.0);
  }

  // Element e of a [B,H,T,D] operand in part `part` of a [B,T,parts,H,D] buffer.
  int64_t packed_index(int64_t e, int parts, int part) const {
    const int64_t d = e % p_.D, t = (e / p_.D) % p_.T, h = (e / (p_.D * p_.T)) % p_.H, b = e / (p_.D * p_.T * p_.H);
    return ((b * p_.T + t) * parts + part) * p_.H * p_.D + h * p_.D + d;
  }
  // [B,H,T,D] tensors into parts of one [B*T, parts*C] host tensor, and one part back.
  Host pack(std::initializer_list<const Host*> heads) const {
    const int parts = static_cast<int>(heads.size());
    Host h(t_, Shape{p_.B * p_.T, parts * p_.H * p_.D});
    int part = 0;
    for (const Host* x : heads) {
      for (int64_t e = 0; e < x->numel(); ++e) h.set(packed_index(e, parts, part), x->get(e));
      ++part;
    }
    return h;
  }
  Host unpack(const Host& packed, int parts, int part) const {
    Host h(packed.dtype, Shape{p_.B, p_.H, p_.T, p_.D});
    for (int64_t e = 0; e < h.numel(); ++e) h.set(e, packed.get(packed_index(e, parts, part)));
    return h;
  }

  // The packed ops, outputs in [B,H,T,D] order ("out", "lse", "dq", "dk",
  // "dv"), then the [B,H,T,D] ops on the same inputs ("heads ...").
  Outputs run_packed(Device& dev) {
    Outputs o;
    const int64_t N = p_.B * p_.T, C = p_.H * p_.D;
    const Shape ls{p_.B, p_.H, p_.T};
    const float scale = static_cast<float>(p_.scale);
    DeviceBuffer qkv = put(dev, pack({&q_, &k_, &v_})), dout = put(dev, pack({&dout_}));
    DeviceBuffer kv = put(dev, ints(p_.kv, Shape{p_.B, p_.T}));
    DeviceBuffer out = put(dev, filled(t_, Shape{N, C}, NAN)), lse = put(dev, filled(DType::F32, ls, NAN));
    DeviceBuffer dqkv = put(dev, filled(t_, Shape{N, 3 * C}, NAN));
    const bool under_test = dev.info().kind != DeviceKind::Cpu;
    const int64_t calls0 = sdpa_calls(dev);
    dev.attention_forward_packed(out, lse, qkv, kv, scale, mask_, drop_);
    const int64_t calls1 = sdpa_calls(dev);
    dev.attention_backward_packed(dqkv, dout, out, lse, qkv, kv, scale, mask_, drop_);
    if (under_test) sdpa_fwd_ = calls1 > calls0, sdpa_bwd_ = sdpa_calls(dev) > calls1;
    const Host dqkv_h = fetch(dev, dqkv);
    o.add("out", unpack(fetch(dev, out), 1, 0)), o.add("lse", dev, lse);
    o.add("dq", unpack(dqkv_h, 3, 0)), o.add("dk", unpack(dqkv_h, 3, 1)), o.add("dv", unpack(dqkv_h, 3, 2));

    const Shape qs{p_.B, p_.H, p_.T, p_.D};
    DeviceBuffer q = put(dev, q_), k = put(dev, k_), v = put(dev, v_), douth = put(dev, dout_);
    DeviceBuffer outh = put(dev, filled(t_, qs, NAN)), lseh = put(dev, filled(DType::F32, ls, NAN));
    DeviceBuffer dq = put(dev, filled(t_, qs, NAN)), dk = put(dev, filled(t_, qs, NAN)), dv = put(dev, filled(t_, qs, NAN));
    const int64_t calls2 = sdpa_calls(dev);
    dev.attention_forward(outh, lseh, q, k, v, kv, scale, mask_, drop_);
    dev.attention_backward(dq, dk, dv, douth, outh, lseh, q, k, v, kv, scale, mask_, drop_);
    if (under_test) heads_sdpa_ = sdpa_calls(dev) - calls2;
    o.add("heads out", dev, outh), o.add("heads lse", dev, lseh);
    o.add("heads dq", dev, dq), o.add("heads dk", dev, dk), o.add("heads dv", dev, dv);
    return o;
  }
  void check_packed_vs_heads(Check& c, const Outputs& got) {
    const int packed_sdpa = int{sdpa_fwd_} + int{sdpa_bwd_};
    if (packed_sdpa != heads_sdpa_)
      c.note("cuDNN SDPA ran " + std::to_string(packed_sdpa) + " of the packed calls and " +
             std::to_string(heads_sdpa_) + " of the [B,H,T,D] ones: the rest ran the hand-written kernel");
    if (packed_sdpa != 0 || heads_sdpa_ != 0) return;  // two library calls: each within the bounds, no bits promised
    for (const char* n : {"out", "lse", "dq", "dk", "dv"})
      c.same_bits(std::string("packed vs [B,H,T,D] ") + n, got[n], got[std::string("heads ") + n]);
  }

  void run_unfused(Device& dev, Outputs& o, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                   const Tensor& kv) {
    const int64_t T = p_.T, D = p_.D, BH = p_.B * p_.H;
    const GemmCompute compute = t_ == DType::F32 ? GemmCompute::F32 : t_ == DType::F16 ? GemmCompute::F16 : GemmCompute::BF16;
    const Shape qs{p_.B, p_.H, T, D}, ss{p_.B, p_.H, T, T};
    auto gemm = [&](const Tensor& a, const Tensor& b, const Tensor& c, int64_t m, int64_t n, int64_t kk, bool ta, bool tb) {
      GemmArgs g;
      g.m = m, g.n = n, g.k = kk, g.trans_a = ta, g.trans_b = tb;
      g.a = a, g.b = b, g.c = c, g.compute = compute;
      g.batch = BH, g.stride_a = m * kk, g.stride_b = kk * n, g.stride_c = m * n;
      dev.gemm(g);
    };
    DeviceBuffer scores = dev.alloc(ss, DType::F32, MemCategory::Workspace), probs = dev.alloc(ss, t_, MemCategory::Workspace);
    DeviceBuffer out = dev.alloc(qs, t_, MemCategory::Activations);
    gemm(q, k, scores, T, T, D, false, true);
    dev.masked_softmax_forward(probs, scores, kv, static_cast<float>(p_.scale), mask_);
    // Dropout as models/bert.cpp's unfused path runs it: the probabilities,
    // then their gradient, through Device::dropout with the fused ops' seed.
    DeviceBuffer pd = dev.alloc(ss, t_, MemCategory::Workspace);
    const Tensor pused = drop_.p > 0.0f ? (dev.dropout(pd, probs, drop_.p, drop_.seed), pd.tensor()) : probs.tensor();
    gemm(pused, v, out, T, D, T, false, false);
    DeviceBuffer dprobs = dev.alloc(ss, DType::F32, MemCategory::Workspace), dscores = dev.alloc(ss, t_, MemCategory::Workspace);
    gemm(dout, v, dprobs, T, T, D, false, true);
    if (drop_.p > 0.0f) dev.dropout(dprobs, dprobs, drop_.p, drop_.seed);
    dev.softmax_backward(dscores, probs, dprobs, static_cast<float>(p_.scale));
    DeviceBuffer dq = dev.alloc(qs, t_, MemCategory::Activations), dk = dev.alloc(qs, t_, MemCategory::Activations);
    DeviceBuffer dv = dev.alloc(qs, t_, MemCategory::Activations);
    gemm(dscores, k, dq, T, D, T, false, false);  // dQ = dS K
    gemm(dscores, q, dk, T, D, T, true, false);   // dK = dS^T Q
    gemm(pused, dout, dv, T, D, T, true, false);  // dV = drop(P)^T dO
    o.add("unfused out", dev, out), o.add("unfused dq", dev, dq), o.add("unfused dk", dev, dk), o.add("unfused dv", dev, dv);
  }
  void check_unfused(Check& c, const Outputs& got, const AttnRef& f) {
    // A 16-bit probs tensor rounds P once, and the dropped copy once more.
    const double extra = (t_ == DType::F32 ? 0.0 : 0x1p-8) * (drop_.p > 0.0f ? 2 : 1);
    const double gemm = c.cuda() && t_ != DType::F32 ? 2.0 : 1.0;
    const AttnRef fu = attention_ref(p_, extra, t_, gemm);
    const AttnGradRef g = fused_grad_ref(f, got["out"].values(), sdpa_bwd_);
    const AttnGradRef gu = attention_grad_ref(p_, fu, d_err_unfused(p_, fu, gemm), extra, t_, gemm);
    const auto sum = [](const std::vector<double>& a, const std::vector<double>& b) {
      std::vector<double> s(a.size());
      for (size_t e = 0; e < a.size(); ++e) s[e] = a[e] + b[e];
      return s;
    };
    c.near("unfused vs fused out", got["unfused out"], got["out"].values(), sum(f.tol_o, fu.tol_o));
    c.near("unfused vs fused dq", got["unfused dq"], got["dq"].values(), sum(g.tol_dq, gu.tol_dq));
    c.near("unfused vs fused dk", got["unfused dk"], got["dk"].values(), sum(g.tol_dk, gu.tol_dk));
    c.near("unfused vs fused dv", got["unfused dv"], got["dv"].values(), sum(g.tol_dv, gu.tol_dv));
  }

  DType t_;
  Mode mode_;
  bool sdpa_fwd_ = false, sdpa_bwd_ = false;  // cuDNN SDPA ran the call (DeviceCounters::attention_impls)
  int heads_sdpa_ = 0;                        // Packed: of the two [B,H,T,D] calls, those cuDNN ran
  AttnDropout drop_;                          // p = 0: none
  float mask_;
  AttnInputs p_;
  Host q_, k_, v_, dout_;
};

}  // namespace

void add_attention_cases(std::vector<OpCase>& v) {
  const int64_t B = 2, H = 3, Tq = 7;
  for (int64_t Tk : {9, 67, 130})
    for (DType st : kFloatTypes)
      for (DType pt : {st, DType::F32}) {
        const std::string shape = "B2 H3 Tq7 Tk" + std::to_string(Tk) + " padded keys";
        const std::string types = "scores " + dt(st) + " probs " + dt(pt);
        v.push_back(make_case<MaskedSoftmax>("masked_softmax_forward", shape, types, Size::Small,
                                             "p (6 max|scale s| + Tk + 10) u (+ half an ulp); padded keys exactly 0", false,
                                             B, H, Tq, Tk, st, pt, false));
        v.push_back(make_case<MaskedSoftmax>("softmax_backward", shape, "probs " + dt(pt), Size::Small,
                                             "scale p ((Tk + 2) u sum|p dp| + 4u (|dp| + |dot|)) (+ half an ulp)", false,
                                             B, H, Tq, Tk, st, pt, true));
        if (st == DType::F32) break;  // probs f32 == scores f32
      }
  v.push_back(make_case<MaskedSoftmax>("masked_softmax_forward", "BERT B1 H12 T128", "scores bf16 probs bf16", Size::Bert,
                                       "p (6 max|scale s| + Tk + 10) u + half an ulp", false, int64_t{1}, int64_t{12},
                                       int64_t{128}, int64_t{128}, DType::BF16, DType::BF16, false));
  v.push_back(make_case<MaskedSoftmax>("softmax_backward", "BERT B1 H12 T128", "probs bf16", Size::Bert,
                                       "scale p ((Tk + 2) u sum|p dp| + 4u (|dp| + |dot|)) + half an ulp", false,
                                       int64_t{1}, int64_t{12}, int64_t{128}, int64_t{128}, DType::BF16, DType::BF16, true));
  struct Dims {
    int64_t B, H, T, D;
    Size size;
  };
  // T = 67: several key tiles (64 on the CPU, 32 on the GPU), the last partial;
  // T = 5: one partial tile; D = 40: not a multiple of the GPU's 8 threads per
  // row; D = 128: the GPU kernel's maximum.
  const Dims dims[] = {{2, 2, 67, 16, Size::Small}, {2, 1, 5, 40, Size::Small}, {1, 2, 33, 64, Size::Small},
                       {2, 1, 40, 128, Size::Small}, {1, 12, 128, 64, Size::Bert}};
  const char* ftol = "out (eps_p + (T + 4) u) sum P|v|, lse 3 dl + eps_p + 4u(|lse| + 1) (attention_ref); where "
                     "cuDNN SDPA ran: + the dtype's u on P, GEMM factor 2";
  const char* btol = "attention_grad_ref's bound (dS error through the T-term sums); where cuDNN SDPA ran: + the "
                     "dtype's u on P and dS, GEMM factor 2; padded keys exactly 0";
  for (const Dims& d : dims)
    for (DType t : kFloatTypes) {
      if (d.size == Size::Bert && t == DType::F16) continue;
      const std::string shape = std::string(d.size == Size::Bert ? "BERT " : "") + "B" + std::to_string(d.B) + " H" +
                                std::to_string(d.H) + " T" + std::to_string(d.T) + " D" + std::to_string(d.D);
      v.push_back(make_case<Attention>("attention_forward", shape, dt(t), d.size, ftol, false, d.B, d.H, d.T, d.D, t,
                                       Attention::Mode::Forward));
      v.push_back(make_case<Attention>("attention_backward", shape, dt(t), d.size, btol, false, d.B, d.H, d.T, d.D, t,
                                       Attention::Mode::Backward));
    }
  // Packed: T = 67 over several key tiles, D = 40 (its 16-byte rows and
  // strides only where C is a multiple of 8 elements), and BERT's shape.
  const Dims packed[] = {{2, 2, 67, 16, Size::Small}, {2, 3, 9, 40, Size::Small}, {2, 12, 128, 64, Size::Bert}};
  for (const Dims& d : packed)
    for (DType t : kFloatTypes) {
      if (d.size == Size::Bert && t == DType::F16) continue;
      const std::string shape = std::string(d.size == Size::Bert ? "BERT " : "") + "B" + std::to_string(d.B) + " H" +
                                std::to_string(d.H) + " T" + std::to_string(d.T) + " D" + std::to_string(d.D);
      v.push_back(make_case<Attention>("attention_packed (forward + backward)", shape, dt(t), d.size,
                                       std::string(btol) + "; the [B,H,T,D] ops' bits where both ran the backend's kernel",
                                       false, d.B, d.H, d.T, d.D, t, Attention::Mode::Packed));
    }
  // Dropout 0.1 on the probabilities: the packed ops at a small and BERT's
  // shape, and the unfused composition with Device::dropout against them.
  const char* dtol = "the bounds above with the dropout mask applied exactly (one more fp32 rounding); where cuDNN "
                     "ran (its own mask): lse and the padded keys' zeros";
  for (const Dims& d : {packed[0], packed[2]})
    for (DType t : kFloatTypes) {
      if (d.size == Size::Bert && t == DType::F16) continue;
      const std::string shape = std::string(d.size == Size::Bert ? "BERT " : "") + "B" + std::to_string(d.B) + " H" +
                                std::to_string(d.H) + " T" + std::to_string(d.T) + " D" + std::to_string(d.D) +
                                " dropout 0.1";
      v.push_back(make_case<Attention>("attention_packed (forward + backward)", shape, dt(t), d.size, dtol, false, d.B,
                                       d.H, d.T, d.D, t, Attention::Mode::Packed, 0.1f));
    }
  for (DType t : {DType::F32, DType::BF16})
    v.push_back(make_case<Attention>("attention (unfused vs fused)", "B2 H2 T67 D16 dropout 0.1", dt(t), Size::Small,
                                     "the sum of the fused and unfused bounds, the same dropout mask on both", false,
                                     int64_t{2}, int64_t{2}, int64_t{67}, int64_t{16}, t, Attention::Mode::Unfused,
                                     0.1f));
  for (DType t : {DType::F32, DType::BF16})
    v.push_back(make_case<Attention>("attention (unfused vs fused)", "B2 H2 T67 D16", dt(t), Size::Small,
                                     "the sum of the fused and unfused bounds (+2^-8 on P, dS in bf16)", false,
                                     int64_t{2}, int64_t{2}, int64_t{67}, int64_t{16}, t, Attention::Mode::Unfused));
}

}  // namespace mpb::opcheck
