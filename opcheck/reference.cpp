// The float64 op references of reference.h, and the error bounds that go
// with them where a bound needs the reference's intermediate values.
//
// u = 2^-24 (kU32). A sum of n fp32 terms in any order is within
// gamma_n sum|terms| <= (n + 1) u sum|terms| of the exact sum (Higham,
// Accuracy and Stability, Thm 3.1); each further fp32 operation adds u
// relative; ops/approx_math.h's exp is within 2 ulp (4u relative).
#include "opcheck/reference.h"

#include <algorithm>
#include <cmath>

#include "opcheck/host.h"

namespace mpb::opcheck {

// GELU tolerances (fp32 evaluation):
//  t = tanh_approx(u) has |t - tanh(u)| <= eps_t = 2e-7 (approx_math.h; the
//  exhaustive maximum over fp32 u in [-20, 20] is 1.79e-7). u itself is
//  computed with ~4 roundings (relative 4u), which moves tanh by at most
//  4u |u| sech^2(u) <= 4u * 0.45 = 1.1e-7. So |t_err| <= 3.1e-7.
//  gelu = 0.5 x (1 + t): error 0.5 |x| |t_err| + 2 roundings of <= |x|.
//  gelu' = 0.5 (1 + t) + 0.5 x (1 - t^2) du, du = c (1 + 3 a x^2): the t error
//  enters with weight 0.5 + |x t| du; ~6 roundings of terms <= 1 + 0.5 |x| du.
//  (Near saturation 1 - t^2 cancels, which is what makes the |x| du weight
//  real: an fp32 gelu' at |x| ~ 5 is only good to ~1e-5 absolute.)
namespace {
constexpr double kTanhErr = 2e-7 + 1.1e-7;
constexpr double kGeluC = 0.79788456080286535588;  // sqrt(2/pi)
}  // namespace

double gelu_eval_tol(double x) { return 0.5 * std::fabs(x) * kTanhErr + 3 * kU32 * std::fabs(x) + 1e-12; }
double gelu_grad_eval_tol(double x) {
  const double du = kGeluC * (1.0 + 3.0 * 0.044715 * x * x);
  return kTanhErr * (0.5 + std::fabs(x) * du) + 6 * kU32 * (1.0 + 0.5 * std::fabs(x) * du);
}

Product gemm_ref(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t n, int64_t k,
                 bool ta, bool tb, int64_t a0, int64_t b0) {
  Product r;
  r.p.assign(static_cast<size_t>(m * n), 0.0);
  r.s.assign(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0, mag = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = a[static_cast<size_t>(a0 + (ta ? p * m + i : i * k + p))];
        const double bv = b[static_cast<size_t>(b0 + (tb ? j * k + p : p * n + j))];
        acc += av * bv;
        mag += std::fabs(av * bv);
      }
      r.p[static_cast<size_t>(i * n + j)] = acc;
      r.s[static_cast<size_t>(i * n + j)] = mag;
    }
  return r;
}

LnRef layernorm_ref(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& b,
                    int64_t rows, int64_t C, double eps) {
  LnRef r;
  r.mean.resize(static_cast<size_t>(rows));
  r.rstd.resize(static_cast<size_t>(rows));
  r.y.resize(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = &x[static_cast<size_t>(i * C)];
    double s = 0.0;
    for (int64_t c = 0; c < C; ++c) s += xr[c];
    const double mu = s / static_cast<double>(C);
    double v = 0.0;
    for (int64_t c = 0; c < C; ++c) v += (xr[c] - mu) * (xr[c] - mu);
    const double rs = 1.0 / std::sqrt(v / static_cast<double>(C) + eps);
    r.mean[static_cast<size_t>(i)] = mu;
    r.rstd[static_cast<size_t>(i)] = rs;
    for (int64_t c = 0; c < C; ++c)
      r.y[static_cast<size_t>(i * C + c)] = (xr[c] - mu) * rs * g[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
  }
  return r;
}

LnGrad layernorm_grad_ref(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& dy,
                          const LnRef& f, int64_t rows, int64_t C) {
  LnGrad r;
  r.dx.resize(x.size());
  r.dg.assign(static_cast<size_t>(C), 0.0);
  r.db.assign(static_cast<size_t>(C), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    const double mu = f.mean[static_cast<size_t>(i)], rs = f.rstd[static_cast<size_t>(i)];
    double a = 0.0, bsum = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      const size_t e = static_cast<size_t>(i * C + c);
      const double gc = dy[e] * g[static_cast<size_t>(c)];
      a += gc;
      bsum += gc * (x[e] - mu) * rs;
    }
    a /= static_cast<double>(C), bsum /= static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c) {
      const size_t e = static_cast<size_t>(i * C + c);
      const double xhat = (x[e] - mu) * rs;
      r.dx[e] = rs * (dy[e] * g[static_cast<size_t>(c)] - a - xhat * bsum);
      r.dg[static_cast<size_t>(c)] += dy[e] * xhat;
      r.db[static_cast<size_t>(c)] += dy[e];
    }
  }
  return r;
}

XentRef xent_ref(const std::vector<double>& x, const std::vector<int32_t>& labels, int64_t B, int64_t C) {
  XentRef r;
  r.probs.resize(x.size());
  r.probs_tol.resize(x.size());
  for (int64_t b = 0; b < B; ++b) {
    const double* row = &x[static_cast<size_t>(b * C)];
    double mx = row[0];
    for (int64_t c = 1; c < C; ++c) mx = std::max(mx, row[c]);
    double sum = 0, spread = 0;
    for (int64_t c = 0; c < C; ++c) {
      sum += std::exp(row[c] - mx);
      spread = std::max(spread, mx - row[c]);
    }
    const int32_t y = labels[static_cast<size_t>(b)];
    if (y >= 0) {
      const double row_loss = std::log(sum) - (row[y] - mx);
      r.loss += row_loss;
      // fp32 evaluation: x - max rounds (relative u of <= spread, carried
      // into exp as an absolute u*spread), expf <= 1 ulp, a C-term sum (C u
      // relative), logf <= 1 ulp, two more subtractions: per row
      // (C + 4 + 2 spread) u + 3 u |row loss| + 2 u log(sum).
      r.loss_tol += (static_cast<double>(C) + 4 + 2 * spread) * kU32 + 3 * kU32 * std::fabs(row_loss) +
                    2 * kU32 * std::log(sum);
    }
    for (int64_t c = 0; c < C; ++c) {
      const auto i = static_cast<size_t>(b * C + c);
      r.probs[i] = std::exp(row[c] - mx) / sum;
      // relative: (x - max) rounding, expf, the sum, the division
      r.probs_tol[i] = (static_cast<double>(C) + 4 + spread) * kU32 * r.probs[i];
    }
  }
  return r;
}

// Attention bounds. Per row i: the logits l_j = scale q_i.k_j (+ mask) carry
// the fp32 dot's error ((D + 5) u sum|q k|, the GEMM bound, times the GEMM
// factor) times scale plus one rounding: dl. P's relative error: twice the
// logit error, the max subtraction (2u times the logit range), the fp32 sum
// ((T + 16) u with ~10 more roundings), and the online rescales: a backend
// visits keys in tiles (64 on the CPU, 32 on the GPU), so P passes through up
// to ceil(T/32) rescales, 2u each; plus the caller's extra (a 16-bit probs
// tensor). O = P V: P's error times sum P|v| plus its own fp32 sum
// ((T + 4) u) plus the output rounding. lse: 3 dl + P's error + 4u (|lse| + 1).
AttnRef attention_ref(const AttnInputs& p, double extra_p, DType out_dt, double gemm) {
  const int64_t T = p.T, D = p.D, BH = p.B * p.H;
  const double rescales = 2.0 * static_cast<double>((T + 31) / 32) * kU32;
  AttnRef r;
  r.P.assign(static_cast<size_t>(BH * T * T), 0.0);
  r.O.assign(static_cast<size_t>(BH * T * D), 0.0);
  r.lse.assign(static_cast<size_t>(BH * T), 0.0);
  r.eps_p.assign(r.lse.size(), 0.0);
  r.tol_o.assign(r.O.size(), 0.0);
  r.tol_lse.assign(r.lse.size(), 0.0);
  std::vector<double> l(static_cast<size_t>(T));
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t b = bh / p.H;
    for (int64_t i = 0; i < T; ++i) {
      double mx = -INFINITY, dl = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        double dot = 0.0, mag = 0.0;
        for (int64_t d = 0; d < D; ++d) {
          dot += p.q[p.at(bh, i, d)] * p.k[p.at(bh, j, d)];
          mag += std::fabs(p.q[p.at(bh, i, d)] * p.k[p.at(bh, j, d)]);
        }
        const bool valid = p.kv[static_cast<size_t>(b * T + j)] != 0;
        l[static_cast<size_t>(j)] = p.scale * dot + (valid ? 0.0 : p.mask);
        mx = std::max(mx, l[static_cast<size_t>(j)]);
        if (valid) dl = std::max(dl, gemm * p.scale * (D + 5) * kU32 * mag + kU32 * std::fabs(l[static_cast<size_t>(j)]));
      }
      double sum = 0.0, range = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        sum += std::exp(l[static_cast<size_t>(j)] - mx);
        if (p.kv[static_cast<size_t>(b * T + j)]) range = std::max(range, mx - l[static_cast<size_t>(j)]);
      }
      const size_t row = static_cast<size_t>(bh * T + i);
      r.lse[row] = mx + std::log(sum);
      r.eps_p[row] = 2 * dl + 2 * kU32 * range + gemm * (T + 16) * kU32 + rescales + extra_p;
      r.tol_lse[row] = 3 * dl + r.eps_p[row] + 4 * kU32 * (std::fabs(r.lse[row]) + 1.0);
      for (int64_t j = 0; j < T; ++j)
        r.P[static_cast<size_t>((bh * T + i) * T + j)] = std::exp(l[static_cast<size_t>(j)] - mx) / sum;
      for (int64_t d = 0; d < D; ++d) {
        double o = 0.0, mag = 0.0;
        for (int64_t j = 0; j < T; ++j) {
          const size_t e = static_cast<size_t>((bh * T + i) * T + j);
          const double pij = r.P[e] * p.drop_at(e);  // dropout acts on the normalised P
          o += pij * p.v[p.at(bh, j, d)];
          mag += pij * std::fabs(p.v[p.at(bh, j, d)]);
        }
        r.O[p.at(bh, i, d)] = o;
        r.tol_o[p.at(bh, i, d)] = (r.eps_p[row] + p.drop_u() + gemm * (T + 4) * kU32) * mag + half_ulp_of(out_dt, o);
      }
    }
  }
  return r;
}

// The exact gradients (dS = P (dP - rowsum(P dP))) and bounds for a
// computation whose P has relative error eps_p, whose D_i has absolute error
// d_err[row] and whose dS carries extra_ds more: dP's dot ((D + 2) u of its
// magnitudes), dS = P (dP - D) (3 roundings), then the sums over T keys /
// queries ((T + 4) u of their magnitudes) and the output rounding.
AttnGradRef attention_grad_ref(const AttnInputs& p, const AttnRef& f, const std::vector<double>& d_err,
                               double extra_ds, DType out_dt, double gemm) {
  const int64_t T = p.T, D = p.D, BH = p.B * p.H;
  AttnGradRef g;
  const size_t n = static_cast<size_t>(BH * T * D);
  g.dq.assign(n, 0.0), g.dk.assign(n, 0.0), g.dv.assign(n, 0.0);
  g.tol_dq.assign(n, 0.0), g.tol_dk.assign(n, 0.0), g.tol_dv.assign(n, 0.0);
  std::vector<double> mag_dq(n, 0.0), mag_dk(n, 0.0);
  std::vector<double> dP(static_cast<size_t>(T)), dP_err(static_cast<size_t>(T));
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t i = 0; i < T; ++i) {
      const size_t row = static_cast<size_t>(bh * T + i);
      double Di = 0.0;
      for (int64_t j = 0; j < T; ++j) {
        double s = 0.0, mag = 0.0;
        for (int64_t d = 0; d < D; ++d) {
          s += p.dout[p.at(bh, i, d)] * p.v[p.at(bh, j, d)];
          mag += std::fabs(p.dout[p.at(bh, i, d)] * p.v[p.at(bh, j, d)]);
        }
        // With dropout the gradient wrt P is the masked dP (O = drop(P) V).
        const double m = p.drop_at(static_cast<size_t>((bh * T + i) * T + j));
        dP[static_cast<size_t>(j)] = m * s;
        dP_err[static_cast<size_t>(j)] = m * (gemm * (D + 2) * kU32 * mag + p.drop_u() * std::fabs(s));
        Di += f.P[static_cast<size_t>((bh * T + i) * T + j)] * m * s;
      }
      for (int64_t j = 0; j < T; ++j) {
        const double pij = f.P[static_cast<size_t>((bh * T + i) * T + j)];
        if (pij == 0.0) continue;  // padded key: exactly 0 everywhere
        const double pdrop = pij * p.drop_at(static_cast<size_t>((bh * T + i) * T + j));
        const double diff = dP[static_cast<size_t>(j)] - Di, ds = pij * diff;
        const double ds_err = f.eps_p[row] * pij * std::fabs(diff) + pij * (dP_err[static_cast<size_t>(j)] + d_err[row]) +
                              (3 * kU32 + extra_ds) * std::fabs(ds);
        for (int64_t d = 0; d < D; ++d) {
          const double qv = p.q[p.at(bh, i, d)], kv = p.k[p.at(bh, j, d)], dov = p.dout[p.at(bh, i, d)];
          g.dq[p.at(bh, i, d)] += p.scale * ds * kv;
          g.dk[p.at(bh, j, d)] += p.scale * ds * qv;
          g.dv[p.at(bh, j, d)] += pdrop * dov;
          g.tol_dq[p.at(bh, i, d)] += p.scale * ds_err * std::fabs(kv);
          g.tol_dk[p.at(bh, j, d)] += p.scale * ds_err * std::fabs(qv);
          g.tol_dv[p.at(bh, j, d)] += (f.eps_p[row] + p.drop_u() + gemm * (T + 4) * kU32) * pdrop * std::fabs(dov);
          mag_dq[p.at(bh, i, d)] += p.scale * std::fabs(ds * kv);
          mag_dk[p.at(bh, j, d)] += p.scale * std::fabs(ds * qv);
        }
      }
    }
  for (size_t e = 0; e < n; ++e) {
    g.tol_dq[e] += gemm * (T + 4) * kU32 * mag_dq[e] + half_ulp_of(out_dt, g.dq[e]);
    g.tol_dk[e] += gemm * (T + 4) * kU32 * mag_dk[e] + half_ulp_of(out_dt, g.dk[e]);
    g.tol_dv[e] += half_ulp_of(out_dt, g.dv[e]);
  }
  return g;
}

// Fused: D_i = sum_d dO O_stored, so |sum_d dO (O_stored - O)| plus its fp32
// sum. Unfused: rowsum(P dP) with P's error and dP's.
std::vector<double> d_err_fused(const AttnInputs& p, const AttnRef& f, const std::vector<double>& o_stored) {
  std::vector<double> e(static_cast<size_t>(p.B * p.H * p.T), 0.0);
  for (int64_t bh = 0; bh < p.B * p.H; ++bh)
    for (int64_t i = 0; i < p.T; ++i) {
      double diff = 0.0, mag = 0.0;
      for (int64_t d = 0; d < p.D; ++d) {
        const size_t a = p.at(bh, i, d);
        diff += p.dout[a] * (o_stored[a] - f.O[a]);
        mag += std::fabs(p.dout[a] * o_stored[a]);
      }
      e[static_cast<size_t>(bh * p.T + i)] = std::fabs(diff) + (p.D + 2) * kU32 * mag;
    }
  return e;
}

std::vector<double> d_err_unfused(const AttnInputs& p, const AttnRef& f, double gemm) {
  std::vector<double> e(static_cast<size_t>(p.B * p.H * p.T), 0.0);
  for (int64_t bh = 0; bh < p.B * p.H; ++bh)
    for (int64_t i = 0; i < p.T; ++i) {
      const size_t row = static_cast<size_t>(bh * p.T + i);
      double mag = 0.0;
      for (int64_t j = 0; j < p.T; ++j) {
        double dp = 0.0, dp_mag = 0.0;
        for (int64_t d = 0; d < p.D; ++d) {
          const double x = p.dout[p.at(bh, i, d)] * p.v[p.at(bh, j, d)];
          dp += x, dp_mag += std::fabs(x);
        }
        const double pij = f.P[static_cast<size_t>((bh * p.T + i) * p.T + j)];
        const double m = p.drop_at(static_cast<size_t>((bh * p.T + i) * p.T + j));
        mag += pij * m * (std::fabs(dp) * (1 + f.eps_p[row] + p.drop_u()) + gemm * (p.D + 2) * kU32 * dp_mag);
      }
      e[row] = (f.eps_p[row] + gemm * (p.T + 2) * kU32) * mag;
    }
  return e;
}

//   p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
void adamw_ref_step(AdamRef& s, double g, const AdamWHyper& h) {
  const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  const double t = static_cast<double>(h.step);
  s.p *= 1.0 - lr * wd;
  s.m = b1 * s.m + (1.0 - b1) * g;
  s.m_mag = b1 * s.m_mag + (1.0 - b1) * std::fabs(g);
  s.v = b2 * s.v + (1.0 - b2) * g * g;
  const double denom = std::sqrt(s.v) / std::sqrt(1.0 - std::pow(b2, t)) + eps;
  s.p -= lr / (1.0 - std::pow(b1, t)) * s.m / denom;
}

void paper_lamb_layer(std::vector<double>& x, const std::vector<double>& g, std::vector<double>& m,
                      std::vector<double>& v, const PaperLamb& h, bool decayed, long long t) {
  const size_t n = x.size();
  std::vector<double> r(n);
  const double c1 = h.bias_correction ? 1.0 - std::pow(h.beta1, double(t)) : 1.0;
  const double c2 = h.bias_correction ? 1.0 - std::pow(h.beta2, double(t)) : 1.0;
  double x_norm = 0.0, r_norm = 0.0;
  for (size_t i = 0; i < n; ++i) {
    m[i] = h.beta1 * m[i] + (1.0 - h.beta1) * g[i];
    v[i] = h.beta2 * v[i] + (1.0 - h.beta2) * g[i] * g[i];
    r[i] = (m[i] / c1) / (std::sqrt(v[i] / c2) + h.eps) + (decayed ? h.wd * x[i] : 0.0);
    x_norm += x[i] * x[i];
    r_norm += r[i] * r[i];
  }
  x_norm = std::sqrt(x_norm);
  r_norm = std::sqrt(r_norm);
  const double ratio = (x_norm > 0.0 && r_norm > 0.0) ? x_norm / r_norm : 1.0;
  for (size_t i = 0; i < n; ++i) x[i] -= h.lr * ratio * r[i];
}

void paper_lamb_step(std::vector<double>& x, std::vector<double>& m, std::vector<double>& v,
                     const std::vector<double>& g, const std::vector<LambTensor>& tensors, const PaperLamb& h,
                     DType param_t, long long t) {
  for (const LambTensor& layer : tensors) {
    const auto b = static_cast<ptrdiff_t>(layer.begin), e = static_cast<ptrdiff_t>(layer.end);
    std::vector<double> xs(x.begin() + b, x.begin() + e), gs(g.begin() + b, g.begin() + e);
    std::vector<double> ms(m.begin() + b, m.begin() + e), vs(v.begin() + b, v.begin() + e);
    paper_lamb_layer(xs, gs, ms, vs, h, layer.decayed, t);
    for (ptrdiff_t i = 0; i < e - b; ++i) {
      const auto k = static_cast<size_t>(b + i), j = static_cast<size_t>(i);
      x[k] = stored(param_t, xs[j]), m[k] = ms[j], v[k] = vs[j];
    }
  }
}

}  // namespace mpb::opcheck
