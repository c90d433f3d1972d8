// decide_step, read_step_results and the optimizer ops given
// GradScale::decided(): the optimizer step's decision made on the device
// from the gradients' statistics (core/device.h), and updates that read it
// there instead of waiting for the host.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "opcheck/cases.h"
#include "ops/optimizer.h"

namespace mpb::opcheck {
namespace {

// Checks, on every backend:
//  * the statistics as stats' contract: sum_squares within 2^-19 relative of
//    float64, nonfinite exact;
//  * the decision is scalar::decide_step of the statistics it returns, bit for
//    bit (recomputed here on the host: a GPU's double sqrt and division are
//    correctly rounded, so its decision has the host's bits), and it skips
//    exactly on a non-finite gradient and clips exactly when the float64 norm
//    exceeds the clip (each case keeps the norm 2x or more from its clip);
//  * norm and grad_scale within 2^-19 relative of float64: half of
//    sum_squares' relative error through the sqrt, a few double roundings,
//    and grad_scale's one fp32 rounding (2^-24);
//  * no host wait from decide_step to the end of the decided updates;
//  * every decided update (AdamW fused with a bf16 copy and unfused, SGD,
//    LAMB) has the bits of the same update given the decision's grad_scale
//    as a host value (the host-value ops have their own cases); on a skip,
//    param, state and copy keep their bits.
// vs the CPU: the statistics as stats' cases bound them, the same skip, norm
// and grad_scale within the sum of both backends' float64 bounds. The updates
// are not compared across backends: each equals its own host-value update,
// and those are compared by the adamw/sgd/lamb cases.
class DecideStep : public Instance {
 public:
  enum class Kind { NoClip, ClipAbove, Clipped, NonFinite };
  DecideStep(int64_t n, DType gt, Kind kind) : n_(n), kind_(kind) {
    Gen g(seed_of("decide_step", n, gt, kind));
    grads_ = g.uniform(gt, Shape{n}, -8.0f, 8.0f);  // a norm near 1 after unscaling by kScale
    if (kind == Kind::NonFinite) grads_.set(n / 3, INFINITY);
    clip_ = kind == Kind::NoClip ? 0.0 : (kind == Kind::ClipAbove ? 100.0 : 0.25);
    p0_ = g.nonzero(DType::F32, Shape{n}, 0.1f, 1.0f);
    m0_ = g.uniform(DType::F32, Shape{n}, -0.01f, 0.01f);
    v0_ = g.uniform(DType::F32, Shape{n}, 0.0f, 1e-4f);
    tensors_ = {{0, n / 3, true}, {n / 3, n, false}};
  }

  Outputs run(Device& dev) override {
    Outputs o;
    DeviceBuffer g = put(dev, grads_);
    Updates decided(*this, dev);  // everything uploaded before the decision: no copy between it and the updates
    const int64_t syncs = dev.counters().host_syncs;
    dev.decide_step(g, kScale, clip_);
    decided.apply(dev, g, GradScale::decided());
    o.scalar("host waits from decide_step to the updates' end", double(dev.counters().host_syncs - syncs));
    const StepResults r = dev.read_step_results();
    o.scalar("sum_squares", r.grad_stats.sum_squares);
    o.scalar("nonfinite", double(r.grad_stats.nonfinite));
    o.scalar("skip", r.skip ? 1.0 : 0.0);
    o.scalar("norm", r.grad_norm);
    o.scalar("grad_scale", double(r.grad_scale));
    decided.add(o, dev, "decided");
    if (r.skip) {
      Updates(*this, dev).add(o, dev, "initial");  // the states as the updates found them
    } else {
      Updates host(*this, dev);
      host.apply(dev, g, r.grad_scale);
      host.add(o, dev, "host value");
    }
    return o;
  }

  void check(Check& c, Device&, const Outputs& got) override {
    c.expect(got.scalar("host waits from decide_step to the updates' end") == 0.0,
             "decide_step and the decided updates do not wait for the device");
    double want = 0.0;
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < n_; ++i) {
      const double v = grads_.value(i);
      if (std::isfinite(v)) want += v * v;
      else ++nonfinite;
    }
    const double ss = got.scalar("sum_squares");
    c.scalar("sum_squares", ss, want, std::ldexp(want, -19));
    c.scalar("nonfinite", got.scalar("nonfinite"), double(nonfinite), 0.0);
    const bool skip = got.scalar("skip") != 0.0;
    c.expect(skip == (kind_ == Kind::NonFinite), "skips exactly on a non-finite gradient");

    const scalar::StepDecision d =
        scalar::decide_step(ss, static_cast<long long>(got.scalar("nonfinite")), kScale, clip_);
    c.expect(d.skip == skip && d.norm == got.scalar("norm") && double(d.grad_scale) == got.scalar("grad_scale"),
             "the decision is scalar::decide_step of its statistics, bit for bit");
    if (!skip) {
      const double norm = std::sqrt(want) / kScale;
      const bool clipped = clip_ > 0.0 && norm > clip_;
      c.expect(clipped == (kind_ == Kind::Clipped), "clips exactly when the norm exceeds the clip");
      const double scale = (clipped ? clip_ / norm : 1.0) / kScale;
      c.scalar("norm", got.scalar("norm"), norm, std::ldexp(norm, -19));
      c.scalar("grad_scale", got.scalar("grad_scale"), scale, std::ldexp(scale, -19));
    }
    for (const auto& [name, h] : got.tensors) {
      if (name.rfind("decided ", 0) != 0) continue;
      const std::string what = name.substr(8);
      if (skip) c.same_bits("a skip keeps " + what, h, got["initial " + what]);
      else c.same_bits("decided vs a host value: " + what, h, got["host value " + what]);
    }
  }

  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    const double s = cpu.scalar("sum_squares");
    c.vs_cpu_scalar("sum_squares", got.scalar("sum_squares"), s,
                    std::ldexp(s, -19) + 2.0 * double(n_) * std::ldexp(s, -53) + 1e-300);
    c.vs_cpu_scalar("nonfinite", got.scalar("nonfinite"), cpu.scalar("nonfinite"), 0.0);
    c.vs_cpu_scalar("skip", got.scalar("skip"), cpu.scalar("skip"), 0.0);
    for (const char* n : {"norm", "grad_scale"}) {
      const double w = std::fabs(cpu.scalar(n));
      c.vs_cpu_scalar(n, got.scalar(n), cpu.scalar(n), std::ldexp(w, -18));
    }
  }

 private:
  static constexpr double kScale = 384.0;  // not a power of two: unscaling rounds

  // One set of optimizer states, each updated once by one op.
  struct Updates {
    DeviceBuffer p1, m1, v1, copy1;  // AdamW fused, writing a bf16 copy
    DeviceBuffer p2, m2, v2;         // AdamW unfused
    DeviceBuffer p3, buf3;           // SGD
    DeviceBuffer p4, m4, v4, scratch4;  // LAMB
    Updates(const DecideStep& s, Device& dev)
        : p1(put(dev, s.p0_)), m1(put(dev, s.m0_)), v1(put(dev, s.v0_)),
          copy1(dev.alloc(Shape{s.n_}, DType::BF16, MemCategory::Params)), p2(put(dev, s.p0_)), m2(put(dev, s.m0_)),
          v2(put(dev, s.v0_)), p3(put(dev, s.p0_)), buf3(put(dev, s.m0_)), p4(put(dev, s.p0_)), m4(put(dev, s.m0_)),
          v4(put(dev, s.v0_)),
          scratch4(dev.alloc(Shape{lamb_scratch_floats(s.tensors_.size())}, DType::F32, MemCategory::Optimizer)),
          tensors(s.tensors_) {
      dev.cast(copy1, p1);
    }
    void apply(Device& dev, const DeviceBuffer& g, GradScale gs) {
      const AdamWHyper a{1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, 3};
      dev.adamw_step(p1, g, m1, v1, a, gs, true, copy1);
      dev.adamw_step(p2, g, m2, v2, a, gs, false, Tensor{});
      dev.sgd_step(p3, g, buf3, SgdHyper{0.05f, 0.9f, 1e-2f}, gs);
      dev.lamb_step(p4, g, m4, v4, LambHyper{1e-2f, 0.9f, 0.999f, 1e-6f, 0.01f, 3, true}, gs, Tensor{}, tensors,
                    scratch4);
    }
    void add(Outputs& o, Device& dev, const std::string& tag) const {
      const std::pair<const char*, const DeviceBuffer*> all[] = {
          {"adamw fused param", &p1}, {"adamw fused m", &m1}, {"adamw fused v", &v1}, {"adamw fused copy", &copy1},
          {"adamw unfused param", &p2}, {"adamw unfused m", &m2}, {"adamw unfused v", &v2},
          {"sgd param", &p3}, {"sgd momentum", &buf3},
          {"lamb param", &p4}, {"lamb m", &m4}, {"lamb v", &v4}};
      for (const auto& [name, b] : all) o.add(tag + " " + name, dev, *b);
    }
    std::vector<LambTensor> tensors;
  };

  int64_t n_;
  Kind kind_;
  double clip_ = 0.0;
  Host grads_, p0_, m0_, v0_;
  std::vector<LambTensor> tensors_;
};

}  // namespace

void add_decide_step_cases(std::vector<OpCase>& v) {
  const char* tol =
      "sum_squares, norm, grad_scale 2^-19 relative; the decision == scalar::decide_step of its statistics; decided "
      "updates == host-value updates bit for bit, a skip changes nothing";
  struct Spec {
    DecideStep::Kind kind;
    const char* label;
  };
  const Spec specs[] = {{DecideStep::Kind::NoClip, "no clip"},
                        {DecideStep::Kind::ClipAbove, "clip 100 (not reached)"},
                        {DecideStep::Kind::Clipped, "clip 0.25 (clipped)"},
                        {DecideStep::Kind::NonFinite, "an inf gradient (skip)"}};
  for (const Spec& s : specs)
    for (DType gt : {DType::F32, DType::BF16})
      v.push_back(make_case<DecideStep>("decide_step + decided optimizers", std::string("n30011 ") + s.label,
                                        "grad " + dt(gt), Size::Small, tol, false, int64_t{30'011}, gt, s.kind));
}

}  // namespace mpb::opcheck
