// Losses and reductions: softmax_xent_forward / backward / fused,
// count_correct, stats, exponent_histogram.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "opcheck/cases.h"

namespace mpb::opcheck {
namespace {

// ---- softmax cross-entropy --------------------------------------------------------------------
// vs float64: xent_ref's bounds (reference.cpp): the loss per row
// (C + 4 + 2 spread) u + 3u |row loss| + 2u log(sum), a probability
// (C + 4 + spread) u relative. dlogits = (p - onehot) * grad_scale: from given
// probabilities two fp32 roundings (2u relative), end to end the probability's
// bound times grad_scale on top; a 16-bit dlogits half an ulp more. Ignored
// rows (label < 0): no loss, dlogits exactly 0, probabilities still written.
//
// vs the CPU: the exponentials are the same function on both (the bound
// still allows 2 ulp each, <= 6 u together), each side's fp32 sum of C terms
// in its own order ((C - 1) u each, plus the exp errors carried in: 6u) and
// the reciprocal and product (2u each side): (2C + 14) u, rounded up to
// rel = (2C + 16) u on a probability and on a row loss (which moves by the
// sum's relative error plus a few ulp of itself: rel (rows + |loss|)).
// dlogits: the probability's difference times grad_scale (p - 1 cancels, so
// absolute in p) plus 2 fp32 ulps and one ulp of a 16-bit dlogits.
enum class Labels { Random, Ignored };

struct XentSpec {
  int64_t B, C;
  DType lt;
  std::vector<DType> dts;
  std::vector<float> scales;
  float lo, hi;  // logits: magnitude in [lo, hi] (lo > 0) or uniform [-hi, hi] (lo == 0)
  Labels labels;
};

class Xent : public Instance {
 public:
  enum class Op { Forward, Backward, Fused };
  Xent(Op op, XentSpec s) : op_(op), s_(std::move(s)) {
    Gen g(seed_of("xent", s_.B, s_.C, s_.lt));
    logits_ = s_.lo > 0 ? g.nonzero(s_.lt, Shape{s_.B, s_.C}, s_.lo, s_.hi) : g.uniform(s_.lt, Shape{s_.B, s_.C}, -s_.hi, s_.hi);
    labels_.resize(static_cast<size_t>(s_.B));
    for (int64_t r = 0; r < s_.B; ++r) {
      int32_t y = g.below(static_cast<int32_t>(s_.C));
      if (s_.labels == Labels::Ignored && r % 3 == 0) y = -100;  // PyTorch's ignore_index
      if (s_.labels == Labels::Ignored && r % 7 == 0) y = -1;
      labels_[static_cast<size_t>(r)] = y;
      real_ += y >= 0;
    }
    ref_ = xent_ref(logits_.values(), labels_, s_.B, s_.C);
    rel_ = static_cast<double>(2 * s_.C + 16) * kU32;
  }

  Outputs run(Device& dev) override {
    Outputs o;
    DeviceBuffer x = put(dev, logits_), y = put(dev, ints(labels_, Shape{s_.B}));
    const Shape sh{s_.B, s_.C};
    if (op_ == Op::Backward) {  // from the exact probabilities, as fp32 holds them
      Host p(DType::F32, sh);
      for (size_t i = 0; i < ref_.probs.size(); ++i) p.set(static_cast<int64_t>(i), static_cast<float>(ref_.probs[i]));
      DeviceBuffer probs = put(dev, p);
      for (DType d : s_.dts)
        for (float gs : s_.scales) {
          DeviceBuffer dl = put(dev, filled(d, sh, NAN));
          dev.softmax_xent_backward(dl, probs, y, gs);
          o.add(dname(d, gs), dev, dl);
        }
      return o;
    }
    DeviceBuffer probs = put(dev, filled(DType::F32, sh, NAN));
    o.scalar("loss", dev.softmax_xent_forward(probs, x, y));
    o.add("probs", dev, probs);
    if (op_ == Op::Forward) return o;
    {  // deferred: a forward and a fused call add to the device's loss sum, read once, then zero
      DeviceBuffer p2 = put(dev, filled(DType::F32, sh, NAN)), d2 = put(dev, filled(s_.dts.front(), sh, NAN));
      dev.softmax_xent_forward_deferred(p2, x, y);
      dev.softmax_xent_fused_deferred(d2, x, y, s_.scales.front());
      o.scalar("deferred sum of 2 calls", dev.read_loss_sum());
      o.scalar("deferred sum read again", dev.read_loss_sum());
    }
    for (DType d : s_.dts)
      for (float gs : s_.scales) {
        DeviceBuffer fused = put(dev, filled(d, sh, NAN)), unfused = put(dev, filled(d, sh, NAN));
        o.scalar("loss " + dname(d, gs), dev.softmax_xent_fused(fused, x, y, gs));
        o.add(dname(d, gs), dev, fused);
        dev.softmax_xent_backward(unfused, probs, y, gs);
        o.add("unfused " + dname(d, gs), dev, unfused);
        if (d == s_.lt) {  // in place: dlogits over the logits
          DeviceBuffer inplace = put(dev, logits_);
          o.scalar("in place loss " + dname(d, gs), dev.softmax_xent_fused(inplace, inplace, y, gs));
          o.add("in place " + dname(d, gs), dev, inplace);
        }
      }
    return o;
  }

  void check(Check& c, Device&, const Outputs& got) override {
    if (op_ != Op::Backward) {
      const double loss = got.scalar("loss");
      c.scalar("loss", loss, ref_.loss, ref_.loss_tol + (c.cuda() ? loss_cpu_tol(std::fabs(ref_.loss) + ref_.loss_tol) : 0.0));
      c.near("probs", got["probs"], ref_.probs, [&](int64_t i) {
        const double t = ref_.probs_tol[static_cast<size_t>(i)], w = ref_.probs[static_cast<size_t>(i)] + t;
        return t + (c.cuda() ? rel_ * w + ulp(DType::F32, w) : 0.0);
      });
    }
    if (op_ == Op::Forward) return;
    if (op_ == Op::Fused) {
      // The device's sum adds in call order (0 + loss + loss): exactly 2 loss.
      c.expect(got.scalar("deferred sum of 2 calls") == 2.0 * got.scalar("loss"),
               "the deferred loss sum of 2 calls is not twice the returned loss");
      c.expect(got.scalar("deferred sum read again") == 0.0, "read_loss_sum did not zero the sum");
    }
    for (DType d : s_.dts)
      for (float gs : s_.scales) {
        const std::string n = dname(d, gs);
        std::vector<double> want(ref_.probs.size()), tol(want.size(), 0.0);
        for (int64_t r = 0; r < s_.B; ++r) {
          const int32_t lab = labels_[static_cast<size_t>(r)];
          for (int64_t k = 0; k < s_.C; ++k) {
            const auto i = static_cast<size_t>(r * s_.C + k);
            if (lab < 0) continue;  // ignored row: exactly 0
            const double p = op_ == Op::Backward ? static_cast<double>(static_cast<float>(ref_.probs[i])) : ref_.probs[i];
            want[i] = (p - (k == lab ? 1.0 : 0.0)) * gs;
            double t = 2.0000001 * kU32 * std::fabs(want[i]);
            if (op_ == Op::Fused) t += ref_.probs_tol[i] * gs;
            if (c.cuda()) t += dl_cpu_tol(ref_.probs[i] + ref_.probs_tol[i], std::fabs(want[i]) + t, d, gs);
            tol[i] = t + (d == DType::F32 ? 0.0 : half_ulp(d, std::fabs(want[i]) + t));
          }
        }
        c.near(n, got[n], want, tol);
        if (op_ == Op::Fused) {
          // Fused and unfused evaluate the same per-element expressions: the same bits and loss.
          c.same_bits("fused vs unfused " + n, got[n], got["unfused " + n]);
          c.expect(got.scalar("loss " + n) == got.scalar("loss"), "the fused loss differs from the unfused one");
          if (d == s_.lt) {
            c.same_bits("in place vs out of place " + n, got["in place " + n], got[n]);
            c.expect(got.scalar("in place loss " + n) == got.scalar("loss " + n), "in place: another loss");
          }
        }
      }
  }

  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    for (const auto& [name, v] : got.scalars) {
      if (name.rfind("deferred", 0) == 0) continue;  // held exactly to this device's own loss in check()
      c.vs_cpu_scalar(name, v, cpu.scalar(name), loss_cpu_tol(cpu.scalar(name)));
    }
    for (const auto& [name, h] : got.tensors) {
      if (name == "probs") {
        c.vs_cpu(name, h, cpu[name], [&](int64_t, double w) { return rel_ * std::fabs(w) + ulp(DType::F32, w); });
        continue;
      }
      const DType d = h.dtype;
      const float gs = scale_of(name);
      c.vs_cpu(name, h, cpu[name], [&](int64_t i, double w) { return dl_cpu_tol(ref_.probs[static_cast<size_t>(i)], w, d, gs); });
    }
  }

 private:
  static std::string dname(DType d, float gs) { return "dlogits " + dt(d) + " x" + std::to_string(gs); }
  float scale_of(const std::string& name) const {
    for (DType d : s_.dts)
      for (float gs : s_.scales)
        if (name.find(dname(d, gs)) != std::string::npos) return gs;
    return 1.0f;
  }
  double loss_cpu_tol(double loss) const { return rel_ * (static_cast<double>(real_) + std::fabs(loss)) + 1e-12; }
  double dl_cpu_tol(double p, double w, DType d, float gs) const {
    return (rel_ * p + ulp(DType::F32, p)) * gs + 2 * ulp(DType::F32, w) + store_ulp(d, w);
  }

  Op op_;
  XentSpec s_;
  Host logits_;
  std::vector<int32_t> labels_;
  int64_t real_ = 0;
  XentRef ref_;
  double rel_ = 0;
};

// ---- count_correct: rows whose argmax (lowest index on ties) is the label -----------------------
// Exact on every backend: a comparison per element. The reference: the
// first index whose value no later one exceeds (NaN compares false, so a NaN
// in column 0 wins, one elsewhere is passed over); label < 0 never counts.
class CountCorrect : public Instance {
 public:
  enum class Kind { HandMade, Random, CoarseTies, Ignored };
  CountCorrect(Kind kind, DType t) {
    Gen g(seed_of("count_correct", kind, t));
    int64_t B = 0, C = 0;
    std::vector<float> v;
    switch (kind) {
      case Kind::HandMade:
        B = 7, C = 6;
        v = {0.1f, 0.2f, 0.3f, 0.9f,  0.4f, 0.5f, 0.1f, 0.8f, 0.3f, 0.2f,   0.8f, 0.5f, 0.1f, 0.8f,
             0.3f, 0.2f, 0.8f, 0.5f,  0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f,   -3.f, -2.f, -4.f, -5.f,
             -6.f, -1.f, -3.f, -2.f,  -1.f, -5.f, -6.f, -7.f, 0.1f, 1.0f,   0.2f, 1.001f, 0.3f, 0.4f};
        labels_ = {3, 1, 4, 0, 5, 0, 3};  // the last row: argmax 3 in fp32, a tie (-> 1) in bf16
        expected_ = t == DType::F32 ? 5 : 4;  // rows 0, 1, 3, 4 and (fp32 only) 6
        break;
      case Kind::Random: B = 2000, C = 10; break;
      case Kind::CoarseTies: B = 300, C = 37; break;
      case Kind::Ignored: B = 40, C = 37; break;
    }
    x_ = Host(t, Shape{B, C});
    std::uniform_int_distribution<int> coarse(-3, 3);
    for (int64_t i = 0; i < B * C; ++i) {
      if (kind == Kind::HandMade) x_.set(i, v[static_cast<size_t>(i)]);
      else if (kind == Kind::CoarseTies) x_.set(i, static_cast<float>(coarse(g.engine())));
      else x_.set(i, g.nonzero(t, Shape{1}).get(0));
    }
    if (kind == Kind::CoarseTies) {  // some rows with NaN and +-inf
      x_.set(5 * C + 0, NAN);  // NaN first: argmax 0
      x_.set(6 * C + 7, NAN);  // NaN elsewhere: passed over
      x_.set(7 * C + 9, INFINITY);
      for (int64_t k = 0; k < C; ++k) x_.set(8 * C + k, -INFINITY);
    }
    if (kind != Kind::HandMade) {
      labels_.resize(static_cast<size_t>(B));
      for (int64_t r = 0; r < B; ++r) {  // about half the rows right
        labels_[static_cast<size_t>(r)] = r % 2 == 0 ? static_cast<int32_t>(argmax(r)) : g.below(static_cast<int32_t>(C));
        if (kind == Kind::Ignored && r % 3 == 0) labels_[static_cast<size_t>(r)] = -100;
        if (kind == Kind::Ignored && r % 7 == 0) labels_[static_cast<size_t>(r)] = -1;
      }
    }
  }
  Outputs run(Device& dev) override {
    Outputs o;
    DeviceBuffer x = put(dev, x_), y = put(dev, ints(labels_, Shape{x_.shape[0]}));
    o.scalar("count", static_cast<double>(dev.count_correct(x, y)));
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    int64_t want = 0;
    for (int64_t r = 0; r < x_.shape[0]; ++r) want += labels_[static_cast<size_t>(r)] == argmax(r);
    c.scalar("count", got.scalar("count"), static_cast<double>(want), 0.0);
    if (expected_ >= 0) c.expect(want == expected_, "the hand-made reference count changed");
  }

 private:
  int64_t argmax(int64_t r) const {
    const int64_t C = x_.shape[1];
    int64_t best = 0;
    for (int64_t k = 1; k < C; ++k)
      if (x_.value(r * C + k) > x_.value(r * C + best)) best = k;
    return best;
  }
  Host x_;
  std::vector<int32_t> labels_;
  int64_t expected_ = -1;
};

// ---- stats: sum of squares of the finite elements, and the non-finite count --------------------
// core/device.h's contract: within 2^-19 relative (fp32 partial sums are
// allowed), non-finite exact. vs the CPU: the GPU sums exact double products
// (error below n 2^-53), the CPU within 2^-19: 2^-19 + 2n 2^-53 relative.
class Stats : public Instance {
 public:
  Stats(int64_t n, DType t, bool max_half) {
    Gen g(seed_of("stats", n, t));
    if (max_half) {  // fp16's largest finite value: its square is finite (no overflow mistaken for inf)
      x_ = Host(t, Shape{3});
      x_.set(0, 65504.0f), x_.set(1, -65504.0f), x_.set(2, 1.0f);
      return;
    }
    x_ = g.nonzero(t, Shape{n}, 0.1f, 8.0f);
    if (n >= 7) x_.set(1, INFINITY), x_.set(n / 2, NAN), x_.set(n - 1, -INFINITY);
  }
  Outputs run(Device& dev) override {
    const TensorStats s = dev.stats(put(dev, x_));
    Outputs o;
    o.scalar("sum_squares", s.sum_squares);
    o.scalar("nonfinite", static_cast<double>(s.nonfinite));
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    double want = 0;
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < x_.numel(); ++i) {
      const double v = x_.value(i);
      if (std::isfinite(v)) want += v * v;
      else ++nonfinite;
    }
    c.scalar("sum_squares", got.scalar("sum_squares"), want, std::ldexp(want, -19));
    c.scalar("nonfinite", got.scalar("nonfinite"), static_cast<double>(nonfinite), 0.0);
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    const double s = cpu.scalar("sum_squares"), n = static_cast<double>(x_.numel());
    c.vs_cpu_scalar("sum_squares", got.scalar("sum_squares"), s, std::ldexp(s, -19) + 2.0 * n * std::ldexp(s, -53) + 1e-300);
    c.vs_cpu_scalar("nonfinite", got.scalar("nonfinite"), cpu.scalar("nonfinite"), 0.0);
  }

 private:
  Host x_;
};

// ---- exponent_histogram: floor(log2|x|) per finite non-zero element, exact ---------------------
class Histogram : public Instance {
 public:
  enum class Kind { HandMade, Wide, Spread };
  Histogram(Kind kind, DType t) : kind_(kind) {
    Gen g(seed_of("exponent_histogram", kind, t));
    if (kind == Kind::HandMade) {
      const float below = std::nextafter(0.0625f, 0.0f);
      const std::vector<float> v{1.0f,  1.5f,   std::nextafter(2.0f, 0.0f), 2.0f, -3.0f, 0.75f, 0.3f,  0.2f,
                                 0.0625f, 0.1f, below, 1e-30f, -1e-40f, 8.0f, -15.99f, 16.0f, 1e30f, -3.4028235e38f,
                                 0.0f, -0.0f, INFINITY, -INFINITY, NAN};
      x_ = Host(t, Shape{static_cast<int64_t>(v.size())});
      for (size_t i = 0; i < v.size(); ++i) x_.set(static_cast<int64_t>(i), v[i]);
      ranges_ = {{-4, 8}, {0, 1}};
    } else if (kind == Kind::Wide) {
      x_ = Host(t, Shape{50'000});
      std::uniform_real_distribution<double> e(-30.0, 20.0);
      for (int64_t i = 0; i < x_.numel(); ++i)
        x_.set(i, static_cast<float>((g.coin(0.5) ? -1.0 : 1.0) * std::exp2(e(g.engine()))));
      ranges_ = {{-20, 30}};
    } else {
      x_ = Host(t, Shape{200'000});
      std::uniform_real_distribution<float> mant(0.5f, 1.0f);
      std::uniform_int_distribution<int> ex(-140, 40);
      for (int64_t i = 0; i < x_.numel(); ++i) x_.set(i, std::ldexp(mant(g.engine()), ex(g.engine())) * (i % 2 ? -1.0f : 1.0f));
      x_.set(0, 0.0f), x_.set(1, -0.0f), x_.set(2, NAN), x_.set(3, INFINITY);
      ranges_ = {{-30, 40}, {-150, 200}, {0, 1}};
    }
  }
  Outputs run(Device& dev) override {
    Outputs o;
    DeviceBuffer x = put(dev, x_);
    for (auto [lo, nbins] : ranges_) {
      const ExponentHistogram h = dev.exponent_histogram(x, lo, nbins);
      const std::string r = name(lo, nbins);
      Host bins(DType::I32, Shape{nbins});
      for (int i = 0; i < nbins && i < static_cast<int>(h.bins.size()); ++i) bins.set_label(i, static_cast<int32_t>(h.bins[static_cast<size_t>(i)]));
      o.add("bins " + r, std::move(bins));
      o.scalar("bin count " + r, static_cast<double>(h.bins.size()));
      o.scalar("lo " + r, h.lo);
      o.scalar("zeros " + r, static_cast<double>(h.zeros));
      o.scalar("nonfinite " + r, static_cast<double>(h.nonfinite));
      o.scalar("total " + r, static_cast<double>(h.total));
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    for (auto [lo, nbins] : ranges_) {
      std::vector<double> bins(static_cast<size_t>(nbins), 0.0);
      int64_t zeros = 0, nonfinite = 0;
      for (int64_t i = 0; i < x_.numel(); ++i) {
        const double v = x_.value(i);
        if (!std::isfinite(v)) ++nonfinite;
        else if (v == 0) ++zeros;
        else ++bins[static_cast<size_t>(std::min(std::max(std::ilogb(v) - lo, 0), nbins - 1))];
      }
      const std::string r = name(lo, nbins);
      c.scalar("bin count " + r, got.scalar("bin count " + r), nbins, 0.0);
      c.exact("bins " + r, got["bins " + r], bins);
      c.scalar("lo " + r, got.scalar("lo " + r), lo, 0.0);
      c.scalar("zeros " + r, got.scalar("zeros " + r), static_cast<double>(zeros), 0.0);
      c.scalar("nonfinite " + r, got.scalar("nonfinite " + r), static_cast<double>(nonfinite), 0.0);
      c.scalar("total " + r, got.scalar("total " + r), static_cast<double>(x_.numel()), 0.0);
    }
  }

 private:
  static std::string name(int lo, int nbins) { return "[" + std::to_string(lo) + "," + std::to_string(nbins) + "]"; }
  Kind kind_;
  Host x_;
  std::vector<std::pair<int, int>> ranges_;
};

}  // namespace

void add_reduction_cases(std::vector<OpCase>& v) {
  const char* fwd_tol = "loss (C + 4 + 2 spread) u + 3u|loss| per row, probs (C + 4 + spread) u relative";
  const char* bwd_tol = "2u |dlogits| (+ half an ulp of a 16-bit dlogits); ignored rows exactly 0";
  const char* fused_tol = "probs' bound x grad_scale + 2u |dlogits| (+ half an ulp); fused == unfused bit for bit";
  std::vector<std::pair<std::string, XentSpec>> specs;
  for (DType lt : {DType::F32, DType::BF16})
    specs.push_back({"50x37 |x| in [0.4,4]", XentSpec{50, 37, lt, {DType::F32, DType::BF16}, {1.0f / 50, 1024.0f / 50}, 0.4f, 4.0f, Labels::Random}});
  for (auto [B, C] : {std::pair<int64_t, int64_t>{1, 10}, {33, 100}, {5, 1000}})
    for (DType lt : kFloatTypes)
      specs.push_back({std::to_string(B) + "x" + std::to_string(C) + " x in [-8,8]",
                       XentSpec{B, C, lt, {DType::F32, DType::F16, DType::BF16}, {1024.0f / static_cast<float>(B)}, 0.0f, 8.0f, Labels::Random}});
  specs.push_back({"6x10 ignored labels", XentSpec{6, 10, DType::F32, {DType::F32}, {0.25f}, 0.1f, 3.0f, Labels::Ignored}});
  for (DType lt : {DType::F32, DType::BF16})
    specs.push_back({"40x37 ignored labels", XentSpec{40, 37, lt, {DType::F32, DType::F16}, {1.0f / 24}, 0.0f, 6.0f, Labels::Ignored}});
  for (const auto& [label, s] : specs) {
    std::string dts = "logits " + dt(s.lt) + " dlogits";
    for (DType d : s.dts) dts += " " + dt(d);
    v.push_back(make_case<Xent>("softmax_xent_forward", label, "logits " + dt(s.lt), Size::Small, fwd_tol, false, Xent::Op::Forward, s));
    v.push_back(make_case<Xent>("softmax_xent_backward", label, dts, Size::Small, bwd_tol, false, Xent::Op::Backward, s));
    v.push_back(make_case<Xent>("softmax_xent_fused", label, dts, Size::Small, fused_tol, false, Xent::Op::Fused, s));
  }
  // BERT's MLM head: 128 tokens over the 30522-word vocabulary, most of them ignored.
  const XentSpec mlm{128, 30522, DType::BF16, {DType::BF16}, {1.0f / 20}, 0.0f, 8.0f, Labels::Ignored};
  v.push_back(make_case<Xent>("softmax_xent_forward", "BERT MLM 128x30522", "logits bf16", Size::Bert, fwd_tol, false, Xent::Op::Forward, mlm));
  v.push_back(make_case<Xent>("softmax_xent_fused", "BERT MLM 128x30522", "logits bf16 dlogits bf16", Size::Bert, fused_tol, false, Xent::Op::Fused, mlm));

  const char* exact_count = "exact (argmax, lowest index on ties)";
  for (DType t : {DType::F32, DType::BF16})
    v.push_back(make_case<CountCorrect>("count_correct", "hand-made ties 7x6", dt(t), Size::Small, exact_count, true, CountCorrect::Kind::HandMade, t));
  for (DType t : kFloatTypes) {
    v.push_back(make_case<CountCorrect>("count_correct", "random 2000x10", dt(t), Size::Small, exact_count, true, CountCorrect::Kind::Random, t));
    v.push_back(make_case<CountCorrect>("count_correct", "coarse ties NaN inf 300x37", dt(t), Size::Small, exact_count, true, CountCorrect::Kind::CoarseTies, t));
  }
  for (DType t : {DType::F32, DType::BF16})
    v.push_back(make_case<CountCorrect>("count_correct", "ignored labels 40x37", dt(t), Size::Small, exact_count, true, CountCorrect::Kind::Ignored, t));

  const char* stats_tol = "sum_squares 2^-19 relative (core/device.h), nonfinite exact";
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100'003}, int64_t{1} << 20})
    for (DType t : kFloatTypes)
      v.push_back(make_case<Stats>("stats", "n" + std::to_string(n) + (n >= 7 ? " inf nan -inf" : ""), dt(t), Size::Small, stats_tol, false, n, t, false));
  v.push_back(make_case<Stats>("stats", "65504 -65504 1", "f16", Size::Small, stats_tol, false, int64_t{3}, DType::F16, true));

  const char* hist_tol = "exact (floor(log2|x|) per element)";
  v.push_back(make_case<Histogram>("exponent_histogram", "hand-made [-4,8] [0,1]", "f32", Size::Small, hist_tol, true, Histogram::Kind::HandMade, DType::F32));
  for (DType t : kFloatTypes) {
    v.push_back(make_case<Histogram>("exponent_histogram", "2^[-30,20] n50000 [-20,30]", dt(t), Size::Small, hist_tol, true, Histogram::Kind::Wide, t));
    v.push_back(make_case<Histogram>("exponent_histogram", "2^[-140,40] n200000 3 ranges", dt(t), Size::Small, hist_tol, true, Histogram::Kind::Spread, t));
  }
}

}  // namespace mpb::opcheck
