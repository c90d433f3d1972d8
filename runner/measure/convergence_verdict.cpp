#include "runner/measure/convergence_verdict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runner/measure/stats.h"

namespace mpb {

Margin convergence_margin(const std::vector<double>& baseline_values, const ConvergenceSettings& settings) {
  Margin m;
  m.baseline_mean = mean(baseline_values);
  m.baseline_seed_sd = sample_sd(baseline_values);
  if (settings.margin_abs) {
    m.delta = *settings.margin_abs;
    m.source = "configured_abs";
    return m;
  }
  m.delta = settings.margin.value_or(kDefaultRelativeMargin) * std::fabs(m.baseline_mean);
  m.source = settings.margin ? "configured" : "relative_1pct";
  return m;
}

std::optional<int> tost_seeds_needed(double sd, double delta, double alpha, double true_diff) {
  const double room = delta - std::fabs(true_diff);
  if (!(room > 0.0) || !std::isfinite(sd)) return std::nullopt;
  if (sd <= 0.0) return 2;
  // At 0 both one-sided tests can fail and share the type II error; off 0 only the nearer one matters.
  const double beta = true_diff == 0.0 ? (1.0 - kSeedsNeededPower) / 2.0 : 1.0 - kSeedsNeededPower;
  const auto enough = [&](int n) {
    const double df = double(n - 1);
    return (student_t_quantile(1.0 - alpha, df) + student_t_quantile(1.0 - beta, df)) * sd / std::sqrt(double(n)) <=
           room;
  };
  // The left side falls as n grows (both quantiles fall with df, and 1/sqrt(n)), so the smallest n
  // is found by doubling, then bisection: a few pairs of quantiles instead of up to 10,000 (27 s
  // in the unit tests), and at small df, where a quantile is cheap, when few seeds do.
  constexpr int kMostSeeds = 10000;
  if (enough(2)) return 2;
  int too_few = 2, enough_n = 4;
  while (!enough(enough_n)) {
    if (enough_n == kMostSeeds) return std::nullopt;
    too_few = enough_n;
    enough_n = std::min(2 * enough_n, kMostSeeds);
  }
  while (enough_n - too_few > 1) {
    const int mid = too_few + (enough_n - too_few) / 2;
    (enough(mid) ? enough_n : too_few) = mid;
  }
  return enough_n;
}

bool seed_diverged(const SeedRun& r) {
  // NaN initial loss (unknown): no bound; a NaN final loss fails isfinite first.
  return !std::isfinite(r.final_eval_loss) || !r.last_loss_finite ||
         r.final_eval_loss > kDivergedAbove * r.initial_loss;
}

bool seed_recovered_excursion(const SeedRun& r) {
  if (seed_diverged(r)) return false;
  for (size_t k = 0; k + 1 < r.eval_losses.size(); ++k)
    if (!std::isfinite(r.eval_losses[k]) || r.eval_losses[k] > kDivergedAbove * r.initial_loss) return true;
  return false;
}

TimeToTarget time_to_target(const std::vector<SeedRun>& runs, double target) {
  TimeToTarget t;
  for (const SeedRun& r : runs) {
    std::optional<int> hit;
    const size_t n = std::min(r.eval_losses.size(), r.eval_steps.size());
    for (size_t k = 0; k < n && !hit; ++k) {
      double smoothed = r.eval_losses[k];
      if (k > 0 && k + 1 < n) {
        double w[3] = {r.eval_losses[k - 1], r.eval_losses[k], r.eval_losses[k + 1]};
        // A NaN in the window keeps it above target: it sorts as nothing and fails "<=".
        if (std::isnan(w[0]) || std::isnan(w[1]) || std::isnan(w[2])) smoothed = NAN;
        else std::sort(w, w + 3), smoothed = w[1];
      }
      if (smoothed <= target) hit = r.eval_steps[k];
    }
    t.step.push_back(hit);
    double run_ms = 0.0;
    for (double ms : r.step_ms) run_ms += ms;
    t.run_seconds.push_back(run_ms / 1000.0);
    if (!hit) {
      ++t.never_reached;
      t.samples.push_back(NAN);
      t.seconds.push_back(NAN);
      continue;
    }
    ++t.reached;
    t.samples.push_back(double(*hit) * double(r.batch_size));
    double ms = 0.0;
    for (size_t i = 0; i < size_t(*hit) && i < r.step_ms.size(); ++i) ms += r.step_ms[i];
    t.seconds.push_back(ms / 1000.0);
  }
  return t;
}

double median_time_to_target(const TimeToTarget& t) {
  // (time, reached) per seed; at a tie an arrival comes before a censoring (the usual convention).
  std::vector<std::pair<double, bool>> seeds;
  for (size_t i = 0; i < t.step.size(); ++i)
    seeds.emplace_back(t.step[i] ? t.seconds[i] : t.run_seconds[i], t.step[i].has_value());
  std::sort(seeds.begin(), seeds.end(),
            [](const auto& a, const auto& b) { return a.first < b.first || (a.first == b.first && a.second); });
  double short_of_target = 1.0;  // the Kaplan-Meier estimate of P(not reached by time t)
  size_t at_risk = seeds.size();
  for (size_t i = 0; i < seeds.size(); --at_risk, ++i) {
    if (!seeds[i].second) continue;
    short_of_target *= 1.0 - 1.0 / double(at_risk);
    if (short_of_target <= 0.5 + 1e-12) return seeds[i].first;  // 1e-12: 1 - 1/2 computed as 0.5000000001
  }
  return NAN;
}

namespace {

double metric_of(const SeedRun& r, const std::string& metric) {
  return metric == "eval_accuracy" ? r.final_eval_accuracy : r.final_eval_loss;
}

std::string sprintf_string(const char* format, double a, double b = 0.0, double c = 0.0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

// The stability counts of both sides, and the margin from the baseline's finite values.
void count_and_margin(ConvergenceVerdict& v, const std::vector<SeedRun>& baseline, const std::vector<SeedRun>& cell,
                      const ConvergenceSettings& settings) {
  std::vector<double> base_values;
  for (const SeedRun& r : baseline) {
    v.baseline_diverged_seeds += seed_diverged(r);
    v.baseline_excursion_seeds += seed_recovered_excursion(r);
    v.baseline_nan_steps += r.nan_steps;
    v.baseline_skipped_steps += r.skipped_steps;
    if (!seed_diverged(r) && std::isfinite(metric_of(r, settings.metric)))
      base_values.push_back(metric_of(r, settings.metric));
  }
  v.seeds = int64_t(cell.size());
  v.baseline_seeds = int64_t(baseline.size());
  for (const SeedRun& r : cell) {
    v.diverged_seeds += seed_diverged(r);
    v.excursion_seeds += seed_recovered_excursion(r);
    v.nan_steps += r.nan_steps;
    v.skipped_steps += r.skipped_steps;
    v.steps += r.steps;
  }
  v.skipped_allowed = int64_t(std::floor(settings.max_skipped_fraction * double(v.steps)));
  v.margin = convergence_margin(base_values, settings);
  v.p_divergence = fisher_exact_greater(v.diverged_seeds, v.seeds, v.baseline_diverged_seeds, v.baseline_seeds);
}

// Each pair's mean |cell - base| eval loss over the steps both curves have, then the t tests.
CurveCheck curve_check(const std::vector<std::pair<const SeedRun*, const SeedRun*>>& pairs, double delta,
                       double alpha) {
  CurveCheck c;
  std::vector<double> gaps;
  for (const auto& [cell, base] : pairs) {
    double sum = 0.0;
    int points = 0;
    for (size_t k = 0; k < cell->eval_steps.size() && k < cell->eval_losses.size(); ++k) {
      const auto b = std::find(base->eval_steps.begin(), base->eval_steps.end(), cell->eval_steps[k]);
      const size_t bk = size_t(b - base->eval_steps.begin());
      if (b == base->eval_steps.end() || bk >= base->eval_losses.size()) continue;
      const double gap = std::fabs(cell->eval_losses[k] - base->eval_losses[bk]);
      sum += std::isnan(gap) ? INFINITY : gap;
      ++points;
    }
    if (points == 0) continue;
    c.points = std::max(c.points, points);
    gaps.push_back(sum / points);
  }
  c.pairs = int(gaps.size());
  if (gaps.empty()) return c;
  c.mean_abs_gap = mean(gaps);
  if (!std::isfinite(c.mean_abs_gap)) {
    c.verdict = "apart";  // a NaN eval point on one curve and not the other
    return c;
  }
  if (c.pairs < 2 || !(delta > 0.0)) {
    c.verdict = "inconclusive";
    return c;
  }
  const OneSampleT t = one_sample_t(gaps, delta);
  c.p_within = t.p_less;
  c.p_apart = t.p_greater;
  c.gap_hi = mean_interval(gaps, 1.0 - 2.0 * alpha).hi;  // the two-sided 1 - 2 alpha interval's top: one-sided 1 - alpha
  c.verdict = c.p_within < alpha ? "within" : c.p_apart < alpha ? "apart" : "inconclusive";
  return c;
}

// Pairs seeds neither side diverged in and runs the tests (two or more pairs).
void pair_and_test(ConvergenceVerdict& v, const std::vector<SeedRun>& baseline, const std::vector<SeedRun>& cell,
                   const ConvergenceSettings& settings) {
  const double worse_sign = settings.metric == "eval_accuracy" ? -1.0 : 1.0;  // positive is worse
  std::vector<double> diff, worsening;
  std::vector<std::pair<const SeedRun*, const SeedRun*>> pairs;
  for (const SeedRun& c : cell) {
    const auto b = std::find_if(baseline.begin(), baseline.end(), [&](const SeedRun& r) { return r.seed == c.seed; });
    if (b == baseline.end()) continue;
    const double cv = metric_of(c, settings.metric), bv = metric_of(*b, settings.metric);
    if (seed_diverged(c) || seed_diverged(*b) || !std::isfinite(cv) || !std::isfinite(bv)) continue;
    v.paired_seeds.push_back(c.seed);
    pairs.emplace_back(&c, &*b);
    diff.push_back(cv - bv);
    worsening.push_back(worse_sign * (cv - bv));
  }
  v.n = int(diff.size());
  v.curve = curve_check(pairs, v.margin.delta, settings.alpha);
  if (v.n == 1) v.mean_diff = diff[0];
  if (v.n < 2) return;
  const MeanInterval ci = mean_interval(diff, 1.0 - 2.0 * settings.alpha);
  v.mean_diff = ci.mean;
  v.ci_lo = ci.lo;
  v.ci_hi = ci.hi;
  v.diff_sd = sample_sd(diff);
  const double delta = v.margin.delta;
  if (!(delta > 0.0)) return;
  const Tost tost = tost_paired(worsening, delta);
  v.p_lower = tost.p_lower;
  v.p_upper = tost.p_upper;
  v.p_worse = one_sample_t(worsening, +delta).p_greater;
  v.p_better = one_sample_t(worsening, -delta).p_less;
  v.seeds_needed = tost_seeds_needed(v.diff_sd, delta, settings.alpha, delta / 2.0);
  v.underpowered = !v.seeds_needed || v.n < *v.seeds_needed;
}

// What keeps a TOST-equivalent cell from being `equivalent`; empty: stable.
std::string instability(const ConvergenceVerdict& v) {
  std::string why;
  if (v.diverged_seeds > 0) why += std::to_string(v.diverged_seeds) + " diverged seed(s); ";
  if (v.excursion_seeds > v.baseline_excursion_seeds)
    why += std::to_string(v.excursion_seeds) + " seed(s) diverged mid-run and recovered vs the baseline's " +
           std::to_string(v.baseline_excursion_seeds) + "; ";
  if (v.nan_steps > v.baseline_nan_steps)
    why += std::to_string(v.nan_steps) + " NaN steps vs the baseline's " + std::to_string(v.baseline_nan_steps) + "; ";
  if (v.skipped_steps > v.baseline_skipped_steps + v.skipped_allowed)
    why += std::to_string(v.skipped_steps) + " skipped steps vs the baseline's " +
           std::to_string(v.baseline_skipped_steps) + " + " + std::to_string(v.skipped_allowed) + " allowed; ";
  return why.empty() ? why : why.substr(0, why.size() - 2);
}

// The rule of the header, on the counts and tests already filled in.
// " (Holm over N cells: p = raw)" when the family has more than one cell.
std::string holm_note(const ConvergenceVerdict& v, double raw) {
  return v.family_size > 1 ? " (Holm-adjusted over " + std::to_string(v.family_size) + " cells; raw " +
                                 sprintf_string("%.3g", raw) + ")"
                           : "";
}

void decide(ConvergenceVerdict& v) {
  const double alpha = v.alpha;
  v.verdict.clear();
  if (v.p_divergence_adj < alpha) {
    v.verdict = "worse";
    v.reason = std::to_string(v.diverged_seeds) + " of " + std::to_string(v.seeds) + " seeds diverged, the baseline " +
               std::to_string(v.baseline_diverged_seeds) + " of " + std::to_string(v.baseline_seeds) +
               sprintf_string(": Fisher's exact p = %.3g < alpha %.3g", v.p_divergence_adj, alpha) +
               holm_note(v, v.p_divergence);
  } else if (v.n < 2) {
    v.verdict = "inconclusive";
    v.reason = std::to_string(v.n) + " seed(s) paired with the baseline (neither diverged); a t test needs 2";
  } else if (!(v.margin.delta > 0.0)) {
    v.verdict = "inconclusive";
    v.reason = "the margin is 0 (the baseline's mean metric is 0 and its seeds agree)";
  } else if (v.p_worse_adj < alpha) {
    v.verdict = "worse";
    v.reason = sprintf_string("worse by more than delta: one-sided p = %.3g < alpha %.3g", v.p_worse_adj, alpha) +
               holm_note(v, v.p_worse);
  } else if (v.p_better_adj < alpha) {
    // An unstable cell is not the good state compare.py's gate regresses from, however low its loss.
    const std::string unstable = instability(v);
    v.verdict = unstable.empty() ? "better" : "inconclusive";
    v.reason = sprintf_string("better by more than delta: one-sided p = %.3g < alpha %.3g", v.p_better_adj, alpha) +
               holm_note(v, v.p_better) + (unstable.empty() ? "" : " but not stable: " + unstable);
  } else if (const double p = v.p_equivalence_adj; p < alpha) {
    const std::string unstable = instability(v);
    const std::string note = holm_note(v, std::max(v.p_lower, v.p_upper));
    v.verdict = unstable.empty() ? "equivalent" : "inconclusive";
    v.reason = unstable.empty()
                   ? sprintf_string("within +-delta: TOST p = %.3g < alpha %.3g", p, alpha) + note
                   : "final quality within +-delta (TOST p = " + sprintf_string("%.3g", p) + note +
                         ") but not stable: " + unstable;
  } else {
    v.verdict = "inconclusive";
    v.reason = sprintf_string("the interval is too wide for the margin: TOST p = %.3g >= alpha %.3g", p, alpha) +
               holm_note(v, std::max(v.p_lower, v.p_upper));
    if (v.seeds_needed) v.reason += "; about " + std::to_string(*v.seeds_needed) + " seeds would settle it";
  }
}

}  // namespace

ConvergenceVerdict convergence_verdict(const std::vector<SeedRun>& baseline, const std::vector<SeedRun>& cell,
                                       const ConvergenceSettings& settings) {
  ConvergenceVerdict v;
  v.metric = settings.metric;
  v.alpha = settings.alpha;
  count_and_margin(v, baseline, cell, settings);
  pair_and_test(v, baseline, cell, settings);
  std::vector<ConvergenceVerdict> alone = {v};
  judge_family(alone);  // a family of one: the adjusted p values are the raw ones
  return alone[0];
}

void judge_family(std::vector<ConvergenceVerdict>& family) {
  const auto adjust = [&](auto raw_of, auto adjusted_of) {
    std::vector<double> raw;
    for (const ConvergenceVerdict& v : family) raw.push_back(raw_of(v));
    const std::vector<double> adjusted = holm_adjust(raw);
    for (size_t i = 0; i < family.size(); ++i) adjusted_of(family[i]) = adjusted[i];
  };
  adjust([](const ConvergenceVerdict& v) { return v.p_divergence; },
         [](ConvergenceVerdict& v) -> double& { return v.p_divergence_adj; });
  adjust([](const ConvergenceVerdict& v) { return v.p_worse; },
         [](ConvergenceVerdict& v) -> double& { return v.p_worse_adj; });
  adjust([](const ConvergenceVerdict& v) { return v.p_better; },
         [](ConvergenceVerdict& v) -> double& { return v.p_better_adj; });
  adjust([](const ConvergenceVerdict& v) { return std::max(v.p_lower, v.p_upper); },
         [](ConvergenceVerdict& v) -> double& { return v.p_equivalence_adj; });
  for (ConvergenceVerdict& v : family) {
    v.family_size = int(family.size());
    decide(v);
  }
}

}  // namespace mpb
