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
  nlohmann::json j = {{"speedup", std::exp(mean(log_ratio))}, {"lo", nullptr}, {"hi", nullptr},
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
          {"per_seed", per_seed},
          {"baseline_seconds", interval_json(bt.seconds)},
          {"speedup", time_speedup_json(base, bt, cell, ct)}};
}

}  // namespace

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
    const bool last_loss_finite = !loss.empty() && std::isfinite(finite_or_nan(loss.back()));
    r.diverged = !std::isfinite(r.final_eval_loss) || !last_loss_finite;
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
  j["verdict"] = is_baseline ? "baseline" : v.verdict;
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
  j["stability"] = {{"diverged_seeds", v.diverged_seeds},
                    {"nan_steps", v.nan_steps},
                    {"skipped_steps", v.skipped_steps},
                    {"steps", v.steps},
                    {"skipped_allowed", v.skipped_allowed},
                    {"baseline_diverged_seeds", v.baseline_diverged_seeds},
                    {"baseline_nan_steps", v.baseline_nan_steps},
                    {"baseline_skipped_steps", v.baseline_skipped_steps}};
  j["time_to_target"] = time_to_target_json(base, mine, settings);
  summary["convergence"] = j;
}

}  // namespace mpb
