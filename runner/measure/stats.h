// Statistics for timing samples: order statistics, spread, and the speed-up
// interval (Student t over repeats or rounds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mpb {

// Linear interpolation between closest ranks (numpy's default), q in [0, 1].
double quantile(std::vector<double> v, double q);
inline double median(const std::vector<double>& v) { return quantile(v, 0.5); }
double mean(const std::vector<double>& v);    // NaN when empty
double stdev(const std::vector<double>& v);   // population; NaN when empty

// How spread out one cell's step times are (docs/RESULTS.md, summary.noise).
struct StepSpread {
  double cv = 0.0;               // stdev / mean: sensitive to a single slow step
  double robust_cv = 0.0;        // 1.4826 * MAD / median: the bulk's spread, outliers ignored
  double p90_over_median = 1.0;  // the slow tail
  int64_t outliers = 0;          // steps slower than 3x the median (kept, only counted)
  int64_t samples = 0;
};
StepSpread step_spread(const std::vector<double>& samples);

// The units a speed-up interval is built from for one cell: its repeats when it has two
// or more (each repeat's timed steps), else the one repeat cut into
// `blocks_if_one` consecutive blocks (which sees drift within the repeat but
// not run-to-run noise; the method string says so).
std::vector<std::vector<double>> interval_units(const std::vector<std::vector<double>>& repeats,
                                                   int blocks_if_one = 5);

// Student t quantile: the t with P(T <= t) = p for `df` (possibly
// fractional) degrees of freedom, by bisection on the tail probability: within
// 1e-12 relative of 50-digit values for df 1 to 1e7 and p from 1e-12 to 1 - 1e-12
// (tests/numerics/test_stats_mpmath.py; test_stats_scipy.py checks against scipy).
double student_t_quantile(double p, double df);
// The regularized incomplete beta function I_x(a, b), x in [0, 1].
double incomplete_beta(double x, double a, double b);
// Student t CDF: P(T <= t) for `df` > 0 degrees of freedom (scipy.stats.t.cdf);
// t = +-inf give 1 and 0. The lower tail to 1e-12 relative (~5e-15 measured) and the
// rest to 1e-15 absolute, df 1 to 1e7: the continued fraction below df 100, quadrature
// of the density from there (stats.cpp says why).
double student_t_cdf(double t, double df);

// The sample standard deviation (n - 1 in the denominator, numpy's ddof=1);
// NaN with fewer than two values.
double sample_sd(const std::vector<double>& v);

// A one-sample t test of mean(d) against `mu` (for paired data: d = cell - base,
// one difference per seed). p_greater: the p value of H1 mean > mu; p_less: of
// H1 mean < mu (scipy.stats.ttest_1samp / ttest_rel with alternative="greater"
// / "less"). With no spread (every d equal) t is +-inf, or NaN when mean == mu,
// and the p values are 0 or 1, or 0.5 each (no evidence either way).
// Requires two or more values.
struct OneSampleT {
  double mean = 0.0, sd = 0.0, se = 0.0, df = 0.0, t = 0.0;
  double p_greater = 1.0, p_less = 1.0;
  int n = 0;
};
OneSampleT one_sample_t(const std::vector<double>& d, double mu);

// mean +- t_{(1+confidence)/2, n-1} * sd / sqrt(n): the two-sided Student t
// interval of a mean. Requires two or more values.
struct MeanInterval {
  double mean = 0.0, lo = 0.0, hi = 0.0, confidence = 0.95, df = 0.0;
  int n = 0;
};
MeanInterval mean_interval(const std::vector<double>& v, double confidence);

// Equivalence by two one-sided t tests (TOST, Schuirmann 1987) on paired
// differences d against the margin (-delta, +delta), delta > 0:
// p_lower tests H0 mean <= -delta (H1 mean > -delta), p_upper tests H0 mean >=
// +delta (H1 mean < +delta). Equivalence at level alpha when both reject,
// i.e. max(p_lower, p_upper) < alpha, which is the same as the 1 - 2 alpha
// two-sided t interval lying inside (-delta, +delta).
struct Tost {
  double p_lower = 1.0, p_upper = 1.0;
  double p() const { return p_lower > p_upper ? p_lower : p_upper; }
};
Tost tost_paired(const std::vector<double>& d, double delta);

struct SpeedupInterval {
  double lo = 0.0, hi = 0.0;
  double confidence = 0.95;
  double df = 0.0;  // the t distribution's degrees of freedom
  int units_baseline = 0, units_cell = 0;
  std::string method;
};

// The interval of speedup = (cell_batch / cell step time) / (base_batch /
// base step time), from the median step time of each unit (a repeat, or, for
// a cell with one repeat, one of 5 consecutive blocks of it): a Student t
// interval on the log scale. nullopt when a side has fewer than two units
// (no interval is honest then).
//
// paired: repeat i of both cells ran in the same round of an interleaved
// order (same count, at least two). The interval is then a paired t over the
// rounds' log ratios: a round the whole machine was slow in is slow for both
// cells, so noise shared by a round cancels out of the ratio instead of
// widening it. Otherwise Welch's t over the two sides' units.
std::optional<SpeedupInterval> speedup_interval(const std::vector<std::vector<double>>& base_repeats,
                                                double base_batch,
                                                const std::vector<std::vector<double>>& cell_repeats,
                                                double cell_batch, bool paired = false,
                                                double confidence = 0.95);

// "faster" / "slower" when the interval excludes 1.0, else "no measurable difference".
std::string speedup_verdict(const SpeedupInterval& interval);

// Fisher's exact test of two rates, one-sided: the p value of H1 "the first
// side's rate is higher" for x of n1 against y of n2 (scipy.stats.fisher_exact
// on [[x, n1 - x], [y, n2 - y]] with alternative="greater"): P(X >= x) for X
// hypergeometric with the margins fixed. Counts normalised by their totals, so
// sides with different numbers of repeats compare fairly. 1 when x is 0.
double fisher_exact_greater(int64_t x, int64_t n1, int64_t y, int64_t n2);

// Holm's step-down adjustment (Holm 1979) of a family of p values: sorted
// ascending, p_(i) becomes max over j <= i of min(1, (m - j + 1) p_(j)), m the
// number of finite values; rejecting where the adjusted p < alpha bounds the
// family's chance of any false rejection by alpha. NaN entries stay NaN and do
// not count in m.
std::vector<double> holm_adjust(const std::vector<double>& p);

}  // namespace mpb
