// Element-wise ops: fill, cast, scale, add_bias, add, activation_forward /
// activation_backward, bias_grad, dropout.
//
// fill / cast / scale / add_bias / add / ReLU are one correctly rounded fp32
// operation (or none) followed by the bit-exact store rounding (nearest
// even) on every backend: the float64 reference is exact (the double sum or
// product of two floats is exact; rounding it to fp32 is the fp32 operation;
// stored() then rounds to the destination independently of the library), and
// the backends promise each other's bits. GELU is evaluated with
// ops/approx_math.h's tanh: bounds in reference.cpp (gelu_eval_tol).
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "opcheck/cases.h"

namespace mpb::opcheck {
namespace {

// Below and above the CPU's OpenMP threshold (2^14), and the GPU tests' 13x77.
constexpr int64_t kSizes[] = {37, 1001, 40'009};

// Random floats with magnitudes spread over 2^[-30, 20] (fp16 subnormals,
// normals and overflow; bf16 everywhere), random signs, rounded to t.
Host wide_random(Gen& g, DType t, int64_t n) {
  Host h(t, Shape{n});
  std::uniform_real_distribution<double> e(-30.0, 20.0);
  for (int64_t i = 0; i < n; ++i)
    h.set(i, static_cast<float>((g.coin(0.5) ? -1.0 : 1.0) * std::exp2(e(g.engine()))));
  return h;
}

std::string sz(int64_t n) { return "n" + std::to_string(n); }

// ---- fill: four values (70000 overflows fp16 to inf), bit-exact ---------------------------------
class Fill : public Instance {
 public:
  explicit Fill(DType t) : t_(t) {}
  Outputs run(Device& dev) override {
    Outputs o;
    for (int64_t n : kSizes)
      for (size_t v = 0; v < 4; ++v) {
        DeviceBuffer b = dev.alloc(Shape{n}, t_, MemCategory::Activations);
        dev.fill(b, kValues[v]);
        o.add(sz(n) + " v" + std::to_string(v), dev, b);
      }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    size_t i = 0;
    for (int64_t n : kSizes)
      for (size_t v = 0; v < 4; ++v, ++i)
        c.exact(got.tensors[i].first, got.tensors[i].second, std::vector<double>(static_cast<size_t>(n), stored(t_, kValues[v])));
  }

 private:
  static constexpr float kValues[4] = {0.3f, -1.0f / 3.0f, 0.0f, 70000.0f};
  DType t_;
};

// ---- cast: src values rounded to dst (nearest even), bit-exact --------------------------------
class Cast : public Instance {
 public:
  Cast(DType src, DType dst) : src_(src), dst_(dst) {
    Gen g(seed_of("cast", src, dst));
    in_.push_back(wide_random(g, src, 37));
    in_.push_back(wide_random(g, src, 40'009));
    in_.push_back(g.uniform(src, Shape{13, 77}, -70000.0f, 70000.0f));  // fp16 overflow to inf included
  }
  Outputs run(Device& dev) override {
    Outputs o;
    for (size_t k = 0; k < in_.size(); ++k) {
      DeviceBuffer x = put(dev, in_[k]);
      DeviceBuffer y = dev.alloc(in_[k].shape, dst_, MemCategory::Activations);
      dev.cast(y, x);
      o.add("out" + std::to_string(k), dev, y);
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    for (size_t k = 0; k < in_.size(); ++k) {
      std::vector<double> ref = in_[k].values();
      for (double& r : ref) r = stored(dst_, r);
      c.exact(got.tensors[k].first, got.tensors[k].second, ref);
    }
  }

 private:
  DType src_, dst_;
  std::vector<Host> in_;
};

// ---- scale: one fp32 multiply, then the store --------------------------------------------------
class Scale : public Instance {
 public:
  explicit Scale(DType t) : t_(t) {
    Gen g(seed_of("scale", t));
    for (int64_t n : kSizes) in_.push_back(g.nonzero(t, Shape{n}));
    in_.push_back(g.uniform(t, Shape{13, 77}, -70000.0f, 70000.0f));
  }
  Outputs run(Device& dev) override {
    Outputs o;
    for (size_t k = 0; k < in_.size(); ++k)
      for (float f : kFactors) {
        DeviceBuffer x = put(dev, in_[k]);
        dev.scale(x, f);
        o.add("x" + std::to_string(k) + " * " + std::to_string(f), dev, x);
      }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    size_t i = 0;
    for (const Host& x : in_)
      for (float f : kFactors) {
        std::vector<double> ref = x.values();
        for (double& r : ref) r = stored(t_, static_cast<float>(r * static_cast<double>(f)));
        c.exact(got.tensors[i].first, got.tensors[i].second, ref);
        ++i;
      }
  }

 private:
  static constexpr float kFactors[2] = {-0.3712f, -0.37f};
  DType t_;
  std::vector<Host> in_;
};

// ---- add_bias: y[r,:] += bias, the bias in any float dtype (the parameters') -------------------
class AddBias : public Instance {
 public:
  AddBias(DType t, DType bt) : t_(t) {
    Gen g(seed_of("add_bias", t, bt));
    for (Shape s : {Shape{37, 29}, Shape{3, 5, 29}, Shape{311, 129}, Shape{3, 5, 37}}) {
      y_.push_back(g.nonzero(t, s));
      b_.push_back(g.nonzero(bt, Shape{s.cols()}));
    }
  }
  Outputs run(Device& dev) override {
    Outputs o;
    for (size_t k = 0; k < y_.size(); ++k) {
      DeviceBuffer y = put(dev, y_[k]), b = put(dev, b_[k]);
      dev.add_bias(y, b);
      o.add("y" + y_[k].shape.str(), dev, y);
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    for (size_t k = 0; k < y_.size(); ++k) {
      const int64_t cols = y_[k].shape.cols();
      std::vector<double> ref(static_cast<size_t>(y_[k].numel()));
      for (int64_t i = 0; i < y_[k].numel(); ++i)  // |y|, |b| in [0.1, 1]: the double sum is exact
        ref[static_cast<size_t>(i)] = stored(t_, static_cast<float>(y_[k].value(i) + b_[k].value(i % cols)));
      c.exact(got.tensors[k].first, got.tensors[k].second, ref);
    }
  }

 private:
  DType t_;
  std::vector<Host> y_, b_;
};

// ---- add: out = a + b, any dtypes; in place (out = a) gives the same bits ----------------------
class Add : public Instance {
 public:
  Add(DType ta, DType tb, DType to) : to_(to), in_place_(ta == to) {
    Gen g(seed_of("add", ta, tb, to));
    for (int64_t n : {37, 40'009}) {
      a_.push_back(g.nonzero(ta, Shape{n}, 0.1f, 100.0f));
      b_.push_back(g.nonzero(tb, Shape{n}, 0.1f, 100.0f));
    }
  }
  Outputs run(Device& dev) override {
    Outputs o;
    for (size_t k = 0; k < a_.size(); ++k) {
      DeviceBuffer a = put(dev, a_[k]), b = put(dev, b_[k]);
      DeviceBuffer out = put(dev, filled(to_, a_[k].shape, NAN));
      dev.add(out, a, b);
      o.add("out" + std::to_string(k), dev, out);
      if (in_place_) {
        dev.add(a, a, b);
        o.add("in place" + std::to_string(k), dev, a);
      }
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    for (size_t k = 0; k < a_.size(); ++k) {
      std::vector<double> ref(static_cast<size_t>(a_[k].numel()));
      for (int64_t i = 0; i < a_[k].numel(); ++i)
        ref[static_cast<size_t>(i)] = stored(to_, static_cast<float>(a_[k].value(i) + b_[k].value(i)));
      const std::string k_s = std::to_string(k);
      c.exact("out" + k_s, got["out" + k_s], ref);
      if (in_place_) c.same_bits("in place vs out of place", got["in place" + k_s], got["out" + k_s]);
    }
  }

 private:
  DType to_;
  bool in_place_;
  std::vector<Host> a_, b_;
};

// ---- activations ------------------------------------------------------------------------------
// Inputs: +-[0.1, 1] and a sweep of [-8, 8] (saturated tails included), and
// uniform [-5, 5] (the GPU tests' inputs); dout in [-1, 1].
//
// Against the CPU (CUDA): bit for bit, ReLU and GELU alike. GELU
// (ops/activation.h) is one scalar core compiled for both backends; its
// exp/tanh (ops/approx_math.h) write every fused operation as an explicit
// fmaf(), and the build lets no compiler contract anything else
// (cmake/Warnings.cmake: -ffp-contract=off for C++, --fmad=false for nvcc),
// so the CPU's ISA builds (proved identical by the CpuIsa tests) and the GPU
// round every operation alike. A difference is a bug in that promise, not
// noise: look for a contracted a*b + c in the kernel's PTX.

class ActivationCase : public Instance {
 public:
  ActivationCase(Activation act, bool backward, DType in, DType out) : act_(act), backward_(backward), out_(out) {
    Gen g(seed_of("activation", act, backward, in, out));
    for (int64_t n : {int64_t{37}, int64_t{40'009}}) {
      Host x = g.nonzero(in, Shape{n});
      for (int64_t i = n / 2; i < n; ++i)
        x.set(i, static_cast<float>(-8.0 + 16.0 * (static_cast<double>(i - n / 2) + 0.5) / static_cast<double>(n - n / 2)));
      x_.push_back(x);
      dout_.push_back(g.nonzero(in, Shape{n}));
    }
    x_.push_back(g.uniform(in, Shape{33, 65}, -5.0f, 5.0f));
    dout_.push_back(g.uniform(in, Shape{33, 65}, -1.0f, 1.0f));
  }
  Outputs run(Device& dev) override {
    Outputs o;
    for (size_t k = 0; k < x_.size(); ++k) {
      DeviceBuffer x = put(dev, x_[k]);
      DeviceBuffer y = put(dev, filled(out_, x_[k].shape, NAN));
      if (backward_) {
        DeviceBuffer d = put(dev, dout_[k]);
        dev.activation_backward(act_, y, d, x);
      } else {
        dev.activation_forward(act_, y, x);
      }
      o.add(std::string(backward_ ? "din" : "out") + std::to_string(k), dev, y);
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    for (size_t k = 0; k < x_.size(); ++k) {
      const Host& x = x_[k];
      std::vector<double> ref(static_cast<size_t>(x.numel())), tol(ref.size(), 0.0);
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double xv = x.value(i), g = dout_[k].value(i);
        const auto e = static_cast<size_t>(i);
        if (act_ == Activation::Relu) {  // exact, then the store's rounding
          ref[e] = stored(out_, backward_ ? (xv > 0 ? g : 0.0) : (xv > 0 ? xv : 0.0));
          continue;
        }
        double t;
        if (backward_) {
          ref[e] = g * gelu_grad(xv);
          t = std::fabs(g) * gelu_grad_eval_tol(xv) + kU32 * std::fabs(ref[e]);  // times dout, plus that rounding
        } else {
          ref[e] = gelu(xv);
          t = gelu_eval_tol(xv);
        }
        tol[e] = t + (out_ == DType::F32 ? 0.0 : half_ulp(out_, std::fabs(ref[e]) + t));
      }
      c.near(got.tensors[k].first, got.tensors[k].second, ref, tol);
    }
  }

 private:
  Activation act_;
  bool backward_;
  DType out_;
  std::vector<Host> x_, dout_;
};

// ---- bias_grad: column sums, Overwrite (stale contents ignored) and Accumulate ------------------
// vs float64: an fp32 sum of rows (+1) terms in any order is within
// (rows + 2) u sum|terms|; a 16-bit db rounds once more (half an ulp).
// vs the CPU: each side within (rows - 1) u sum|dy| of the exact sum, so
// 2 (rows + 1) 2^-24 sum|dy| apart, plus an ulp of the fp32 add (and of an
// accumulated value), plus one ulp of a 16-bit db.
class BiasGrad : public Instance {
 public:
  BiasGrad(DType t, DType dbt, std::vector<Shape> shapes) : dbt_(dbt) {
    Gen g(seed_of("bias_grad", t, dbt));
    for (Shape s : shapes) {
      dy_.push_back(g.nonzero(t, s));
      init_.push_back(g.nonzero(dbt, Shape{s.cols()}));
    }
  }
  Outputs run(Device& dev) override {
    Outputs o;
    for (size_t k = 0; k < dy_.size(); ++k) {
      DeviceBuffer dy = put(dev, dy_[k]);
      for (GradMode mode : {GradMode::Overwrite, GradMode::Accumulate}) {
        const bool acc = mode == GradMode::Accumulate;
        DeviceBuffer db = put(dev, acc ? init_[k] : filled(dbt_, init_[k].shape, 123.0f));
        dev.bias_grad(db, dy, mode);
        o.add(name(k, acc), dev, db);
      }
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    for (size_t k = 0; k < dy_.size(); ++k) {
      const int64_t rows = dy_[k].shape.rows(), cols = dy_[k].shape.cols();
      for (bool acc : {false, true}) {
        std::vector<double> ref(static_cast<size_t>(cols)), tol(ref.size());
        for (int64_t col = 0; col < cols; ++col) {
          double sum = acc ? init_[k].value(col) : 0.0, mag = std::fabs(sum), dmag = 0.0;
          for (int64_t r = 0; r < rows; ++r) {
            sum += dy_[k].value(r * cols + col);
            dmag += std::fabs(dy_[k].value(r * cols + col));
          }
          mag += dmag;
          double t = static_cast<double>(rows + 2) * kU32 * mag;
          if (c.cuda()) t += cpu_tol(k, col, acc, std::fabs(sum) + t, dmag);
          ref[static_cast<size_t>(col)] = sum;
          tol[static_cast<size_t>(col)] = t + (dbt_ == DType::F32 ? 0.0 : half_ulp(dbt_, std::fabs(sum) + t));
        }
        c.near(name(k, acc), got[name(k, acc)], ref, tol);
      }
    }
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    for (size_t k = 0; k < dy_.size(); ++k) {
      const int64_t rows = dy_[k].shape.rows(), cols = dy_[k].shape.cols();
      std::vector<double> abs_sum(static_cast<size_t>(cols), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t col = 0; col < cols; ++col) abs_sum[static_cast<size_t>(col)] += std::fabs(dy_[k].value(r * cols + col));
      for (bool acc : {false, true})
        c.vs_cpu(name(k, acc), got[name(k, acc)], cpu[name(k, acc)], [&](int64_t col, double w) {
          return cpu_tol(k, col, acc, w, abs_sum[static_cast<size_t>(col)]);
        });
    }
  }

 private:
  std::string name(size_t k, bool acc) const { return "db" + dy_[k].shape.str() + (acc ? " +=" : " ="); }
  double cpu_tol(size_t k, int64_t col, bool acc, double w, double abs_sum) const {
    const int64_t rows = dy_[k].shape.rows();
    return 2.0 * static_cast<double>(rows + 1) * std::ldexp(abs_sum, -24) + ulp(DType::F32, w) +
           (acc ? ulp(DType::F32, init_[k].value(col)) : 0.0) + store_ulp(dbt_, w);
  }

  DType dbt_;
  std::vector<Host> dy_, init_;
};

// ---- dropout ------------------------------------------------------------------------------------
// Element i is kept iff hash(seed, i) >= p 2^32, then x * (1/(1-p)) in fp32
// and stored: every kept value exact, every dropped one 0. p = 0 is the
// identity. The kept count ~ Binomial(n, 1 - p): within 6 standard deviations
// (a false failure has probability ~2e-9; a biased threshold misses by
// hundreds). Another seed: another mask, ~2p(1-p) n elements differ (6 sd).
// The same call on a bf16 gradient zeroes exactly the dropped elements. The
// backends evaluate the same hash against the same host-computed threshold:
// the CPU's bits.
class Dropout : public Instance {
 public:
  Dropout(float p, DType it, DType ot) : p_(p), ot_(ot) {
    Gen g(seed_of("dropout", p * 100, it, ot));
    x_ = g.nonzero(it, Shape{kN});
    grad_ = g.nonzero(DType::BF16, Shape{kN});
  }
  Outputs run(Device& dev) override {
    Outputs o;
    DeviceBuffer x = put(dev, x_);
    DeviceBuffer y = put(dev, filled(ot_, x_.shape, NAN));
    dev.dropout(y, x, p_, 1234);
    o.add("out", dev, y);
    if (x_.dtype == ot_) {
      dev.dropout(x, x, p_, 1234);
      o.add("in place", dev, x);
    }
    dev.dropout(y, put(dev, x_), p_, 1235);
    o.add("other seed", dev, y);
    DeviceBuffer gr = put(dev, grad_), dg = dev.alloc(grad_.shape, DType::BF16, MemCategory::Activations);
    dev.dropout(dg, gr, p_, 1234);
    o.add("grad", dev, dg);
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    const Host& y = got["out"];
    const float sc = 1.0f / (1.0f - p_);
    std::vector<double> ref(static_cast<size_t>(kN)), gref(ref.size());
    int64_t kept = 0, differ = 0;
    for (int64_t i = 0; i < kN; ++i) {
      const bool keep = y.value(i) != 0.0 || p_ == 0.0f;
      kept += keep;
      ref[static_cast<size_t>(i)] = keep ? stored(ot_, static_cast<float>(x_.value(i) * static_cast<double>(sc))) : 0.0;
      gref[static_cast<size_t>(i)] = keep ? stored(DType::BF16, static_cast<float>(grad_.value(i) * static_cast<double>(sc))) : 0.0;
      differ += (got["other seed"].value(i) == 0.0) != !keep;
    }
    c.exact("out (kept: x/(1-p), dropped: 0)", y, ref);
    c.exact("grad (the same mask)", got["grad"], gref);
    if (x_.dtype == ot_) c.same_bits("in place vs out of place", got["in place"], y);
    const double n = static_cast<double>(kN), p = p_;
    if (p_ == 0.0f) {
      c.expect(kept == kN, "p = 0 must keep every element");
      c.expect(differ == 0, "p = 0 must keep every element with any seed");
      return;
    }
    const double mean = n * (1.0 - p), sd = std::sqrt(n * p * (1.0 - p));
    c.expect(std::fabs(static_cast<double>(kept) - mean) <= 6 * sd,
             "kept " + std::to_string(kept) + " of " + std::to_string(kN) + ", binomial mean " + std::to_string(mean) +
                 " +- 6 sd " + std::to_string(6 * sd));
    const double exp_differ = 2.0 * p * (1.0 - p) * n;
    c.expect(std::fabs(static_cast<double>(differ) - exp_differ) <= 6 * std::sqrt(exp_differ),
             "another seed changed " + std::to_string(differ) + " mask bits, expected ~" + std::to_string(exp_differ));
  }

 private:
  static constexpr int64_t kN = 1'000'003;
  float p_;
  DType ot_;
  Host x_, grad_;
};

}  // namespace

void add_elementwise_cases(std::vector<OpCase>& v) {
  const char* exact = "exact: one fp32 operation, then the store's rounding (nearest even)";
  for (DType t : kFloatTypes) v.push_back(make_case<Fill>("fill", "n37,1001,40009 x4 values", dt(t), Size::Small, exact, true, t));
  for (DType s : kFloatTypes)
    for (DType d : kFloatTypes)
      v.push_back(make_case<Cast>("cast", "2^[-30,20] and +-70000", dt(s) + "->" + dt(d), Size::Small, exact, true, s, d));
  for (DType t : kFloatTypes) v.push_back(make_case<Scale>("scale", "n37,1001,40009 and +-70000", dt(t), Size::Small, exact, true, t));
  for (DType t : kFloatTypes)
    for (DType bt : kFloatTypes)
      v.push_back(make_case<AddBias>("add_bias", "37x29,3x5x29,311x129,3x5x37", dt(t) + " bias " + dt(bt), Size::Small,
                                     exact, true, t, bt));
  for (DType ta : kFloatTypes)
    for (DType tb : kFloatTypes)
      for (DType to : kFloatTypes)
        v.push_back(make_case<Add>("add", "n37,40009", dt(ta) + "+" + dt(tb) + "->" + dt(to), Size::Small, exact, true,
                                   ta, tb, to));
  for (bool backward : {false, true})
    for (Activation act : {Activation::Relu, Activation::Gelu})
      for (DType in : kFloatTypes)
        for (DType out : kFloatTypes) {
          const bool relu = act == Activation::Relu;
          const std::string tol =
              relu ? "exact"
                   : (backward ? "|dout| gelu'(x)'s fp32 error (tanh_approx 3.1e-7, ~6 roundings) + u|din|"
                               : "0.5|x| 3.1e-7 (tanh_approx) + 3u|x|") +
                         std::string(out == DType::F32 ? "" : " + half an ulp of the output");
          v.push_back(make_case<ActivationCase>(backward ? "activation_backward" : "activation_forward",
                                                std::string(relu ? "relu" : "gelu") + " n37,40009,33x65",
                                                dt(in) + "->" + dt(out), Size::Small, tol,
                                                true, act, backward, in, out));
        }
  const std::vector<Shape> small{Shape{5, 3},   Shape{300, 130}, Shape{4, 25, 131},
                                 Shape{1, 5},   Shape{700, 45},  Shape{3, 111, 19}};
  for (DType t : kFloatTypes)
    for (DType dbt : kFloatTypes)
      v.push_back(make_case<BiasGrad>("bias_grad", "6 shapes, overwrite/accumulate", dt(t) + " db " + dt(dbt),
                                      Size::Small, "(rows + 2) u sum|terms| (+ half an ulp of a 16-bit db)", false, t,
                                      dbt, small));
  v.push_back(make_case<BiasGrad>("bias_grad", "BERT 128x768,128x3072", "bf16 db f32", Size::Bert,
                                  "(rows + 2) u sum|terms|", false, DType::BF16, DType::F32,
                                  std::vector<Shape>{Shape{128, 768}, Shape{128, 3072}}));
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f})
    for (auto [it, ot] : {std::pair<DType, DType>{DType::F32, DType::F32}, {DType::BF16, DType::BF16},
                          {DType::F16, DType::F32}, {DType::F32, DType::F16}}) {
      std::string ps = std::to_string(p);
      ps.resize(3);
      v.push_back(make_case<Dropout>("dropout", "p" + ps + " n1000003", dt(it) + "->" + dt(ot), Size::Small,
                                     "exact kept values; kept count within 6 sd of the binomial mean", true, p, it, ot));
    }
}

}  // namespace mpb::opcheck
