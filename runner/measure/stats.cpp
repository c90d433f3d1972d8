#include "runner/measure/stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>


namespace mpb {

double quantile(std::vector<double> v, double q) {
  if (v.empty()) throw std::invalid_argument("quantile of no samples");
  std::sort(v.begin(), v.end());
  double pos = q * double(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0.0;
  for (double x : v) s += x;
  return s / double(v.size());
}

double stdev(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  const double m = mean(v);
  double s = 0.0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size()));
}

StepSpread step_spread(const std::vector<double>& samples) {
  StepSpread s;
  s.samples = int64_t(samples.size());
  if (samples.empty()) return s;
  const double med = median(samples);
  s.cv = stdev(samples) / mean(samples);
  std::vector<double> dev;
  dev.reserve(samples.size());
  for (double x : samples) dev.push_back(std::fabs(x - med));
  s.robust_cv = med > 0 ? 1.4826 * median(dev) / med : 0.0;  // 1.4826: MAD -> sigma for a normal
  s.p90_over_median = med > 0 ? quantile(samples, 0.9) / med : 1.0;
  for (double x : samples) s.outliers += x > 3.0 * med;
  return s;
}

std::vector<std::vector<double>> interval_units(const std::vector<std::vector<double>>& repeats, int blocks_if_one) {
  std::vector<std::vector<double>> units;
  for (const auto& r : repeats)
    if (!r.empty()) units.push_back(r);
  if (units.size() != 1) return units;
  const std::vector<double> one = units[0];
  const size_t blocks = std::min<size_t>(size_t(std::max(1, blocks_if_one)), one.size());
  units.clear();
  for (size_t b = 0; b < blocks; ++b)
    units.emplace_back(one.begin() + long(b * one.size() / blocks), one.begin() + long((b + 1) * one.size() / blocks));
  return units;
}

namespace {

// ln Gamma(a + b) - ln Gamma(a) for a >= b > 0. For large a both terms are huge (8e7 at
// a = 5e6) and their difference keeps only ~1e-8 of its digits; Stirling's series for
// the difference keeps them all: (a - 1/2) log1p(b/a) + b log(a + b) - b + S(a + b) - S(a),
// S(z) = 1/(12z) - 1/(360z^3) + 1/(1260z^5) - 1/(1680z^7), whose next term is below 1e-18
// for z >= 50.
double lgamma_difference(double a, double b) {
  if (a < 50.0) return std::lgamma(a + b) - std::lgamma(a);
  auto series = [](double z) {
    const double z2 = z * z;
    return (1.0 / 12.0 - (1.0 / 360.0 - (1.0 / 1260.0 - 1.0 / (1680.0 * z2)) / z2) / z2) / z;
  };
  return (a - 0.5) * std::log1p(b / a) + b * std::log(a + b) - b + (series(a + b) - series(a));
}

// I_x(a, b) given x and its complement y = 1 - x, each computed without cancellation by the
// caller: near x = 1 (a t distribution's large df or small t), 1 - x in double lost up to
// 1e-8 relative (issue 40 item 7) and rounded the centre to exactly 0.5.
double incomplete_beta_xy(double x, double y, double a, double b) {
  if (x <= 0.0) return 0.0;
  if (y <= 0.0) return 1.0;
  // Continued fraction (modified Lentz), which converges fast for
  // x < (a + 1) / (a + b + 2); the symmetry I_x(a,b) = 1 - I_y(b,a) covers the rest.
  if (x > (a + 1.0) / (a + b + 2.0)) return 1.0 - incomplete_beta_xy(y, x, b, a);
  const double log_x = x > 0.5 ? std::log1p(-y) : std::log(x);
  const double log_y = y > 0.5 ? std::log1p(-x) : std::log(y);
  const double big = std::max(a, b), small = std::min(a, b);
  const double log_inverse_beta = lgamma_difference(big, small) - std::lgamma(small);  // ln 1/B(a, b)
  const double front = std::exp(log_inverse_beta + a * log_x + b * log_y) / a;
  const double tiny = 1e-300;
  double f = 1.0, c = 1.0, d = 0.0;
  // The fraction needs about sqrt(max(a, b)) terms near the switch point: 2,300 at df = 1e7.
  for (int i = 0; i <= 40000; ++i) {
    const int m = i / 2;
    double num;
    if (i == 0) num = 1.0;
    else if (i % 2 == 0) num = (m * (b - m) * x) / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
    else num = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
    d = 1.0 + num * d;
    d = 1.0 / (std::fabs(d) < tiny ? tiny : d);
    c = 1.0 + num / (std::fabs(c) < tiny ? tiny : c);
    f *= c * d;
    if (std::fabs(1.0 - c * d) < 1e-16) break;
  }
  return front * (f - 1.0);
}

// P(T > |t|) for many degrees of freedom, as the integral of the density from |t| to infinity
// by double-exponential (exp-sinh) quadrature. The continued fraction of I_x(df/2, 1/2) is
// ill-conditioned there: x is near 1 and its terms near -1, so 1 + num * d cancels and a
// few thousand terms leave ~1e-10 of noise at df = 1e7. The density is
// exp(ln C - (df + 1)/2 log1p(u^2/df)), ln C = ln Gamma((df+1)/2) - ln Gamma(df/2) - ln(df pi)/2,
// smooth and log-concave: with s = exp(pi/2 sinh(tau)) and a step of 1/32 in tau, the sum
// converges to double precision (tests/numerics/test_stats_mpmath.py holds it to 1e-12).
double t_tail_quadrature(double t, double df) {
  const double pi = 3.14159265358979323846;
  const double log_c = lgamma_difference(0.5 * df, 0.5) - 0.5 * std::log(df * pi);
  const double u0 = std::fabs(t);
  auto density = [&](double u) { return std::exp(log_c - 0.5 * (df + 1.0) * std::log1p(u * u / df)); };
  const double h = 1.0 / 32.0;
  double sum = 0.0;
  for (int k = -160; k <= 160; ++k) {  // tau in [-5, 5]: s from e^-117 to e^117
    const double tau = k * h;
    const double s = std::exp(0.5 * pi * std::sinh(tau));
    const double weight = s * 0.5 * pi * std::cosh(tau);
    if (!std::isfinite(s) || !std::isfinite(weight)) continue;
    sum += density(u0 + s) * weight;
  }
  return sum * h;
}

// P(T > |t|) = I_x(df/2, 1/2) / 2 with x = df / (df + t^2), its complement t^2 / (df + t^2)
// formed directly (and neither squared nor divided where that would overflow); the
// quadrature above where the fraction is ill-conditioned (df >= 100).
double t_tail(double t, double df) {
  if (df >= 100.0 && std::isfinite(t)) return t_tail_quadrature(t, df);
  const double t2 = t * t;
  double x, y;
  if (t2 <= df) {
    const double s = t2 / df;
    x = 1.0 / (1.0 + s);
    y = s / (1.0 + s);
  } else {
    const double r = df / t2;  // 0 when t^2 overflows: the tail is 0 there
    x = r / (1.0 + r);
    y = 1.0 / (1.0 + r);
  }
  return 0.5 * incomplete_beta_xy(x, y, 0.5 * df, 0.5);
}

}  // namespace

double student_t_cdf(double t, double df) {
  if (!(df > 0.0) || std::isnan(t)) throw std::invalid_argument("student_t_cdf: df > 0 and t not NaN");
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  // For t >= 0 the CDF is 1 - P(T > t); the lower tail is P(T > |t|) itself,
  // computed directly so small p values keep their digits.
  const double tail = t_tail(t, df);
  return t >= 0.0 ? 1.0 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0.0 && p < 1.0) || !(df > 0.0)) throw std::invalid_argument("student_t_quantile: p in (0,1), df > 0");
  if (p == 0.5) return 0.0;
  // Solves tail(t) = P(T > |t|) for t > 0: the tail falls monotonically in t and keeps its
  // relative precision far into the tail (solving 1 - tail instead lost 1e-7 of t at
  // p = 1e-9). The tail probability is p itself below 0.5, and 1 - p (exact for p in
  // [0.5, 1)) above. Newton's method on log tail(t), whose slope is -density / tail:
  // nearly linear in the tails, so a few steps reach double precision; each step is
  // kept inside a bracket and becomes a bisection where it would leave it. Bisection
  // alone took ~55 tail evaluations, each 321 exponentials at df >= 100 (the quadrature):
  // tost_seeds_needed's searches spent seconds in it.
  const double target = p < 0.5 ? p : 1.0 - p, log_target = std::log(target);
  const double log_c = lgamma_difference(0.5 * df, 0.5) - 0.5 * std::log(df * 3.14159265358979323846);
  double lo = 0.0, hi = 1.0;
  while (t_tail(hi, df) > target) lo = hi, hi *= 2.0;
  double t = 0.5 * (lo + hi);
  for (int i = 0; i < 200 && hi - lo > 1e-15 * hi; ++i) {
    const double tail = t_tail(t, df);
    if (tail == target) break;
    (tail > target ? lo : hi) = t;
    const double density = std::exp(log_c - 0.5 * (df + 1.0) * std::log1p(t * t / df));
    const double next = t + (std::log(tail) - log_target) * tail / density;
    if (std::isfinite(next) && next > lo && next < hi) {
      const bool converged = std::fabs(next - t) <= 2e-16 * t;
      t = next;
      if (converged) break;
    } else {
      t = 0.5 * (lo + hi);
    }
  }
  return p < 0.5 ? -t : t;
}

double incomplete_beta(double x, double a, double b) { return incomplete_beta_xy(x, 1.0 - x, a, b); }

namespace {
double sample_variance(const std::vector<double>& v) {
  const double m = mean(v);
  double s = 0.0;
  for (double x : v) s += (x - m) * (x - m);
  return s / double(v.size() - 1);
}

// The half width of a two-sided Student t interval; 0 when se is 0 (every
// value agrees exactly: the interval is the point itself).
double t_half_width(double se, double df, double confidence) {
  return se > 0.0 ? student_t_quantile(0.5 + confidence / 2.0, df) * se : 0.0;
}
}  // namespace

double sample_sd(const std::vector<double>& v) { return v.size() < 2 ? NAN : std::sqrt(sample_variance(v)); }

OneSampleT one_sample_t(const std::vector<double>& d, double mu) {
  if (d.size() < 2) throw std::invalid_argument("one_sample_t: needs two or more values");
  OneSampleT r;
  r.n = int(d.size());
  r.mean = mean(d);
  r.sd = sample_sd(d);
  r.se = r.sd / std::sqrt(double(r.n));
  r.df = double(r.n - 1);
  const double diff = r.mean - mu;
  if (r.se > 0.0) {
    r.t = diff / r.se;
    r.p_greater = student_t_cdf(-r.t, r.df);  // = 1 - cdf(t), without the cancellation in its tail
    r.p_less = student_t_cdf(r.t, r.df);
  } else if (diff != 0.0) {  // no spread: the sign of the difference is certain
    r.t = diff > 0 ? INFINITY : -INFINITY;
    r.p_greater = diff > 0 ? 0.0 : 1.0;
    r.p_less = diff < 0 ? 0.0 : 1.0;
  } else {
    r.t = NAN;
    r.p_greater = r.p_less = 0.5;
  }
  return r;
}

MeanInterval mean_interval(const std::vector<double>& v, double confidence) {
  if (v.size() < 2) throw std::invalid_argument("mean_interval: needs two or more values");
  MeanInterval r;
  r.n = int(v.size());
  r.mean = mean(v);
  r.df = double(r.n - 1);
  r.confidence = confidence;
  const double half = t_half_width(sample_sd(v) / std::sqrt(double(r.n)), r.df, confidence);
  r.lo = r.mean - half;
  r.hi = r.mean + half;
  return r;
}

Tost tost_paired(const std::vector<double>& d, double delta) {
  if (!(delta > 0.0)) throw std::invalid_argument("tost_paired: the margin must be > 0");
  Tost r;
  r.p_lower = one_sample_t(d, -delta).p_greater;
  r.p_upper = one_sample_t(d, +delta).p_less;
  return r;
}

namespace {

std::vector<double> log_medians(const std::vector<std::vector<double>>& units) {
  std::vector<double> out;
  for (const auto& u : units) out.push_back(std::log(median(u)));
  return out;
}

// mean +- t * se on the log scale, back on the ratio scale.
SpeedupInterval t_interval(double log_mean, double se, double df, double confidence) {
  SpeedupInterval s;
  const double half = t_half_width(se, df, confidence);
  s.lo = std::exp(log_mean - half);
  s.hi = std::exp(log_mean + half);
  s.confidence = confidence;
  s.df = df;
  return s;
}
}  // namespace

// Why Student t on log medians and not a bootstrap: with the few units a run
// has (2-10 repeats or rounds), a percentile bootstrap under-covers badly.
// It excludes 1.0 whenever every unit's ratio falls on the same side of 1,
// which for identical cells happens with probability 2^(1-n): 12.5% at four
// rounds against the nominal 5% (CI caught exactly that). The t interval
// widens with few units as it should (t_0.975 = 3.18 at 3 degrees of
// freedom), and log step-time medians are close enough to normal for it.
std::optional<SpeedupInterval> speedup_interval(const std::vector<std::vector<double>>& base_repeats,
                                                double base_batch,
                                                const std::vector<std::vector<double>>& cell_repeats,
                                                double cell_batch, bool paired, double confidence) {
  auto nonempty = [](const std::vector<std::vector<double>>& v) {
    return std::all_of(v.begin(), v.end(), [](const std::vector<double>& r) { return !r.empty(); });
  };
  paired = paired && base_repeats.size() == cell_repeats.size() && base_repeats.size() >= 2 &&
           nonempty(base_repeats) && nonempty(cell_repeats);
  const auto base = paired ? base_repeats : interval_units(base_repeats);
  const auto cell = paired ? cell_repeats : interval_units(cell_repeats);
  if (base.size() < 2 || cell.size() < 2) return std::nullopt;
  // speed-up = (cell_batch / cell step) / (base_batch / base step), on the log scale.
  const double log_batch = std::log(cell_batch / base_batch);
  const std::vector<double> lb = log_medians(base), lc = log_medians(cell);
  SpeedupInterval s;
  if (paired) {
    std::vector<double> d(lb.size());
    for (size_t i = 0; i < d.size(); ++i) d[i] = log_batch + lb[i] - lc[i];
    const double n = double(d.size());
    s = t_interval(mean(d), std::sqrt(sample_variance(d) / n), n - 1.0, confidence);
    s.method = "paired t over rounds (repeat i of both cells ran in round i of the interleaved order; Student t "
               "on the rounds' log ratios of median step times)";
  } else {
    const double vb = sample_variance(lb) / double(lb.size()), vc = sample_variance(lc) / double(lc.size());
    // Welch-Satterthwaite degrees of freedom (NaN when both variances are 0: then se is 0 and unused).
    const double df = (vb + vc) * (vb + vc) /
                      (vb * vb / double(lb.size() - 1) + vc * vc / double(lc.size() - 1));
    s = t_interval(log_batch + mean(lb) - mean(lc), std::sqrt(vb + vc), df, confidence);
    if (base_repeats.size() >= 2 && cell_repeats.size() >= 2)
      s.method = "Welch t over repeats (each side's log median step times, independent samples)";
    else
      s.method = "Welch t over consecutive blocks of a single repeat (sees drift within the run, not run-to-run "
                 "noise: use repeats >= 2 for an honest interval)";
  }
  s.units_baseline = int(base.size());
  s.units_cell = int(cell.size());
  return s;
}

std::string speedup_verdict(const SpeedupInterval& interval) {
  if (interval.lo > 1.0) return "faster";
  if (interval.hi < 1.0) return "slower";
  return "no measurable difference";
}

double fisher_exact_greater(int64_t x, int64_t n1, int64_t y, int64_t n2) {
  if (x < 0 || y < 0 || x > n1 || y > n2) throw std::invalid_argument("fisher_exact_greater: counts out of range");
  // X, the first side's count with both margins fixed, is hypergeometric on lo..hi. Its weights
  // come from the ratio of neighbours, w(i+1)/w(i) = (k-i)(n1-i) / ((i+1)(n2-k+i+1)), walked out
  // from the mode (weight 1) so none overflows, then normalised: no lgamma of large numbers,
  // whose absolute error (~1e-12 at 2,000) became the p value's relative error.
  const int64_t k = x + y, lo = std::max<int64_t>(0, k - n2), hi = std::min(k, n1);
  const auto up = [&](int64_t i) { return double(k - i) * double(n1 - i) / (double(i + 1) * double(n2 - k + i + 1)); };
  const int64_t mode = std::clamp<int64_t>(int64_t(double(k + 1) * double(n1 + 1) / double(n1 + n2 + 2)), lo, hi);
  std::vector<double> w(size_t(hi - lo + 1), 0.0);
  w[size_t(mode - lo)] = 1.0;
  for (int64_t i = mode; i < hi; ++i) w[size_t(i + 1 - lo)] = w[size_t(i - lo)] * up(i);
  for (int64_t i = mode; i > lo; --i) w[size_t(i - 1 - lo)] = w[size_t(i - lo)] / up(i - 1);
  double total = 0.0, tail = 0.0;
  for (int64_t i = lo; i <= hi; ++i) {
    total += w[size_t(i - lo)];
    if (i >= x) tail += w[size_t(i - lo)];
  }
  return std::min(1.0, tail / total);
}

std::vector<double> holm_adjust(const std::vector<double>& p) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.size(); ++i)
    if (std::isfinite(p[i])) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<double> adjusted(p.size(), NAN);
  const size_t m = order.size();
  double running = 0.0;  // the step-down maximum keeps the adjusted values in the raw ones' order
  for (size_t j = 0; j < m; ++j) {
    running = std::max(running, std::min(1.0, double(m - j) * p[order[j]]));
    adjusted[order[j]] = running;
  }
  return adjusted;
}

}  // namespace mpb
