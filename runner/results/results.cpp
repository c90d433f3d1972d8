#include "runner/results/results.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "runner/measure/memory_fit.h"
#include "runner/measure/memory_triple.h"
#include "runner/measure/stats.h"
#include "runner/measure/steady_state.h"
#include "runner/measure/step_counters.h"
#include "runner/measure/utilization.h"
#include "runner/results/convergence_json.h"
#include "train/cell_limits.h"

namespace mpb {

namespace {

nlohmann::json memory_json(const MemorySnapshot& m) {
  nlohmann::json j;
  for (int c = 0; c < kMemCategoryCount; ++c) j[mem_category_name(static_cast<MemCategory>(c))] = m.peak[c];
  j["total"] = m.peak_total;
  return j;
}

// NaN and inf are not JSON; they become null (a skipped step's grad norm).
nlohmann::json finite_array(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
  return a;
}

double number_or_nan(const nlohmann::json& v) { return v.is_number() ? v.get<double>() : NAN; }

nlohmann::json numerics_stats_json(const NumericsStats& n) {
  nlohmann::json j;
  const double total = n.total > 0 ? double(n.total) : 1.0;
  j["count"] = n.total;
  j["underflow_fraction"] = double(n.zeros) / total;  // exact zeros in the stored dtype
  j["overflow_fraction"] = double(n.nonfinite) / total;
  if (!n.hist.empty()) j["log2_hist"] = {{"lo", kHistLo}, {"counts", n.hist}};
  return j;
}

// Median time of probed steps over unprobed ones, spread over every step:
// what sampling numerics every k steps costs the run.
double numerics_cost_fraction(const RunRecord& rec, int warmup) {
  std::vector<double> probed, plain;
  for (size_t i = static_cast<size_t>(warmup); i < rec.step_ms.size(); ++i)
    (rec.probed[i] ? probed : plain).push_back(rec.step_ms[i]);
  if (probed.empty() || plain.empty()) return 0.0;
  const double extra = std::max(0.0, median(probed) - median(plain));
  return extra * double(probed.size()) / (median(plain) * double(rec.step_ms.size()));
}

nlohmann::json numerics_json(const RunRecord& rec, int every, int warmup) {
  nlohmann::json samples = nlohmann::json::array();
  for (const NumericsSample& s : rec.numerics) {
    nlohmann::json sample = {{"step", s.step}, {"grads", numerics_stats_json(s.grads)},
                             {"weight_grads", numerics_stats_json(s.weight_grads)},
                             {"activations", numerics_stats_json(s.activations)}};
    if (!s.fp8.empty()) {  // precision fp8 only, so other cells' files are unchanged
      nlohmann::json tensors = nlohmann::json::array();
      for (const Fp8TensorReport& t : s.fp8)
        tensors.push_back({{"name", t.name}, {"format", t.format}, {"scale", t.scale}, {"amax", t.amax},
                           {"saturated_fraction", t.saturated_fraction}});
      sample["fp8"] = tensors;
    }
    samples.push_back(sample);
  }
  return {{"sample_every", every}, {"cost_fraction", numerics_cost_fraction(rec, warmup)}, {"samples", samples}};
}

}  // namespace

std::vector<double> repeat_timed_steps(const nlohmann::json& rep, int warmup) {
  const auto step_ms = rep.at("step_time_ms").get<std::vector<double>>();
  const auto probed = rep.at("probed").get<std::vector<int>>();
  const int from = rep.value("measured_from_step", warmup);
  const size_t first = std::min(static_cast<size_t>(std::max(0, from)), step_ms.size());
  std::vector<double> mine;
  for (size_t i = first; i < step_ms.size(); ++i)
    if (i >= probed.size() || !probed[i]) mine.push_back(step_ms[i]);
  if (mine.empty()) mine.assign(step_ms.begin() + long(first), step_ms.end());  // every step probed: time them all
  return mine;
}

namespace {

// Noise in one cell's steps (docs/RESULTS.md): measured, never used to drop data.
constexpr double kNoisyRobustCv = 0.10;    // the bulk of the steps varies by more than 10%
constexpr double kNoisyP90OverMedian = 1.25;
constexpr double kOutlierShare = 0.05;     // more than 5% of steps above 3x the median

nlohmann::json noise_json(const std::vector<double>& timed) {
  const StepSpread s = step_spread(timed);
  nlohmann::json reasons = nlohmann::json::array();
  char buf[160];
  if (s.robust_cv > kNoisyRobustCv) {
    std::snprintf(buf, sizeof buf, "step times vary by %.0f%% (robust CV) > %.0f%%", 100 * s.robust_cv,
                  100 * kNoisyRobustCv);
    reasons.push_back(buf);
  }
  if (s.p90_over_median > kNoisyP90OverMedian) {
    std::snprintf(buf, sizeof buf, "p90 step is %.2fx the median (> %.2fx)", s.p90_over_median, kNoisyP90OverMedian);
    reasons.push_back(buf);
  }
  if (s.samples > 0 && double(s.outliers) > kOutlierShare * double(s.samples)) {
    std::snprintf(buf, sizeof buf, "%lld of %lld steps took over 3x the median", static_cast<long long>(s.outliers),
                  static_cast<long long>(s.samples));
    reasons.push_back(buf);
  }
  return {{"cv", s.cv},
          {"robust_cv", s.robust_cv},
          {"p90_over_median", s.p90_over_median},
          {"outlier_steps", s.outliers},
          {"samples", s.samples},
          {"noisy", !reasons.empty()},
          {"reasons", reasons},
          {"outlier_rule", "none: every post-warm-up, unprobed step is kept in the median"}};
}

// Repeat i of both cells ran in the same round of an interleaved order.
bool same_rounds(const nlohmann::json& a, const nlohmann::json& b) {
  const auto& ra = a.at("repeats");
  const auto& rb = b.at("repeats");
  if (ra.size() != rb.size() || ra.size() < 2) return false;
  for (size_t i = 0; i < ra.size(); ++i)
    if (!ra[i].contains("round") || !rb[i].contains("round") || ra[i].at("round") != rb[i].at("round") ||
        ra[i].value("order", "") != "interleaved" || rb[i].value("order", "") != "interleaved")
      return false;
  return true;
}

}  // namespace

nlohmann::json repeat_result_json(int r, uint64_t seed, const RunRecord& rec, const CellConfig& cfg) {
  nlohmann::json j;
  j["repeat"] = r;
  j["seed"] = seed;
  j["step_time_ms"] = rec.step_ms;
  j["loss"] = finite_array(rec.loss);
  j["wall_time_s"] = rec.wall_s;
  j["loss_scale"] = rec.loss_scale;
  j["skipped"] = rec.skipped;
  j["grad_norm"] = finite_array(rec.grad_norm);
  nlohmann::json ev = nlohmann::json::array();
  for (const EvalPoint& e : rec.evals) ev.push_back({{"step", e.step}, {"loss", e.loss}, {"accuracy", e.accuracy}});
  j["eval"] = ev;
  j["peak_memory_bytes"] = memory_json(rec.memory);
  j["probed"] = rec.probed;
  const SteadyState steady = find_steady_state(rec.step_ms, rec.probed, cfg.warmup_steps);
  j["measured_from_step"] = steady.first_step;
  j["steady_state"] = {{"configured_warmup", steady.configured_warmup},
                       {"first_measured_step", steady.first_step},
                       {"extended", steady.extended},
                       {"reference_ms", steady.reference_ms},
                       {"rule", kSteadyStateRule}};
  j["flops_per_step"] = rec.flops_per_step;
  j["recompute_flops_per_step"] = rec.recompute_flops_per_step;
  j["model"] = rec.model;  // as built: BERT's decoder width (pad_vocab) and sparse-head rows
  if (cfg.numerics_every > 0) j["numerics"] = numerics_json(rec, cfg.numerics_every, cfg.warmup_steps);
  add_step_counters(j, rec, cfg.warmup_steps);  // runner/measure/step_counters.h
  return j;
}

std::vector<std::vector<double>> timed_steps(const nlohmann::json& cell) {
  const int warmup = cell.at("config").at("warmup_steps").get<int>();
  std::vector<std::vector<double>> out;
  for (const auto& rep : cell.at("repeats")) out.push_back(repeat_timed_steps(rep, warmup));
  return out;
}

namespace {

// A cell file's identity: the cell, its configuration, device and precision, its repeats.
nlohmann::json cell_identity_json(const CellContext& ctx, const std::vector<nlohmann::json>& repeats) {
  const Cell& cell = *ctx.cell;
  const CellConfig& cfg = cell.config;
  nlohmann::json j;
  j["schema"] = "mpbench.cell/1";
  j["experiment"] = ctx.experiment;
  j["run_id"] = ctx.run_id;
  j["cell_id"] = cell.id;
  j["slug"] = cell.slug;
  nlohmann::json axes = nlohmann::json::object();
  for (const auto& [k, v] : cell.axes) axes[k] = v;
  j["axes"] = axes;
  j["is_baseline"] = cell.is_baseline;
  j["config"] = cell_config_to_json(cfg);
  j["config_hash"] = config_hash(j["config"]);
  // What preparing the data produced (runner/results/data_facts.h): the same
  // in every repeat, as the tokenizer is trained on the corpus, not the seed.
  if (!repeats.empty() && repeats.front().contains("data")) j["data"] = repeats.front().at("data");
  j["device"] = {{"kind", device_kind_name(ctx.device->kind)},
                 {"name", ctx.device->name},
                 {"emulated", {{"gemm", ctx.gemm_support}}}};
  const PrecisionPolicy& p = ctx.policy;
  j["precision"] = {{"name", p.name}, {"params", dtype_name(p.param)}, {"compute", dtype_name(p.compute)},
                    {"output", dtype_name(p.output)}, {"grads", dtype_name(p.grad())},
                    {"gemm", gemm_compute_name(p.gemm)}, {"master_weights", p.master_weights},
                    {"gemm_impl", ctx.gemm_support}};
  if (p.fp8) j["precision"]["linear_gemm"] = "fp8";  // only fp8 cells: other cells' files are unchanged
  // The GEMM math asked for, and the variables set that can change it behind
  // the library's back (NVIDIA_TF32_OVERRIDE=1 makes "fp32" TF32): per cell,
  // so a cell read alone still says what its "fp32" was.
  j["gemm_math"] = {{"requested", ctx.gemm_math}, {"overrides", ctx.environment_overrides}};
  j["flops_per_step"] = repeats.empty() ? 0.0 : repeats[0].value("flops_per_step", 0.0);
  // How the verdict judges this cell (the experiment's `convergence:`): kept
  // beside the config, not in it, so it does not change the config_hash.
  j["convergence_settings"] = convergence_settings_json(cell.convergence);
  j["repeats"] = repeats;
  return j;
}

// What the summary takes from every repeat, gathered in one pass.
struct RepeatTotals {
  std::vector<double> timed, per_repeat_median, final_losses, eval_loss, eval_acc;
  nlohmann::json peak = nlohmann::json::object();
  int skipped = 0;
};

RepeatTotals repeat_totals(const nlohmann::json& j, const std::vector<nlohmann::json>& repeats) {
  RepeatTotals t;
  // Timing statistics over the measured window of every repeat (after warm-up and start-up).
  const std::vector<std::vector<double>> per_repeat = timed_steps(j);
  for (size_t r = 0; r < repeats.size(); ++r) {
    const nlohmann::json& rep = repeats[r];
    t.timed.insert(t.timed.end(), per_repeat[r].begin(), per_repeat[r].end());
    t.per_repeat_median.push_back(median(per_repeat[r]));
    // Final loss: mean over the last 10% of steps (at least one), less noisy than the last step.
    const auto& loss = rep.at("loss");
    const size_t tail = std::max<size_t>(1, loss.size() / 10);
    std::vector<double> last;
    for (size_t i = loss.size() - tail; i < loss.size(); ++i) last.push_back(number_or_nan(loss[i]));
    t.final_losses.push_back(mean(last));
    t.eval_loss.push_back(number_or_nan(rep.at("eval").back().at("loss")));
    t.eval_acc.push_back(number_or_nan(rep.at("eval").back().at("accuracy")));
    for (const auto& [k, v] : rep.at("peak_memory_bytes").items())
      t.peak[k] = std::max(t.peak.value(k, 0.0), v.get<double>());
    for (int s : rep.at("skipped").get<std::vector<int>>()) t.skipped += s;
  }

  return t;
}

// Throttling and energy over the repeats that have them (GPU telemetry, energy meters).
void add_telemetry_summary(nlohmann::json& s, const std::vector<nlohmann::json>& repeats, int batch_size) {
  // Throttling in any repeat (GPU telemetry): flagged, the samples all kept.
  nlohmann::json throttled = nullptr, reasons = nlohmann::json::array();
  for (const auto& rep : repeats) {
    const nlohmann::json& t = rep.value("gpu_telemetry", nlohmann::json());
    if (!t.is_object()) continue;
    throttled = (throttled.is_boolean() && throttled.get<bool>()) || t.at("throttled").get<bool>();
    for (const auto& name : t.at("throttle_reasons"))
      if (std::find(reasons.begin(), reasons.end(), name) == reasons.end()) reasons.push_back(name);
  }
  s["throttled"] = throttled;  // null: no telemetry (CPU, or no NVML)
  // Energy (runner/machine/energy_meter.h): the median over the repeats that have it.
  std::vector<double> j_per_step;
  std::string energy_source;
  for (const auto& rep : repeats) {
    const nlohmann::json& e = rep.value("energy", nlohmann::json());
    if (!e.is_object() || !e.at("j_per_step").is_number()) continue;
    j_per_step.push_back(e.at("j_per_step").get<double>());
    energy_source = e.at("source").get<std::string>();
  }
  s["energy_j_per_step"] = j_per_step.empty() ? nlohmann::json(nullptr) : nlohmann::json(median(j_per_step));
  s["samples_per_joule"] =
      j_per_step.empty() ? nlohmann::json(nullptr) : nlohmann::json(double(batch_size) / median(j_per_step));
  s["energy_source"] = j_per_step.empty() ? nlohmann::json(nullptr) : nlohmann::json(energy_source);
  s["throttle_reasons"] = reasons;
}

}  // namespace

nlohmann::json cell_result_json(const CellContext& ctx, const std::vector<nlohmann::json>& repeats) {
  const CellConfig& cfg = ctx.cell->config;
  nlohmann::json j = cell_identity_json(ctx, repeats);
  const RepeatTotals t = repeat_totals(j, repeats);
  const std::vector<double>& timed = t.timed;
  nlohmann::json s;
  const double med = median(timed);
  s["step_time_ms"] = {{"median", med}, {"p10", quantile(timed, 0.1)}, {"p90", quantile(timed, 0.9)}};
  const double sps = double(cfg.batch_size) / (med / 1000.0);
  s["samples_per_s"] = sps;
  nlohmann::json sps_reps = nlohmann::json::array();
  for (double m : t.per_repeat_median) sps_reps.push_back(double(cfg.batch_size) / (m / 1000.0));
  s["samples_per_s_repeats"] = sps_reps;
  s["step_time_ms_repeats"] = t.per_repeat_median;
  s["speedup"] = nullptr;
  s["speedup_interval"] = nullptr;
  s["speedup_verdict"] = nullptr;
  s["convergence"] = nullptr;  // apply_speedup sets it against the baseline
  const double gflops = j["flops_per_step"].get<double>() / (med * 1e6);
  s["gflops"] = gflops;
  s["ceiling_gflops"] = ctx.ceiling_gflops;
  s["ceiling_fraction"] = ctx.ceiling_gflops > 0 ? nlohmann::json(gflops / ctx.ceiling_gflops) : nlohmann::json(nullptr);
  UtilizationInputs u;
  u.device = ctx.device;
  u.gemm = ctx.policy.gemm;
  u.model_flops_per_step = j["flops_per_step"].get<double>();
  u.recompute_flops_per_step = repeats.empty() ? 0.0 : repeats[0].value("recompute_flops_per_step", 0.0);
  u.median_step_ms = med;
  u.ceiling_gflops = ctx.ceiling_gflops;
  s["utilization"] = utilization_json(u);
  add_telemetry_summary(s, repeats, cfg.batch_size);
  nlohmann::json peak = t.peak;
  for (auto& [k, v] : peak.items()) v = static_cast<size_t>(v.get<double>());
  s["peak_memory_bytes"] = peak;
  s["memory"] = summarize_memory_triples(repeats);  // runner/measure/memory_triple.h
  s["estimated_memory_bytes"] =
      memory_estimate_json(estimate_cell_memory(cfg, ctx.device->kind == DeviceKind::Cuda));  // measure/memory_fit.h
  s["final_loss"] = mean(t.final_losses);
  s["eval_loss"] = mean(t.eval_loss);
  s["eval_accuracy"] = mean(t.eval_acc);
  s["skipped_steps"] = t.skipped;
  // The time estimate made before the run, and what it estimates: every
  // step of every repeat (warm-up and probed steps too), as the device timed them.
  s["estimated_time"] = ctx.estimated_time;
  double measured_ms = 0;
  for (const auto& rep : repeats)
    for (const auto& ms : rep.at("step_time_ms")) measured_ms += ms.get<double>();
  s["measured_time_s"] = measured_ms / 1000.0;
  s["noise"] = noise_json(timed);
  nlohmann::json from = nlohmann::json::array();
  for (const auto& rep : repeats) from.push_back(rep.value("measured_from_step", cfg.warmup_steps));
  s["measured_from_step"] = from;  // per repeat: where its measured window began
  add_step_counter_summary(s, repeats);
  j["summary"] = s;
  return j;
}

void apply_speedup(nlohmann::json& cell, const nlohmann::json* baseline) {
  apply_convergence(cell, baseline);  // runner/results/convergence_json.h: the same pairing
  nlohmann::json& s = cell.at("summary");
  s["speedup"] = nullptr;
  s["speedup_interval"] = nullptr;
  s["speedup_verdict"] = nullptr;
  if (cell.at("is_baseline").get<bool>()) {
    s["speedup"] = 1.0;
    s["speedup_verdict"] = "baseline";
    return;
  }
  if (!baseline) return;
  const double base_sps = baseline->at("summary").at("samples_per_s").get<double>();
  s["speedup"] = s.at("samples_per_s").get<double>() / base_sps;
  const double base_batch = baseline->at("config").at("batch_size").get<double>();
  const double cell_batch = cell.at("config").at("batch_size").get<double>();
  const auto interval = speedup_interval(timed_steps(*baseline), base_batch, timed_steps(cell), cell_batch,
                                         same_rounds(*baseline, cell));
  if (!interval) return;  // fewer than two units a side: no interval rather than a false one
  s["speedup_interval"] = {{"lo", interval->lo},
                           {"hi", interval->hi},
                           {"confidence", interval->confidence},
                           {"method", interval->method},
                           {"df", interval->df},
                           {"units", {{"baseline", interval->units_baseline}, {"cell", interval->units_cell}}}};
  s["speedup_verdict"] = speedup_verdict(*interval);
}

namespace {
std::string csv_field(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  std::ostringstream o;
  o.precision(10);
  if (v.is_number_float()) o << v.get<double>(); else o << v.dump();
  return o.str();
}

const nlohmann::json& field_or_null(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json null;
  return obj.is_object() && obj.contains(key) ? obj.at(key) : null;
}

// ",device,device_name,run_id,commit" of one cell: from the cell's own file
// (a merged set's cells ran on their shards' machines), the commit by its run
// id; empty where a file from an older runner has no such field.
std::string machine_fields(const nlohmann::json& cell, const CommitsByRun& commits) {
  const nlohmann::json& device = field_or_null(cell, "device");
  const nlohmann::json& run_id = field_or_null(cell, "run_id");
  const auto commit = run_id.is_string() ? commits.find(run_id.get<std::string>()) : commits.end();
  return "," + csv_field(field_or_null(device, "kind")) + "," + csv_field(field_or_null(device, "name")) + "," +
         csv_field(run_id) + "," + (commit == commits.end() ? std::string() : csv_field(commit->second));
}
}  // namespace

std::string summary_csv(const std::vector<nlohmann::json>& cells, const CommitsByRun& commits) {
  // Axis columns: the union of axis keys, in first-seen order.
  std::vector<std::string> axis_keys;
  for (const auto& c : cells)
    for (const auto& [k, v] : c.at("axes").items())
      if (std::find(axis_keys.begin(), axis_keys.end(), k) == axis_keys.end()) axis_keys.push_back(k);
  // nlohmann sorts object keys; recover written order from the cell id instead.
  if (!cells.empty()) {
    std::vector<std::string> ordered;
    for (const auto& c : cells) {
      std::string id = c.at("cell_id");
      std::istringstream in(id);
      for (std::string term; std::getline(in, term, ',');) {
        std::string k = term.substr(0, term.find('='));
        if (std::find(ordered.begin(), ordered.end(), k) == ordered.end() &&
            std::find(axis_keys.begin(), axis_keys.end(), k) != axis_keys.end())
          ordered.push_back(k);
      }
    }
    for (const auto& k : axis_keys)
      if (std::find(ordered.begin(), ordered.end(), k) == ordered.end()) ordered.push_back(k);
    axis_keys = ordered;
  }
  static const char* mems[] = {"params", "grads", "optimizer", "activations", "workspace", "total"};
  std::ostringstream out;
  out << "cell_id,is_baseline";
  for (const auto& k : axis_keys) out << ",axis." << k;
  out << ",samples_per_s,speedup,speedup_lo,speedup_hi,speedup_verdict,step_ms_median,step_ms_p10,step_ms_p90,"
         "step_cv,noisy,gflops,ceiling_fraction";
  for (const char* m : mems) out << ",mem_" << m;
  out << ",final_loss,eval_loss,eval_accuracy,skipped_steps,config_hash";
  out << ",convergence_verdict,convergence_metric,convergence_delta,convergence_delta_source,convergence_mean_diff,"
         "convergence_ci_lo,convergence_ci_hi,convergence_p_equivalence,convergence_p_worse,convergence_n,"
         "convergence_seeds_needed,ttt_steps,ttt_samples,ttt_seconds,ttt_never_reached,ttt_speedup,ttt_speedup_lo,"
         "ttt_speedup_hi,diverged_seeds,nan_steps";
  out << ",device,device_name,run_id,commit\n";
  for (const auto& c : cells) {
    const auto& s = c.at("summary");
    const nlohmann::json& interval = field_or_null(s, "speedup_interval");
    const nlohmann::json& noise = field_or_null(s, "noise");
    out << csv_field(c.at("cell_id")) << ',' << csv_field(c.at("is_baseline"));
    for (const auto& k : axis_keys) out << ',' << (c.at("axes").contains(k) ? csv_field(c.at("axes").at(k)) : "");
    out << ',' << csv_field(s.at("samples_per_s")) << ',' << csv_field(s.at("speedup")) << ','
        << csv_field(field_or_null(interval, "lo")) << ',' << csv_field(field_or_null(interval, "hi")) << ','
        << csv_field(field_or_null(s, "speedup_verdict")) << ','
        << csv_field(s.at("step_time_ms").at("median")) << ',' << csv_field(s.at("step_time_ms").at("p10")) << ','
        << csv_field(s.at("step_time_ms").at("p90")) << ',' << csv_field(field_or_null(noise, "cv")) << ','
        << csv_field(field_or_null(noise, "noisy")) << ',' << csv_field(s.at("gflops")) << ','
        << csv_field(s.at("ceiling_fraction"));
    for (const char* m : mems) out << ',' << csv_field(s.at("peak_memory_bytes").at(m));
    out << ',' << csv_field(s.at("final_loss")) << ',' << csv_field(s.at("eval_loss")) << ','
        << csv_field(s.at("eval_accuracy")) << ',' << csv_field(s.at("skipped_steps")) << ','
        << csv_field(c.at("config_hash"));
    // summary.convergence (empty fields: none, e.g. no baseline of the same model and data).
    const nlohmann::json& conv = field_or_null(s, "convergence");
    const nlohmann::json& ci = field_or_null(conv, "ci");
    const nlohmann::json& ttt = field_or_null(conv, "time_to_target");
    const nlohmann::json& ttt_speedup = field_or_null(ttt, "speedup");
    const nlohmann::json& stability = field_or_null(conv, "stability");
    for (const char* k : {"verdict", "metric", "delta", "delta_source", "mean_diff"})
      out << ',' << csv_field(field_or_null(conv, k));
    out << ',' << csv_field(field_or_null(ci, "lo")) << ',' << csv_field(field_or_null(ci, "hi"));
    for (const char* k : {"p_equivalence", "p_worse", "n", "seeds_needed"}) out << ',' << csv_field(field_or_null(conv, k));
    for (const char* k : {"steps", "samples", "seconds"})
      out << ',' << csv_field(field_or_null(field_or_null(ttt, k), "mean"));
    out << ',' << csv_field(field_or_null(ttt, "never_reached"));
    for (const char* k : {"speedup", "lo", "hi"}) out << ',' << csv_field(field_or_null(ttt_speedup, k));
    out << ',' << csv_field(field_or_null(stability, "diverged_seeds")) << ','
        << csv_field(field_or_null(stability, "nan_steps"));
    out << machine_fields(c, commits) << '\n';
  }
  return out.str();
}

bool cell_diverged(const nlohmann::json& cell) {
  const nlohmann::json& s = cell.at("summary");
  for (const char* k : {"final_loss", "eval_loss"})
    if (!s.at(k).is_number() || !std::isfinite(s.at(k).get<double>())) return true;
  // The verdict's one rule (seed_diverged): a repeat that blew up and stayed finite diverged too.
  // (A summary without its repeats, as a table test builds, has only the losses above.)
  if (!cell.contains("repeats") || !cell.contains("config")) return false;
  for (const SeedRun& r : seed_runs(cell))
    if (seed_diverged(r)) return true;
  return false;
}

}  // namespace mpb
