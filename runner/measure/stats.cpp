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

double student_t_cdf(double t, double df) {
  if (!(df > 0.0) || std::isnan(t)) throw std::invalid_argument("student_t_cdf: df > 0 and t not NaN");
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  // For t >= 0 the CDF is 1 - I_x(df/2, 1/2) / 2 with x = df / (df + t^2)
  // (I: the regularized incomplete beta function); the lower tail is that
  // half-I itself, computed directly so small p values keep their digits.
  const double tail = 0.5 * incomplete_beta(df / (df + t * t), 0.5 * df, 0.5);
  return t >= 0.0 ? 1.0 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0.0 && p < 1.0) || !(df > 0.0)) throw std::invalid_argument("student_t_quantile: p in (0,1), df > 0");
  if (p == 0.5) return 0.0;
  // Bisection on the tail P(T > |t|) = I_x(df/2, 1/2) / 2, which falls
  // monotonically in |t| and keeps its relative precision far into the tail:
  // bisecting on 1 - tail instead lost 1e-7 of t at p = 1e-9. The tail
  // probability is p itself below 0.5, and 1 - p (exact for p in [0.5, 1)) above.
  const double tail = p < 0.5 ? p : 1.0 - p;
  auto upper_tail = [df](double t) { return 0.5 * incomplete_beta(df / (df + t * t), 0.5 * df, 0.5); };
  double lo = 0.0, hi = 1.0;
  while (upper_tail(hi) > tail) hi *= 2.0;
  for (int i = 0; i < 400 && hi - lo > 1e-15 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (upper_tail(mid) > tail ? lo : hi) = mid;
  }
  const double t = 0.5 * (lo + hi);
  return p < 0.5 ? -t : t;
}

double incomplete_beta(double x, double a, double b) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  // Continued fraction (modified Lentz), which converges fast for
  // x < (a + 1) / (a + b + 2); the symmetry I_x(a,b) = 1 - I_{1-x}(b,a) covers the rest.
  if (x > (a + 1.0) / (a + b + 2.0)) return 1.0 - incomplete_beta(1.0 - x, b, a);
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x)) / a;
  const double tiny = 1e-300;
  double f = 1.0, c = 1.0, d = 0.0;
  for (int i = 0; i <= 400; ++i) {
    const int m = i / 2;
    double num;
    if (i == 0) num = 1.0;
    else if (i % 2 == 0) num = (m * (b - m) * x) / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
    else num = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
    d = 1.0 + num * d;
    d = 1.0 / (std::fabs(d) < tiny ? tiny : d);
    c = 1.0 + num / (std::fabs(c) < tiny ? tiny : c);
    f *= c * d;
    if (std::fabs(1.0 - c * d) < 1e-15) break;
  }
  return front * (f - 1.0);
}

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

}  // namespace mpb
