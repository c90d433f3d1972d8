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
// fractional) degrees of freedom. Exact to ~1e-12 by bisection on the CDF.
double student_t_quantile(double p, double df);
// The regularized incomplete beta function I_x(a, b), x in [0, 1].
double incomplete_beta(double x, double a, double b);

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

}  // namespace mpb
