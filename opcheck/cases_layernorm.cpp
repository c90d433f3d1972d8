// LayerNorm (forward, residual + forward, backward) and the head layout
// shuffles (split_heads / merge_qkv_grads, merge_heads / split_heads_grad).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "opcheck/cases.h"

namespace mpb::opcheck {
namespace {

constexpr float kEps = 1e-5f;

// Inputs with a per-row offset (so the centring matters) and spread.
Host ln_input(Gen& g, DType t, int64_t rows, int64_t C) {
  Host h = g.nonzero(t, Shape{rows, C}, 0.1f, 2.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) h.set(r * C + c, h.get(r * C + c) + 0.25f * static_cast<float>(r % 7) - 0.5f);
  return h;
}

// ---- forward bounds -------------------------------------------------------------------------------
// Two derivations of a worst-case bound for one backend's fp32 LayerNorm of
// a row (any summation order); each held on the backend it was first
// written for, and the check uses the larger.
//  (a) mean: the fp32 row sum ((C + 2) u sum|x| / C) and the division
//      (u |mean|); rstd: var's relative error <= (C + 4) u plus (mean error /
//      std)^2, halved by the sqrt, +eps, sqrt and 1/x add 3u: (C + 10) u;
//      y: xhat's error (its rstd error plus the mean error times rstd plus 3
//      roundings: |xhat| (C + 16) u + rstd e_mean) times |gamma|, + 2u |y|.
//  (b) e_mean = u S1 + 2u |mu| (S1 = sum|x|); the centred sum of squares is
//      sum (x - mu)^2 + C (mu - mu_c)^2 exactly, so the mean's error enters
//      quadratically, plus (C + 3) u of the sum; rstd's relative error is
//      half var's plus 3u; y carries e_mean rstd |gamma| + |xhat gamma|
//      e_rstd plus 3u of its terms.
// Either way a 16-bit out adds half an ulp.
// vs the CPU: both sides within (b) of the exact values: twice (b), plus one
// ulp of a 16-bit out instead of the half.
struct LnBounds {
  std::vector<double> mean, rstd, y;              // exact
  std::vector<double> tol_mean, tol_rstd, tol_y;  // vs float64
  std::vector<double> cpu_mean, cpu_rstd, cpu_y;  // a backend vs the CPU
};

LnBounds ln_bounds(const Host& x, const Host& gamma, const Host& beta, DType out) {
  const int64_t rows = x.shape.rows(), C = x.shape.cols();
  const std::vector<double> xv = x.values(), gv = gamma.values(), bv = beta.values();
  const LnRef f = layernorm_ref(xv, gv, bv, rows, C, kEps);
  LnBounds b;
  b.mean = f.mean, b.rstd = f.rstd, b.y = f.y;
  for (auto* v : {&b.tol_mean, &b.tol_rstd, &b.cpu_mean, &b.cpu_rstd}) v->resize(static_cast<size_t>(rows));
  for (auto* v : {&b.tol_y, &b.cpu_y}) v->resize(xv.size());
  for (int64_t r = 0; r < rows; ++r) {
    const auto ri = static_cast<size_t>(r);
    const double mu = f.mean[ri], rs = f.rstd[ri];
    double s1 = 0.0, ss = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      const double xc = xv[static_cast<size_t>(r * C + c)];
      s1 += std::fabs(xc), ss += (xc - mu) * (xc - mu);
    }
    const double var = ss / static_cast<double>(C);
    const double a_mean = (C + 2) * kU32 * s1 / static_cast<double>(C) + kU32 * std::fabs(mu);
    const double a_rstd = (C + 10) * kU32 * rs;
    const double e_mean = kU32 * s1 + 2 * kU32 * std::fabs(mu);
    const double e_var_rel = (C + 4) * kU32 + static_cast<double>(C) * e_mean * e_mean / std::max(ss, 1e-300);
    const double e_rstd_rel = 0.5 * e_var_rel * var / (var + kEps) + 3 * kU32;
    b.tol_mean[ri] = std::max(a_mean, e_mean);
    b.tol_rstd[ri] = std::max(a_rstd, e_rstd_rel * rs);
    b.cpu_mean[ri] = 2 * e_mean;
    b.cpu_rstd[ri] = 2 * e_rstd_rel * rs;
    for (int64_t c = 0; c < C; ++c) {
      const auto e = static_cast<size_t>(r * C + c);
      const double xh = (xv[e] - mu) * rs, g = std::fabs(gv[static_cast<size_t>(c)]), be = bv[static_cast<size_t>(c)];
      const double y = f.y[e];
      const double a_y = g * (std::fabs(xh) * (C + 16) * kU32 + rs * a_mean) + 2 * kU32 * std::fabs(y);
      const double b_y = g * (e_mean * rs * (1 + e_rstd_rel) + std::fabs(xh) * e_rstd_rel) +
                         3 * kU32 * (std::fabs(xh * g) + std::fabs(be) + std::fabs(y));
      b.tol_y[e] = std::max(a_y, b_y) + half_ulp(out, y);
      b.cpu_y[e] = 2 * b_y;  // + one ulp of a 16-bit out, at the compared value
    }
  }
  return b;
}

void check_ln(Check& c, const LnBounds& b, const Host& out, const Host& mean, const Host& rstd, const std::string& pre) {
  // On CUDA the bounds above were validated directly against float64 (b).
  c.near(pre + "mean", mean, b.mean, b.tol_mean);
  c.near(pre + "rstd", rstd, b.rstd, b.tol_rstd);
  c.near(pre + "out", out, b.y, b.tol_y);
}

void check_ln_vs_cpu(Check& c, const LnBounds& b, const Outputs& got, const Outputs& cpu, const std::string& pre) {
  c.vs_cpu(pre + "mean", got[pre + "mean"], cpu[pre + "mean"], [&](int64_t i, double) { return b.cpu_mean[static_cast<size_t>(i)]; });
  c.vs_cpu(pre + "rstd", got[pre + "rstd"], cpu[pre + "rstd"], [&](int64_t i, double) { return b.cpu_rstd[static_cast<size_t>(i)]; });
  const DType out = got[pre + "out"].dtype;
  c.vs_cpu(pre + "out", got[pre + "out"], cpu[pre + "out"],
           [&](int64_t i, double w) { return b.cpu_y[static_cast<size_t>(i)] + store_ulp(out, w); });
}

// ---- layernorm_forward and residual_layernorm_forward --------------------------------------------
// Residual: sum = a + b (one fp32 add, stored: exact reference, the CPU's
// bits), then exactly add + layernorm_forward on the same device (bit for
// bit), so out/mean/rstd have the forward's bounds against the stored sum.
class LnForward : public Instance {
 public:
  LnForward(int64_t rows, int64_t C, DType x, DType param, DType out, bool residual, DType b_dtype)
      : out_(out), residual_(residual) {
    Gen g(seed_of("layernorm_forward", rows, C, x, param, out, residual));
    gamma_ = g.nonzero(param, Shape{C}, 0.5f, 1.5f);
    beta_ = g.nonzero(param, Shape{C});
    if (residual) {
      a_ = ln_input(g, x, rows, C);
      b_ = g.nonzero(b_dtype, Shape{rows, C});
      x_ = Host(x, Shape{rows, C});  // the stored sum
      for (int64_t i = 0; i < x_.numel(); ++i) x_.set(i, static_cast<float>(stored(x, static_cast<float>(a_.value(i) + b_.value(i)))));
    } else {
      x_ = ln_input(g, x, rows, C);
    }
  }
  Outputs run(Device& dev) override {
    Outputs o;
    const Shape s = x_.shape, rs{s.rows()};
    DeviceBuffer g = put(dev, gamma_), be = put(dev, beta_);
    DeviceBuffer out = put(dev, filled(out_, s, NAN));
    DeviceBuffer mean = put(dev, filled(DType::F32, rs, NAN)), rstd = put(dev, filled(DType::F32, rs, NAN));
    if (!residual_) {
      dev.layernorm_forward(out, mean, rstd, put(dev, x_), g, be, kEps);
    } else {
      DeviceBuffer a = put(dev, a_), b = put(dev, b_), sum = put(dev, filled(x_.dtype, s, NAN));
      dev.residual_layernorm_forward(out, sum, mean, rstd, a, b, g, be, kEps);
      o.add("sum", dev, sum);
      DeviceBuffer sum2 = put(dev, filled(x_.dtype, s, NAN)), out2 = put(dev, filled(out_, s, NAN));
      DeviceBuffer m2 = put(dev, filled(DType::F32, rs, NAN)), r2 = put(dev, filled(DType::F32, rs, NAN));
      dev.add(sum2, a, b);
      dev.layernorm_forward(out2, m2, r2, sum2, g, be, kEps);
      o.add("add+layernorm out", dev, out2);
      o.add("add+layernorm mean", dev, m2);
      o.add("add+layernorm rstd", dev, r2);
    }
    o.add("out", dev, out);
    o.add("mean", dev, mean);
    o.add("rstd", dev, rstd);
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    if (!bounds_) bounds_ = std::make_unique<LnBounds>(ln_bounds(x_, gamma_, beta_, out_));
    check_ln(c, *bounds_, got["out"], got["mean"], got["rstd"], "");
    if (!residual_) return;
    c.exact("sum", got["sum"], x_.values());
    for (const char* n : {"out", "mean", "rstd"}) c.same_bits(std::string("fused vs add + layernorm_forward: ") + n, got[n], got[std::string("add+layernorm ") + n]);
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    if (!bounds_) bounds_ = std::make_unique<LnBounds>(ln_bounds(x_, gamma_, beta_, out_));
    check_ln_vs_cpu(c, *bounds_, got, cpu, "");
    if (!residual_) return;
    c.same_bits("sum vs the CPU", got["sum"], cpu["sum"]);
    check_ln_vs_cpu(c, *bounds_, got, cpu, "add+layernorm ");
  }

 private:
  DType out_;
  bool residual_;
  Host x_, a_, b_, gamma_, beta_;
  std::unique_ptr<LnBounds> bounds_;
};

// ---- layernorm_backward -----------------------------------------------------------------------------
// From given statistics: the exact mean and rstd rounded to fp32 (as a
// forward saves them), the same on every backend.
// vs float64 (layernorm_grad_ref from the exact statistics): xhat from fp32
// mean/rstd is within 4u (|xhat| + |mean| rstd); dx = rstd (g - a - xhat b)
// with the row sums a, b carrying (C + 2) u of their magnitudes plus ~6
// roundings: (C + 16) u on every magnitude, + 2u |dx| and half an ulp of a
// 16-bit dx. dgamma/dbeta: sums over rows, (rows + 8) u of the magnitudes
// (a chunked order is still one sum of rows terms) plus xhat's own error for
// dgamma, plus half an ulp.
// vs the CPU: xhat and g = dout gamma are the same fp32 values on both sides;
// the row sums differ by 2 (C - 1) u sum|g| / C + 2u |a| (likewise b), so dx
// by rstd (e_a + |xhat| e_b) + 8u of its terms per side (+ 4u of an
// accumulated value); dgamma/dbeta: 2 (rows + 1) u sum|terms| + 4u (|old| +
// |w|); one ulp of a 16-bit output. In place (dx over dout): the same bits.
class LnBackward : public Instance {
 public:
  LnBackward(int64_t rows, int64_t C, DType x, DType dy, DType dx, DType param) : dx_t_(dx), param_t_(param) {
    Gen g(seed_of("layernorm_backward", rows, C, x, dy, dx, param));
    x_ = ln_input(g, x, rows, C);
    dy_ = g.nonzero(dy, Shape{rows, C});
    gamma_ = g.nonzero(param, Shape{C}, 0.5f, 1.5f);
    dx0_ = g.nonzero(dx, Shape{rows, C});
    dg0_ = g.nonzero(param, Shape{C});
    db0_ = g.nonzero(param, Shape{C});
    f_ = layernorm_ref(x_.values(), gamma_.values(), std::vector<double>(static_cast<size_t>(C), 0.0), rows, C, kEps);
    mean_ = Host(DType::F32, Shape{rows}), rstd_ = Host(DType::F32, Shape{rows});
    for (int64_t r = 0; r < rows; ++r) {
      mean_.set(r, static_cast<float>(f_.mean[static_cast<size_t>(r)]));
      rstd_.set(r, static_cast<float>(f_.rstd[static_cast<size_t>(r)]));
    }
  }
  Outputs run(Device& dev) override {
    Outputs o;
    const Shape s = x_.shape, cs{s.cols()};
    DeviceBuffer x = put(dev, x_), dy = put(dev, dy_), g = put(dev, gamma_), m = put(dev, mean_), r = put(dev, rstd_);
    for (bool dx_acc : {false, true})
      for (bool p_acc : {false, true}) {
        DeviceBuffer dx = put(dev, dx_acc ? dx0_ : filled(dx_t_, s, NAN));
        DeviceBuffer dg = put(dev, p_acc ? dg0_ : filled(param_t_, cs, NAN));
        DeviceBuffer db = put(dev, p_acc ? db0_ : filled(param_t_, cs, NAN));
        const auto mode = [](bool acc) { return acc ? GradMode::Accumulate : GradMode::Overwrite; };
        dev.layernorm_backward(dx, dg, db, dy, x, m, r, g, mode(dx_acc), mode(p_acc));
        const std::string k = key(dx_acc, p_acc);
        o.add("dx" + k, dev, dx), o.add("dgamma" + k, dev, dg), o.add("dbeta" + k, dev, db);
        if (!dx_acc && dx_t_ == dy_.dtype) {  // in place: dx over dout
          DeviceBuffer inplace = put(dev, dy_);
          DeviceBuffer dg2 = put(dev, p_acc ? dg0_ : filled(param_t_, cs, NAN));
          DeviceBuffer db2 = put(dev, p_acc ? db0_ : filled(param_t_, cs, NAN));
          dev.layernorm_backward(inplace, dg2, db2, inplace, x, m, r, g, GradMode::Overwrite, mode(p_acc));
          o.add("in place dx" + k, dev, inplace), o.add("in place dgamma" + k, dev, dg2), o.add("in place dbeta" + k, dev, db2);
        }
      }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    const int64_t rows = x_.shape.rows(), C = x_.shape.cols();
    const std::vector<double> xv = x_.values(), gv = gamma_.values(), dyv = dy_.values();
    const LnGrad ref = layernorm_grad_ref(xv, gv, dyv, f_, rows, C);
    // Per element / column magnitudes for the float64 bounds.
    std::vector<double> dx_mag(xv.size()), dg_mag(static_cast<size_t>(C), 0.0), dg_xerr(dg_mag), db_mag(dg_mag);
    for (int64_t i = 0; i < rows; ++i) {
      const double mu = f_.mean[static_cast<size_t>(i)], rs = f_.rstd[static_cast<size_t>(i)];
      double mean_g = 0.0, mean_gx = 0.0;
      for (int64_t k = 0; k < C; ++k) {
        const size_t e = static_cast<size_t>(i * C + k), kc = static_cast<size_t>(k);
        const double xhat = (xv[e] - mu) * rs;
        mean_g += std::fabs(dyv[e] * gv[kc]) / static_cast<double>(C);
        mean_gx += std::fabs(dyv[e] * gv[kc] * xhat) / static_cast<double>(C);
        const double xhat_err = 4 * kU32 * (std::fabs(xhat) + std::fabs(mu) * rs);
        dg_mag[kc] += std::fabs(dyv[e] * xhat);
        dg_xerr[kc] += std::fabs(dyv[e]) * xhat_err;
        db_mag[kc] += std::fabs(dyv[e]);
      }
      for (int64_t k = 0; k < C; ++k) {
        const size_t e = static_cast<size_t>(i * C + k);
        const double xhat = (xv[e] - mu) * rs;
        dx_mag[e] = rs * (std::fabs(dyv[e] * gv[static_cast<size_t>(k)]) + mean_g +
                          (std::fabs(xhat) + std::fabs(mu) * rs + 1.0) * mean_gx);
      }
    }
    const CpuTols ct = cpu_tols();
    for (bool dx_acc : {false, true})
      for (bool p_acc : {false, true}) {
        const std::string k = key(dx_acc, p_acc);
        std::vector<double> rdx(ref.dx), tdx(rdx.size()), rdg(ref.dg), tdg(rdg.size()), rdb(ref.db), tdb(rdb.size());
        for (size_t e = 0; e < rdx.size(); ++e) {
          if (dx_acc) rdx[e] += dx0_.value(static_cast<int64_t>(e));
          tdx[e] = (C + 16) * kU32 * dx_mag[e] + 2 * kU32 * std::fabs(rdx[e]) + half_ulp(dx_t_, rdx[e]);
          const double w = std::fabs(rdx[e]) + tdx[e];  // the largest magnitude a result may have
          if (c.cuda())
            tdx[e] += ct.dx[e] + (dx_acc ? 4 * kU32 * (w + std::fabs(dx0_.value(static_cast<int64_t>(e)))) : 0.0) + store_ulp(dx_t_, w);
        }
        for (size_t e = 0; e < rdg.size(); ++e) {
          const double og = p_acc ? dg0_.value(static_cast<int64_t>(e)) : 0.0, ob = p_acc ? db0_.value(static_cast<int64_t>(e)) : 0.0;
          rdg[e] += og, rdb[e] += ob;
          tdg[e] = (rows + 8) * kU32 * (dg_mag[e] + std::fabs(rdg[e])) + dg_xerr[e] + half_ulp(param_t_, rdg[e]);
          tdb[e] = (rows + 8) * kU32 * (db_mag[e] + std::fabs(rdb[e])) + half_ulp(param_t_, rdb[e]);
          if (c.cuda()) {
            tdg[e] += param_cpu_tol(ct.dg[e], og, std::fabs(rdg[e]) + tdg[e]);
            tdb[e] += param_cpu_tol(ct.db[e], ob, std::fabs(rdb[e]) + tdb[e]);
          }
        }
        c.near("dx" + k, got["dx" + k], rdx, tdx);
        c.near("dgamma" + k, got["dgamma" + k], rdg, tdg);
        c.near("dbeta" + k, got["dbeta" + k], rdb, tdb);
        if (!dx_acc && dx_t_ == dy_.dtype)
          for (const char* n : {"dx", "dgamma", "dbeta"})
            c.same_bits(std::string("in place vs out of place ") + n + k, got["in place " + std::string(n) + k], got[n + k]);
      }
  }
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    const CpuTols ct = cpu_tols();
    for (bool dx_acc : {false, true})
      for (bool p_acc : {false, true}) {
        const std::string k = key(dx_acc, p_acc);
        for (const std::string pre : {"", "in place "}) {
          if (!pre.empty() && (dx_acc || dx_t_ != dy_.dtype)) continue;
          c.vs_cpu(pre + "dx" + k, got[pre + "dx" + k], cpu[pre + "dx" + k], [&](int64_t i, double w) {
            const double old = dx_acc ? std::fabs(dx0_.value(i)) : 0.0;
            return ct.dx[static_cast<size_t>(i)] + (dx_acc ? 4 * kU32 * (std::fabs(w) + old) : 0.0) + store_ulp(dx_t_, w);
          });
          c.vs_cpu(pre + "dgamma" + k, got[pre + "dgamma" + k], cpu[pre + "dgamma" + k], [&](int64_t i, double w) {
            return param_cpu_tol(ct.dg[static_cast<size_t>(i)], p_acc ? dg0_.value(i) : 0.0, w);
          });
          c.vs_cpu(pre + "dbeta" + k, got[pre + "dbeta" + k], cpu[pre + "dbeta" + k], [&](int64_t i, double w) {
            return param_cpu_tol(ct.db[static_cast<size_t>(i)], p_acc ? db0_.value(i) : 0.0, w);
          });
        }
      }
  }

 private:
  static std::string key(bool dx_acc, bool p_acc) { return std::string(dx_acc ? " (dx+=" : " (dx=") + (p_acc ? ", dparam+=)" : ", dparam=)"); }
  struct CpuTols {
    std::vector<double> dx, dg, db;  // without the accumulation and 16-bit terms
  };
  CpuTols cpu_tols() const {
    const int64_t rows = x_.shape.rows(), C = x_.shape.cols();
    CpuTols t;
    t.dx.resize(static_cast<size_t>(rows * C));
    std::vector<double> mag_g(static_cast<size_t>(C), 0.0), mag_b(mag_g);
    std::vector<double> xh(static_cast<size_t>(C)), g(xh);
    for (int64_t r = 0; r < rows; ++r) {
      const double m = mean_.value(r), s = rstd_.value(r);
      double ag = 0.0, agx = 0.0, sg = 0.0, sgx = 0.0;
      for (int64_t k = 0; k < C; ++k) {
        const auto kc = static_cast<size_t>(k);
        xh[kc] = (x_.value(r * C + k) - m) * s;
        g[kc] = dy_.value(r * C + k) * gamma_.value(k);
        sg += g[kc], sgx += g[kc] * xh[kc], ag += std::fabs(g[kc]), agx += std::fabs(g[kc] * xh[kc]);
        mag_g[kc] += std::fabs(dy_.value(r * C + k) * xh[kc]);
        mag_b[kc] += std::fabs(dy_.value(r * C + k));
      }
      const double a = sg / static_cast<double>(C), b = sgx / static_cast<double>(C);
      const double e_a = 2 * (C - 1) * kU32 * ag / static_cast<double>(C) + 2 * kU32 * std::fabs(a);
      const double e_b = 2 * (C - 1) * kU32 * agx / static_cast<double>(C) + 2 * kU32 * std::fabs(b);
      for (int64_t k = 0; k < C; ++k) {
        const auto kc = static_cast<size_t>(k);
        t.dx[static_cast<size_t>(r * C + k)] =
            s * (e_a + std::fabs(xh[kc]) * e_b) + 8 * kU32 * s * (std::fabs(g[kc]) + std::fabs(a) + std::fabs(xh[kc] * b));
      }
    }
    for (int64_t k = 0; k < C; ++k) {
      t.dg.push_back(2 * (rows + 1) * kU32 * mag_g[static_cast<size_t>(k)]);
      t.db.push_back(2 * (rows + 1) * kU32 * mag_b[static_cast<size_t>(k)]);
    }
    return t;
  }
  double param_cpu_tol(double base, double old, double w) const {
    return base + 4 * kU32 * (std::fabs(old) + std::fabs(w)) + store_ulp(param_t_, w);
  }

  DType dx_t_, param_t_;
  Host x_, dy_, gamma_, dx0_, dg0_, db0_, mean_, rstd_;
  LnRef f_;
};

// The op against central differences of the float64 forward (so against the
// definition, not the analytic gradient): L = sum(dy LN(x; g, b)); with
// h = 1e-6 the differences are good to ~1e-10 (truncation O(h^2 L''') ~
// 1e-12, cancellation ~1e-16 |L| / h); the op is fp32: 1e-5 absolute is
// ~100x its rounding error at these magnitudes (|dx| ~ 1, C = 24) and far
// below any formula error.
class LnFiniteDifferences : public Instance {
 public:
  LnFiniteDifferences() {
    Gen g(seed_of("layernorm_fd"));
    x_ = ln_input(g, DType::F32, kRows, kC);
    dy_ = g.nonzero(DType::F32, Shape{kRows, kC});
    gamma_ = g.nonzero(DType::F32, Shape{kC}, 0.5f, 1.5f);
    beta_ = g.nonzero(DType::F32, Shape{kC});
    const LnRef f = layernorm_ref(x_.values(), gamma_.values(), beta_.values(), kRows, kC, kEps);
    mean_ = Host(DType::F32, Shape{kRows}), rstd_ = Host(DType::F32, Shape{kRows});
    for (int64_t r = 0; r < kRows; ++r) {
      mean_.set(r, static_cast<float>(f.mean[static_cast<size_t>(r)]));
      rstd_.set(r, static_cast<float>(f.rstd[static_cast<size_t>(r)]));
    }
  }
  Outputs run(Device& dev) override {
    DeviceBuffer dx = dev.alloc(x_.shape, DType::F32, MemCategory::Activations);
    DeviceBuffer dg = dev.alloc(Shape{kC}, DType::F32, MemCategory::Activations);
    DeviceBuffer db = dev.alloc(Shape{kC}, DType::F32, MemCategory::Activations);
    dev.layernorm_backward(dx, dg, db, put(dev, dy_), put(dev, x_), put(dev, mean_), put(dev, rstd_), put(dev, gamma_),
                           GradMode::Overwrite, GradMode::Overwrite);
    Outputs o;
    o.add("dx", dev, dx), o.add("dgamma", dev, dg), o.add("dbeta", dev, db);
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    std::vector<double> in[3] = {x_.values(), gamma_.values(), beta_.values()};
    const std::vector<double> dyv = dy_.values();
    auto loss = [&]() {
      const LnRef f = layernorm_ref(in[0], in[1], in[2], kRows, kC, kEps);
      double l = 0.0;
      for (size_t e = 0; e < f.y.size(); ++e) l += dyv[e] * f.y[e];
      return l;
    };
    const double h = 1e-6;
    const char* names[3] = {"dx", "dgamma", "dbeta"};
    for (int which = 0; which < 3; ++which) {
      std::vector<double> num(in[which].size());
      for (size_t i = 0; i < num.size(); ++i) {
        const double x0 = in[which][i];
        in[which][i] = x0 + h;
        const double lp = loss();
        in[which][i] = x0 - h;
        const double lm = loss();
        in[which][i] = x0;
        num[i] = (lp - lm) / (2 * h);
      }
      c.near(names[which], got[names[which]], num, [](int64_t) { return 1e-5; });
    }
  }
  // Each backend is within 1e-5 of the same differences, so within 2e-5 of
  // the other; the bits may differ (the GPU's row sums run in another order:
  // one ulp apart on the first lease, H200).
  void check_vs_cpu(Check& c, const Outputs& got, const Outputs& cpu) override {
    for (const char* n : {"dx", "dgamma", "dbeta"}) c.vs_cpu(n, got[n], cpu[n], [](int64_t, double) { return 2e-5; });
  }

 private:
  static constexpr int64_t kRows = 5, kC = 24;
  Host x_, dy_, gamma_, beta_, mean_, rstd_;
};

// ---- head layouts: pure copies through the dtype conversion -----------------------------------------
// split_heads: [B,T,3,H,D] (packed as [B*T,3C], [B,T,3C] or [B,T,3,C]) ->
// q, k, v [B,H,T,D]; merge_qkv_grads back. merge_heads: [B,H,T,D] ->
// [B*T,C] (or [B,T,H,D]); split_heads_grad back. Exact: each element is the
// source value rounded to the destination dtype; the CPU's bits.
class Heads : public Instance {
 public:
  Heads(int64_t B, int64_t T, int64_t H, int64_t D, DType packed, DType head, bool split)
      : B_(B), T_(T), H_(H), D_(D), packed_(packed), head_(head), split_(split) {
    Gen g(seed_of("heads", B, T, H, D, packed, head, split));
    const int64_t C = H * D;
    if (split)
      for (Shape s : {Shape{B * T, 3 * C}, Shape{B, T, 3 * C}, Shape{B, T, 3, C}}) in_.push_back(g.nonzero(packed, s));
    else
      in_.push_back(g.nonzero(head, Shape{B, H, T, D}));
  }
  Outputs run(Device& dev) override {
    Outputs o;
    const int64_t C = H_ * D_;
    const Shape hs{B_, H_, T_, D_};
    if (split_) {
      for (size_t k = 0; k < in_.size(); ++k) {
        DeviceBuffer qkv = put(dev, in_[k]);
        DeviceBuffer q = put(dev, filled(head_, hs, NAN)), kk = put(dev, filled(head_, hs, NAN)), v = put(dev, filled(head_, hs, NAN));
        dev.split_heads(q, kk, v, qkv);
        DeviceBuffer back = put(dev, filled(packed_, in_[k].shape, NAN));
        dev.merge_qkv_grads(back, q, kk, v);
        const std::string s = in_[k].shape.str();
        o.add("q" + s, dev, q), o.add("k" + s, dev, kk), o.add("v" + s, dev, v), o.add("back" + s, dev, back);
      }
      return o;
    }
    DeviceBuffer in = put(dev, in_[0]);
    for (Shape ms : {Shape{B_ * T_, C}, Shape{B_, T_, H_, D_}}) {
      DeviceBuffer out = put(dev, filled(packed_, ms, NAN)), back = put(dev, filled(head_, hs, NAN));
      dev.merge_heads(out, in);
      dev.split_heads_grad(back, out);
      o.add("out" + ms.str(), dev, out), o.add("back" + ms.str(), dev, back);
    }
    return o;
  }
  void check(Check& c, Device&, const Outputs& got) override {
    const int64_t C = H_ * D_, n = B_ * H_ * T_ * D_;
    auto head_at = [&](int64_t b, int64_t h, int64_t t, int64_t d) { return ((b * H_ + h) * T_ + t) * D_ + d; };
    if (split_) {
      for (const Host& qkv : in_) {
        const std::string s = qkv.shape.str();
        std::vector<double> part[3], back(static_cast<size_t>(qkv.numel()));
        for (auto& p : part) p.resize(static_cast<size_t>(n));
        for (int64_t pt = 0; pt < 3; ++pt)
          for (int64_t b = 0; b < B_; ++b)
            for (int64_t h = 0; h < H_; ++h)
              for (int64_t t = 0; t < T_; ++t)
                for (int64_t d = 0; d < D_; ++d) {
                  const int64_t src = (b * T_ + t) * 3 * C + pt * C + h * D_ + d;
                  const double v = stored(head_, qkv.value(src));
                  part[pt][static_cast<size_t>(head_at(b, h, t, d))] = v;
                  back[static_cast<size_t>(src)] = stored(packed_, v);
                }
        c.exact("q" + s, got["q" + s], part[0]);
        c.exact("k" + s, got["k" + s], part[1]);
        c.exact("v" + s, got["v" + s], part[2]);
        c.exact("back" + s, got["back" + s], back);
      }
      return;
    }
    std::vector<double> out(static_cast<size_t>(n)), back(static_cast<size_t>(n));
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t h = 0; h < H_; ++h)
        for (int64_t t = 0; t < T_; ++t)
          for (int64_t d = 0; d < D_; ++d) {
            const int64_t src = head_at(b, h, t, d);
            const double v = stored(packed_, in_[0].value(src));
            out[static_cast<size_t>((b * T_ + t) * C + h * D_ + d)] = v;
            back[static_cast<size_t>(src)] = stored(head_, v);
          }
    for (Shape ms : {Shape{B_ * T_, C}, Shape{B_, T_, H_, D_}}) {
      c.exact("out" + ms.str(), got["out" + ms.str()], out);
      c.exact("back" + ms.str(), got["back" + ms.str()], back);
    }
  }

 private:
  int64_t B_, T_, H_, D_;
  DType packed_, head_;
  bool split_;
  std::vector<Host> in_;
};

std::string dims(int64_t rows, int64_t C) { return std::to_string(rows) + "x" + std::to_string(C); }

}  // namespace

void add_layernorm_cases(std::vector<OpCase>& v) {
  struct Fwd {
    int64_t rows, C;
    DType x, param, out;
    Size size;
    DType residual_b;  // the residual branch's dtype (the sum has x's)
  };
  const Fwd fwd[] = {{37, 96, DType::F32, DType::F32, DType::F32, Size::Small, DType::F32},
                     {64, 300, DType::F32, DType::F32, DType::F32, Size::Small, DType::F32},
                     {37, 1024, DType::F32, DType::F32, DType::F32, Size::Small, DType::F32},
                     {37, 96, DType::BF16, DType::F32, DType::BF16, Size::Small, DType::BF16},
                     {37, 96, DType::BF16, DType::BF16, DType::BF16, Size::Small, DType::BF16},
                     {64, 300, DType::F16, DType::F16, DType::F16, Size::Small, DType::F16},
                     {37, 96, DType::F16, DType::F32, DType::F16, Size::Small, DType::F16},
                     {37, 768, DType::F16, DType::F32, DType::F32, Size::Small, DType::F16},
                     {5, 33, DType::F32, DType::BF16, DType::F16, Size::Small, DType::F32},
                     {70, 257, DType::F32, DType::F32, DType::F32, Size::Small, DType::F32},
                     {70, 257, DType::BF16, DType::F32, DType::BF16, Size::Small, DType::F32},
                     {70, 257, DType::F16, DType::F16, DType::F16, Size::Small, DType::F16},
                     {128, 768, DType::BF16, DType::F32, DType::BF16, Size::Bert, DType::BF16},
                     {128, 768, DType::F32, DType::F32, DType::F32, Size::Bert, DType::F32}};
  const char* ftol = "mean ~u sum|x|, rstd ~(C + 10) u, out |gamma| (|xhat| (C + 16) u + rstd e_mean) + 2u|y| (+ half an ulp)";
  for (const Fwd& f : fwd) {
    const std::string d = "x " + dt(f.x) + " param " + dt(f.param) + " out " + dt(f.out);
    const std::string rd = dt(f.x) + "+" + dt(f.residual_b) + "->" + dt(f.x) + " param " + dt(f.param) + " out " + dt(f.out);
    const std::string shape = (f.size == Size::Bert ? "BERT " : "") + dims(f.rows, f.C);
    v.push_back(make_case<LnForward>("layernorm_forward", shape, d, f.size, ftol, false, f.rows, f.C, f.x, f.param, f.out, false, f.x));
    v.push_back(make_case<LnForward>("residual_layernorm_forward", shape, rd, f.size,
                                     std::string("sum exact; ") + ftol + "; == add + layernorm_forward bit for bit", false,
                                     f.rows, f.C, f.x, f.param, f.out, true, f.residual_b));
  }
  struct Bwd {
    int64_t rows, C;
    DType x, dy, dx, param;
    Size size;
  };
  const Bwd bwd[] = {{37, 96, DType::F32, DType::F32, DType::F32, DType::F32, Size::Small},
                     {100, 200, DType::F32, DType::F32, DType::F32, DType::F32, Size::Small},
                     {100, 300, DType::F32, DType::F32, DType::F32, DType::F32, Size::Small},
                     {37, 96, DType::BF16, DType::BF16, DType::BF16, DType::BF16, Size::Small},
                     {37, 96, DType::F16, DType::F16, DType::F16, DType::F32, Size::Small},
                     {70, 768, DType::BF16, DType::BF16, DType::BF16, DType::F32, Size::Small},
                     {33, 128, DType::F16, DType::F16, DType::F16, DType::F16, Size::Small},
                     {5, 40, DType::BF16, DType::F32, DType::BF16, DType::BF16, Size::Small},
                     {128, 768, DType::BF16, DType::BF16, DType::BF16, DType::F32, Size::Bert}};
  const char* btol = "dx (C + 16) u of its magnitudes + 2u|dx|, dgamma/dbeta (rows + 8) u (+ half an ulp)";
  for (const Bwd& b : bwd)
    v.push_back(make_case<LnBackward>("layernorm_backward",
                                      (b.size == Size::Bert ? "BERT " : "") + dims(b.rows, b.C) + " x4 grad modes",
                                      "x " + dt(b.x) + " dy " + dt(b.dy) + " dx " + dt(b.dx) + " param " + dt(b.param),
                                      b.size, btol, false, b.rows, b.C, b.x, b.dy, b.dx, b.param));
  v.push_back(make_case<LnFiniteDifferences>("layernorm_backward", "5x24 vs central differences", "f32", Size::Small,
                                             "1e-5 absolute (~100x fp32 rounding)", false));
  struct Dims {
    int64_t B, T, H, D;
  };
  for (Dims d : {Dims{2, 5, 3, 4}, Dims{3, 33, 2, 64}})
    for (DType packed : kFloatTypes)
      for (DType head : kFloatTypes) {
        const std::string shape = "B" + std::to_string(d.B) + " T" + std::to_string(d.T) + " H" + std::to_string(d.H) + " D" + std::to_string(d.D);
        const std::string types = "packed " + dt(packed) + " heads " + dt(head);
        v.push_back(make_case<Heads>("split_heads", shape + " 3 packed shapes, merge_qkv_grads back", types, Size::Small,
                                     "exact (a copy through the dtype conversion)", true, d.B, d.T, d.H, d.D, packed, head, true));
        v.push_back(make_case<Heads>("merge_heads", shape + " 2 merged shapes, split_heads_grad back", types, Size::Small,
                                     "exact (a copy through the dtype conversion)", true, d.B, d.T, d.H, d.D, packed, head, false));
      }
  for (DType t : {DType::F32, DType::BF16}) {
    v.push_back(make_case<Heads>("split_heads", "BERT B1 T128 H12 D64", "packed " + dt(t) + " heads " + dt(t), Size::Bert,
                                 "exact", true, int64_t{1}, int64_t{128}, int64_t{12}, int64_t{64}, t, t, true));
    v.push_back(make_case<Heads>("merge_heads", "BERT B1 T128 H12 D64", "packed " + dt(t) + " heads " + dt(t), Size::Bert,
                                 "exact", true, int64_t{1}, int64_t{128}, int64_t{12}, int64_t{64}, t, t, false));
  }
}

}  // namespace mpb::opcheck
