// "Does it train as well as the baseline?" per cell (issue 31, docs/RESULTS.md
// summary.convergence): the final-quality verdict by two one-sided t tests
// over seeds paired with the baseline's, the stability counts that can veto
// it, and the time to reach the baseline's quality. Pure functions of plain
// numbers; runner/results/convergence_json.cpp reads them from the cell files.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/cell_config.h"

namespace mpb {

// One repeat of a cell as the verdict sees it.
struct SeedRun {
  uint64_t seed = 0;
  double final_eval_loss = 0.0;      // the last eval point's; NaN when not finite
  double final_eval_accuracy = 0.0;  // NaN when absent or not finite
  std::vector<int> eval_steps;       // every eval point: its optimizer step (1-based, rising)
  std::vector<double> eval_losses;   // and its loss (NaN when not finite)
  std::vector<double> step_ms;       // every optimizer step's time, warm-up included
  int64_t batch_size = 0;            // samples per optimizer step
  int64_t nan_steps = 0;             // steps whose training loss was not finite
  int64_t skipped_steps = 0;         // optimizer steps skipped (non-finite gradients)
  int64_t steps = 0;                 // optimizer steps the repeat ran
  double initial_loss = NAN;         // the first finite training loss (the untrained model's); NaN: unknown
  bool last_loss_finite = true;      // the last training step's loss was finite
};

// The one divergence rule (issue 40), for every verdict and compare.py's gate
// through it: a seed diverged when its final eval loss or its last training
// loss is not finite, or its final eval loss is more than kDivergedAbove x its
// initial training loss (it ended clearly worse than the untrained model
// began). A NaN and a finite blow-up are the same event: both leave the paired
// test, and both count in the divergence-rate test and the stability veto.
// Why 10% above and not "above": a run that stalls near its start (fp16
// gradients underflowing, a learning rate far too small) ends within noise of
// its initial loss, on either side of it; it did not blow up, and the paired
// t test calls it `worse` by its loss. A blow-up lands far beyond 10%.
inline constexpr double kDivergedAbove = 1.10;
bool seed_diverged(const SeedRun& run);
// A seed that left those bounds at an earlier eval point (a NaN, or above
// kDivergedAbove x its initial loss) and came back by the last: an early
// divergence that recovered, which the endpoint alone never sees. Not
// diverged; it counts against the cell's stability.
bool seed_recovered_excursion(const SeedRun& run);

// The eval curves side by side (issue 40: the endpoint alone misses a cell
// that trained differently and met the baseline at the end). Per pair of
// seeds (neither diverged), the mean |cell - baseline| over the eval steps
// both curves have (a NaN point: an infinite gap); then a one-sided t test
// over the pairs of H1 "the mean gap is below delta". Reported beside the
// endpoint verdict; it does not change it.
struct CurveCheck {
  std::string verdict = "none";  // within | apart | inconclusive | none (no shared eval step)
  int points = 0;                // eval steps compared
  int pairs = 0;
  double mean_abs_gap = NAN;     // over the pairs; +inf when a pair had a NaN point
  double gap_hi = NAN;           // its one-sided 1 - alpha upper bound (NaN below two pairs)
  double p_within = NAN;         // H0: mean gap >= delta; H1: below
  double p_apart = NAN;          // H0: mean gap <= delta; H1: above
};


// The smoothing applied before looking for the target: the running median of
// three eval points centred on each (the first and last points as they are).
// It keeps one lucky eval from counting as having arrived, and unlike a
// trailing mean it does not lag a falling curve: a trailing 3-point mean
// kept the baseline itself from ever reaching its own final loss + 1% in a
// short run (seen in the e2e test), where the median of a monotone stretch
// is the point itself.
inline constexpr const char* kTargetSmoothing =
    "running median of 3 eval points centred on each (first and last points as they are)";
// The relative margin used when the experiment sets none.
inline constexpr double kDefaultRelativeMargin = 0.01;
// Power assumed when saying how many seeds a TOST would need.
inline constexpr double kSeedsNeededPower = 0.8;

// The margin delta for a metric, in its units, fixed in advance (issue 40):
// settings.margin_abs when set (source "configured_abs"), else settings.margin
// x |baseline mean| ("configured"), else kDefaultRelativeMargin x |baseline
// mean| ("relative_1pct"). Never the observed spread: the baseline's seed SD
// is on the between-seed scale while the test is on paired differences, so
// letting it widen delta turned a real degradation `equivalent` whenever one
// baseline seed was noisy. baseline_seed_sd (ddof 1; NaN with one seed) is
// reported beside delta, not used in it.
struct Margin {
  double delta = 0.0;
  std::string source;
  double baseline_mean = 0.0, baseline_seed_sd = 0.0;
};
Margin convergence_margin(const std::vector<double>& baseline_values, const ConvergenceSettings& settings);

// How many seeds a TOST at `alpha` with margin `delta` needs for a
// kSeedsNeededPower chance to show equivalence when the true difference is
// `true_diff` (|true_diff| < delta) and the differences' SD is `sd`: the
// smallest n >= 2 with (t_{1-alpha, n-1} + t_{q, n-1}) * sd / sqrt(n) <=
// delta - |true_diff|, q = 1 - (1 - power)/2 at a true difference of 0 and
// 1 - (1 - power) otherwise (Chow, Shao & Wang, Sample Size Calculations,
// 3.2.4). nullopt when more than 10000 would be needed.
std::optional<int> tost_seeds_needed(double sd, double delta, double alpha, double true_diff = 0.0);

struct TimeToTarget {
  // Per seed, in the order given: the first eval step whose smoothed eval
  // loss is <= target; nullopt: never reached.
  std::vector<std::optional<int>> step;
  std::vector<double> samples, seconds;  // NaN where never reached
  std::vector<double> run_seconds;       // the whole run's step time: where a seed that never reached is censored
  int reached = 0, never_reached = 0;
};
// seconds: the sum of the step times of steps 1..step (eval time not counted).
TimeToTarget time_to_target(const std::vector<SeedRun>& runs, double target_eval_loss);

// The Kaplan-Meier median of the seconds to target: seeds that never reached
// it are censored at their run's length (they might have, later). The smallest
// time at which the estimated share still short of the target is <= 1/2; NaN
// when fewer than half are known to have reached it. Unlike a mean over the
// seeds that arrived, it cannot rest on the one lucky seed of five.
double median_time_to_target(const TimeToTarget& t);

struct ConvergenceVerdict {
  std::string verdict;  // equivalent | worse | better | inconclusive
  std::string reason;   // why, in words
  std::string metric;
  double alpha = 0.05;
  Margin margin;
  std::vector<uint64_t> paired_seeds;  // seeds finite in both, in the cell's order
  int n = 0;
  // Over the paired seeds: cell - baseline in the metric's units, its SD,
  // and the 1 - 2 alpha two-sided t interval (TOST's own). NaN below two pairs.
  double mean_diff = NAN, diff_sd = NAN, ci_lo = NAN, ci_hi = NAN;
  // The tests, on the difference signed so that positive is worse (cell -
  // base for eval_loss, base - cell for eval_accuracy): NaN below two pairs.
  double p_lower = NAN, p_upper = NAN;  // TOST's two one-sided tests
  double p_worse = NAN;                 // H0: worse by <= delta; H1: worse by more
  double p_better = NAN;                // H0: better by <= delta; H1: better by more
  // Fisher's exact test, one-sided, of the cell's diverged-seed rate against
  // the baseline's (normalised by each side's repeats): H1 the cell's is higher.
  double p_divergence = 1.0;
  // Holm-adjusted over the family (the cells judged against the same
  // baseline, judge_family; a cell alone: the raw p). The rule reads these.
  double p_divergence_adj = 1.0, p_worse_adj = NAN, p_better_adj = NAN, p_equivalence_adj = NAN;
  int family_size = 1;
  // Seeds a TOST would need at the observed diff_sd for an 80% chance to show
  // equivalence when the true difference is delta/2 (a plausible design
  // point: at 0 it flatters the design). underpowered: n < seeds_needed, or
  // more than 10000 needed.
  std::optional<int> seeds_needed;
  bool underpowered = false;
  // Stability: the cell's and the baseline's counts over all their seeds.
  int64_t diverged_seeds = 0, nan_steps = 0, skipped_steps = 0;
  int64_t seeds = 0, baseline_seeds = 0;  // repeats on each side (the divergence test's totals)
  int64_t steps = 0;            // the cell's optimizer steps over all its seeds
  int64_t skipped_allowed = 0;  // skips beyond the baseline's that keep it stable
  int64_t baseline_diverged_seeds = 0, baseline_nan_steps = 0, baseline_skipped_steps = 0;
  int64_t excursion_seeds = 0, baseline_excursion_seeds = 0;  // seed_recovered_excursion, each side
  CurveCheck curve;
};

// The rule (docs/RESULTS.md says it the same way), in this order, on the
// Holm-adjusted p values (*_adj; a cell judged alone: the raw ones):
//  1. `worse` when the cell's seeds diverge (seed_diverged) at a higher rate
//     than the baseline's: Fisher's exact test, p_divergence_adj < alpha.
//  2. Fewer than two seeds paired with the baseline (neither side diverged):
//     `inconclusive`.
//  3. `worse` when the one-sided t test of H0 "worse by at most delta" rejects
//     at alpha (p_worse_adj < alpha: the lower bound of the worsening is
//     above delta); `better` likewise the other way (p_better_adj < alpha), but
//     only if the cell is stable (as in 4; unstable: `inconclusive`).
//  4. `equivalent` when TOST rejects (p_equivalence_adj = Holm of max(p_lower,
//     p_upper) < alpha) and the cell is stable: no diverged seed, no more
//     recovered excursions than the baseline, no more NaN steps than
//     the baseline, and no more skipped steps than the baseline's plus
//     skipped_allowed = floor(max_skipped_fraction x the cell's steps over
//     all seeds) (a dynamic loss scale's calibration skips are its normal
//     work). Unstable: `inconclusive`.
//  5. Otherwise `inconclusive` (the interval is too wide for the margin:
//     seeds_needed says how many seeds would likely settle it).
ConvergenceVerdict convergence_verdict(const std::vector<SeedRun>& baseline, const std::vector<SeedRun>& cell,
                                       const ConvergenceSettings& settings);

// Multiplicity (issue 40): the cells judged against one baseline are one
// family. Holm-adjusts each test's p values over the family, one family per
// claim (diverges more often, worse, better, equivalent), sets family_size
// and decides each verdict again by the rule above. Each claim's chance of any
// false claim in the family stays <= alpha; tested cell by cell at alpha, six
// cells near the margin made a false `equivalent` somewhere about 26% likely.
void judge_family(std::vector<ConvergenceVerdict>& family);

}  // namespace mpb
