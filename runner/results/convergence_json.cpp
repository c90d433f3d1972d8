#include "runner/results/convergence_json.h"

#include <algorithm>
#include <cmath>

#include "runner/measure/stats.h"

namespace mpb {

namespace {

double finite_or_nan(const nlohmann::json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) ? v.get<double>() : NAN;
}

// NaN and inf are not JSON: null.
nlohmann::json number_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

// Confidence of the time-to-target intervals: the speed-up intervals' 95%.
constexpr double kTimeConfidence = 0.95;

// mean and the t interval over the finite values; nulls with fewer than two.
nlohmann::json interval_json(const std::vector<double>& values) {
  std::vector<double> finite;
  for (double x : values)
    if (std::isfinite(x)) finite.push_back(x);
  nlohmann::json j = {{"mean", number_or_null(mean(finite))}, {"lo", nullptr}, {"hi", nullptr},
                      {"n", finite.size()}, {"confidence", kTimeConfidence}};
  if (finite.size() >= 2) {
    const MeanInterval ci = mean_interval(finite, kTimeConfidence);
    j["lo"] = ci.lo;
    j["hi"] = ci.hi;
  }
  return j;
}

// Baseline seconds over cell seconds to target, per seed both reached it: the
// geometric mean and a t interval on the log ratios (as the paired speed-up
// interval, runner/measure/stats.h). null with no such seed.
nlohmann::json time_speedup_json(const std::vector<SeedRun>& base, const TimeToTarget& base_t,
                                 const std::vector<SeedRun>& cell, const TimeToTarget& cell_t) {
  std::vector<double> log_ratio;
  for (size_t c = 0; c < cell.size(); ++c) {
    for (size_t b = 0; b < base.size(); ++b) {
      if (base[b].seed != cell[c].seed) continue;
      const double bs = base_t.seconds[b], cs = cell_t.seconds[c];
      if (std::isfinite(bs) && std::isfinite(cs) && bs > 0 && cs > 0) log_ratio.push_back(std::log(bs / cs));
    }
  }
  if (log_ratio.empty()) return nullptr;
  nlohmann::json j = {{"estimate", "paired"}, {"speedup", std::exp(mean(log_ratio))}, {"lo", nullptr}, {"hi", nullptr},
                      {"n", log_ratio.size()}, {"confidence", kTimeConfidence},
                      {"method", "paired by seed: geometric mean of baseline seconds / cell seconds to target, "
                                 "Student t interval on the log ratios"}};
  if (log_ratio.size() >= 2) {
    const MeanInterval ci = mean_interval(log_ratio, kTimeConfidence);
    j["lo"] = std::exp(ci.lo);
    j["hi"] = std::exp(ci.hi);
  }
  return j;
}

// The speed-up to target, censoring seen (issue 40): seeds that never reached
// the target are not dropped. When the cell's seeds reach it less often than
// the baseline's there is no speed-up: a faster arrival of the seeds that
// arrive is not faster training. When every seed on both sides arrived, the
// paired geometric mean; otherwise baseline over cell Kaplan-Meier median
// seconds (no interval), null while either median is unknown.
nlohmann::json censored_speedup_json(const std::vector<SeedRun>& base, const TimeToTarget& bt,
                                     const std::vector<SeedRun>& cell, const TimeToTarget& ct, std::string& note) {
  const int64_t nb = int64_t(base.size()), nc = int64_t(cell.size());
  if (int64_t(ct.reached) * nb < int64_t(bt.reached) * nc) {
    note = std::to_string(ct.reached) + " of " + std::to_string(nc) + " seeds reached the target, the baseline's " +
           std::to_string(bt.reached) + " of " + std::to_string(nb) + ": no speed-up is claimed";
    return nullptr;
  }
  if (ct.never_reached == 0 && bt.never_reached == 0) return time_speedup_json(base, bt, cell, ct);
  const double base_median = median_time_to_target(bt), cell_median = median_time_to_target(ct);
  if (!(base_median > 0.0) || !(cell_median > 0.0)) {
    note = "fewer than half the seeds of a side reached the target: its median time is unknown";
    return nullptr;
  }
  return {{"estimate", "kaplan_meier_median"},
          {"speedup", base_median / cell_median}, {"lo", nullptr}, {"hi", nullptr},
          {"n", nc}, {"confidence", kTimeConfidence},
          {"method", "baseline over cell Kaplan-Meier median seconds to target (seeds that never reached it "
                     "censored at their run's length); no interval"}};
}

nlohmann::json time_to_target_json(const std::vector<SeedRun>& base, const std::vector<SeedRun>& cell,
                                   const ConvergenceSettings& settings) {
  // The target is the eval loss whatever the verdict's metric: the baseline's
  // mean final eval loss plus the eval-loss margin (= x (1 + delta / mean)).
  std::vector<double> base_loss;
  for (const SeedRun& r : base)
    if (std::isfinite(r.final_eval_loss)) base_loss.push_back(r.final_eval_loss);
  if (base_loss.empty()) return nullptr;
  // margin_abs is in the verdict metric's units: with eval_accuracy the loss target keeps the relative margin.
  ConvergenceSettings loss_settings = settings;
  if (settings.metric != "eval_loss") loss_settings.margin_abs.reset();
  const Margin margin = convergence_margin(base_loss, loss_settings);
  const double target = margin.baseline_mean + margin.delta;
  const TimeToTarget ct = time_to_target(cell, target), bt = time_to_target(base, target);
  std::string note;
  const nlohmann::json speedup = censored_speedup_json(base, bt, cell, ct, note);
  std::vector<double> steps;
  nlohmann::json per_seed = nlohmann::json::array();
  for (size_t i = 0; i < cell.size(); ++i) {
    steps.push_back(ct.step[i] ? double(*ct.step[i]) : NAN);
    per_seed.push_back({{"seed", cell[i].seed},
                        {"step", ct.step[i] ? nlohmann::json(*ct.step[i]) : nlohmann::json(nullptr)},
                        {"samples", number_or_null(ct.samples[i])},
                        {"seconds", number_or_null(ct.seconds[i])}});
  }
  return {{"target_eval_loss", target},
          {"delta", margin.delta},
          {"delta_source", margin.source},
          {"smoothing", kTargetSmoothing},
          {"steps", interval_json(steps)},
          {"samples", interval_json(ct.samples)},
          {"seconds", interval_json(ct.seconds)},
          {"reached", ct.reached},
          {"never_reached", ct.never_reached},
          {"baseline_reached", bt.reached},
          {"baseline_never_reached", bt.never_reached},
          {"median_seconds", number_or_null(median_time_to_target(ct))},
          {"baseline_median_seconds", number_or_null(median_time_to_target(bt))},
          {"per_seed", per_seed},
          {"baseline_seconds", interval_json(bt.seconds)},
          {"speedup", speedup},
          {"speedup_note", note.empty() ? nlohmann::json(nullptr) : nlohmann::json(note)}};
}

// The family's part of summary.convergence: the Holm-adjusted p values the
// verdict read, the family's size, and the verdict and reason themselves.
void write_family(nlohmann::json& j, const ConvergenceVerdict& v) {
  if (j.value("verdict", "") == "baseline") {  // judged against itself: in no family
    j["p_adjusted"] = nullptr;
    j["family"] = nullptr;
    return;
  }
  j["p_adjusted"] = {{"divergence", number_or_null(v.p_divergence_adj)},
                     {"worse", number_or_null(v.p_worse_adj)},
                     {"better", number_or_null(v.p_better_adj)},
                     {"equivalence", number_or_null(v.p_equivalence_adj)}};
  j["family"] = {{"size", v.family_size},
                 {"method", "Holm over the cells judged against the same baseline, one family per claim "
                            "(diverges more often, worse, better, equivalent)"}};
  j["verdict"] = v.verdict;
  j["reason"] = v.reason;
}

// What the rule reads, back from a cell's summary.convergence (a set merged
// from shards has each cell's tests but not its shard's baseline).
ConvergenceVerdict verdict_from_json(const nlohmann::json& j) {
  ConvergenceVerdict v;
  v.alpha = j.at("alpha").get<double>();
  v.n = j.at("n").get<int>();
  v.margin.delta = finite_or_nan(j.value("delta", nlohmann::json()));
  v.p_lower = finite_or_nan(j.value("p_lower", nlohmann::json()));
  v.p_upper = finite_or_nan(j.value("p_upper", nlohmann::json()));
  v.p_worse = finite_or_nan(j.value("p_worse", nlohmann::json()));
  v.p_better = finite_or_nan(j.value("p_better", nlohmann::json()));
  v.p_divergence = finite_or_nan(j.value("p_divergence", nlohmann::json()));
  if (j.at("seeds_needed").is_number()) v.seeds_needed = j.at("seeds_needed").get<int>();
  const nlohmann::json& st = j.at("stability");
  v.seeds = st.at("seeds").get<int64_t>();
  v.baseline_seeds = st.at("baseline_seeds").get<int64_t>();
  v.diverged_seeds = st.at("diverged_seeds").get<int64_t>();
  v.nan_steps = st.at("nan_steps").get<int64_t>();
  v.skipped_steps = st.at("skipped_steps").get<int64_t>();
  v.steps = st.at("steps").get<int64_t>();
  v.skipped_allowed = st.at("skipped_allowed").get<int64_t>();
  v.baseline_diverged_seeds = st.at("baseline_diverged_seeds").get<int64_t>();
  v.baseline_nan_steps = st.at("baseline_nan_steps").get<int64_t>();
  v.baseline_skipped_steps = st.at("baseline_skipped_steps").get<int64_t>();
  v.excursion_seeds = st.value("excursion_seeds", int64_t(0));  // 0 in files from before the count
  v.baseline_excursion_seeds = st.value("baseline_excursion_seeds", int64_t(0));
  return v;
}

}  // namespace

void apply_convergence_family(const std::vector<nlohmann::json*>& cells) {
  std::vector<nlohmann::json*> judged;
  std::vector<ConvergenceVerdict> family;
  for (nlohmann::json* cell : cells) {
    if (!cell->is_object() || !cell->value("summary", nlohmann::json()).is_object()) continue;
    const nlohmann::json& conv = cell->at("summary").value("convergence", nlohmann::json());
    // Not judged (no baseline of the same problem) or the baseline itself; a
    // file from before the divergence test has no p_divergence: judged alone.
    if (!conv.is_object() || conv.value("verdict", "") == "baseline" || !conv.contains("p_divergence")) continue;
    judged.push_back(cell);
    family.push_back(verdict_from_json(conv));
  }
  judge_family(family);
  for (size_t i = 0; i < judged.size(); ++i) write_family(judged[i]->at("summary").at("convergence"), family[i]);
}

nlohmann::json convergence_settings_json(const ConvergenceSettings& s) {
  return {{"margin", s.margin ? nlohmann::json(*s.margin) : nlohmann::json(nullptr)},
          {"margin_abs", s.margin_abs ? nlohmann::json(*s.margin_abs) : nlohmann::json(nullptr)},
          {"metric", s.metric},
          {"alpha", s.alpha},
          {"max_skipped_fraction", s.max_skipped_fraction}};
}

ConvergenceSettings convergence_settings_from(const nlohmann::json& cell) {
  ConvergenceSettings s;
  const nlohmann::json& j = cell.value("convergence_settings", nlohmann::json());
  if (!j.is_object()) return s;
  if (j.value("margin", nlohmann::json()).is_number()) s.margin = j.at("margin").get<double>();
  if (j.value("margin_abs", nlohmann::json()).is_number()) s.margin_abs = j.at("margin_abs").get<double>();
  s.metric = j.value("metric", s.metric);
  s.alpha = j.value("alpha", s.alpha);
  // Cells written before the key existed are judged with the default.
  if (j.value("max_skipped_fraction", nlohmann::json()).is_number())
    s.max_skipped_fraction = j.at("max_skipped_fraction").get<double>();
  return s;
}

std::vector<SeedRun> seed_runs(const nlohmann::json& cell) {
  std::vector<SeedRun> runs;
  const int64_t batch = cell.at("config").at("batch_size").get<int64_t>();
  for (const nlohmann::json& rep : cell.at("repeats")) {
    SeedRun r;
    r.seed = rep.at("seed").get<uint64_t>();
    r.batch_size = batch;
    for (const nlohmann::json& e : rep.at("eval")) {
      r.eval_steps.push_back(e.at("step").get<int>());
      r.eval_losses.push_back(finite_or_nan(e.at("loss")));
    }
    const nlohmann::json& last = rep.at("eval").empty() ? nlohmann::json() : rep.at("eval").back();
    r.final_eval_loss = last.is_object() ? finite_or_nan(last.at("loss")) : NAN;
    r.final_eval_accuracy = last.is_object() ? finite_or_nan(last.value("accuracy", nlohmann::json())) : NAN;
    r.step_ms = rep.at("step_time_ms").get<std::vector<double>>();
    const nlohmann::json& loss = rep.at("loss");
    for (const nlohmann::json& x : loss) r.nan_steps += !std::isfinite(finite_or_nan(x));
    for (int s : rep.at("skipped").get<std::vector<int>>()) r.skipped_steps += s;
    r.steps = int64_t(loss.size());
    r.last_loss_finite = !loss.empty() && std::isfinite(finite_or_nan(loss.back()));
    for (const nlohmann::json& x : loss)
      if (std::isfinite(finite_or_nan(x))) {
        r.initial_loss = finite_or_nan(x);
        break;
      }
    runs.push_back(std::move(r));
  }
  return runs;
}

void apply_convergence(nlohmann::json& cell, const nlohmann::json* baseline) {
  nlohmann::json& summary = cell.at("summary");
  summary["convergence"] = nullptr;
  const bool is_baseline = cell.at("is_baseline").get<bool>();
  if (is_baseline) baseline = &cell;
  if (!baseline) return;
  const nlohmann::json& bc = baseline->at("config");
  const nlohmann::json& cc = cell.at("config");
  if (bc.at("model") != cc.at("model") || bc.at("data") != cc.at("data")) return;  // not the same training problem

  const ConvergenceSettings settings = convergence_settings_from(cell);
  const std::vector<SeedRun> base = seed_runs(*baseline), mine = seed_runs(cell);
  const ConvergenceVerdict v = convergence_verdict(base, mine, settings);
  nlohmann::json j;
  j["verdict"] = is_baseline ? "baseline" : v.verdict;  // write_family keeps "baseline"
  j["reason"] = is_baseline ? "the baseline, judged against itself" : v.reason;
  j["metric"] = v.metric;
  j["alpha"] = v.alpha;
  j["delta"] = number_or_null(v.margin.delta);
  j["delta_source"] = v.margin.source;
  j["baseline_mean"] = number_or_null(v.margin.baseline_mean);
  j["baseline_seed_sd"] = number_or_null(v.margin.baseline_seed_sd);
  j["n"] = v.n;
  j["paired_seeds"] = v.paired_seeds;
  j["mean_diff"] = number_or_null(v.mean_diff);
  j["diff_sd"] = number_or_null(v.diff_sd);
  j["ci"] = {{"lo", number_or_null(v.ci_lo)}, {"hi", number_or_null(v.ci_hi)}, {"confidence", 1.0 - 2.0 * v.alpha}};
  j["p_lower"] = number_or_null(v.p_lower);
  j["p_upper"] = number_or_null(v.p_upper);
  j["p_equivalence"] = number_or_null(std::max(v.p_lower, v.p_upper));
  j["p_worse"] = number_or_null(v.p_worse);
  j["p_better"] = number_or_null(v.p_better);
  j["p_divergence"] = number_or_null(v.p_divergence);
  write_family(j, v);
  j["seeds_needed"] = v.seeds_needed ? nlohmann::json(*v.seeds_needed) : nlohmann::json(nullptr);
  j["underpowered"] = v.n >= 2 && v.underpowered;
  // MLM (or class) accuracy beside an eval-loss verdict, where the runs have it.
  j["accuracy_diff"] = nullptr;
  if (settings.metric == "eval_loss") {
    ConvergenceSettings acc = settings;
    acc.metric = "eval_accuracy";
    const ConvergenceVerdict a = convergence_verdict(base, mine, acc);
    if (a.n >= 2)
      j["accuracy_diff"] = {{"mean_diff", a.mean_diff}, {"lo", number_or_null(a.ci_lo)}, {"hi", number_or_null(a.ci_hi)},
                            {"confidence", 1.0 - 2.0 * a.alpha}, {"n", a.n}};
  }
  j["stability"] = {{"seeds", v.seeds},
                    {"baseline_seeds", v.baseline_seeds},
                    {"diverged_seeds", v.diverged_seeds},
                    {"nan_steps", v.nan_steps},
                    {"skipped_steps", v.skipped_steps},
                    {"steps", v.steps},
                    {"skipped_allowed", v.skipped_allowed},
                    {"baseline_diverged_seeds", v.baseline_diverged_seeds},
                    {"baseline_nan_steps", v.baseline_nan_steps},
                    {"baseline_skipped_steps", v.baseline_skipped_steps},
                    {"excursion_seeds", v.excursion_seeds},
                    {"baseline_excursion_seeds", v.baseline_excursion_seeds}};
  j["curve"] = {{"verdict", v.curve.verdict},
                {"points", v.curve.points},
                {"pairs", v.curve.pairs},
                {"mean_abs_gap", number_or_null(v.curve.mean_abs_gap)},
                {"nan_gap", v.curve.mean_abs_gap == INFINITY},  // a NaN eval point on one curve only
                {"gap_hi", number_or_null(v.curve.gap_hi)},
                {"p_within", number_or_null(v.curve.p_within)},
                {"p_apart", number_or_null(v.curve.p_apart)},
                {"method", "per seed pair, the mean |cell - baseline| eval loss over the eval steps both have; "
                           "one-sided t tests over the pairs of the mean gap against delta"}};
  if (is_baseline) j["curve"] = nullptr;  // its curves against themselves
  j["time_to_target"] = time_to_target_json(base, mine, settings);
  summary["convergence"] = j;
}

}  // namespace mpb
