#include "runner/results.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "runner/stats.h"

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
  for (const NumericsSample& s : rec.numerics)
    samples.push_back({{"step", s.step}, {"grads", numerics_stats_json(s.grads)},
                       {"weight_grads", numerics_stats_json(s.weight_grads)},
                       {"activations", numerics_stats_json(s.activations)}});
  return {{"sample_every", every}, {"cost_fraction", numerics_cost_fraction(rec, warmup)}, {"samples", samples}};
}

nlohmann::json repeat_json(int r, uint64_t seed, const RunRecord& rec, const CellConfig& cfg) {
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
  if (cfg.numerics_every > 0) j["numerics"] = numerics_json(rec, cfg.numerics_every, cfg.warmup_steps);
  return j;
}

double mean(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / double(v.size());
}

}  // namespace

nlohmann::json cell_result_json(const CellContext& ctx, const std::vector<RunRecord>& repeats) {
  const Cell& cell = *ctx.cell;
  const CellConfig& cfg = cell.config;
  nlohmann::json j;
  j["schema"] = "mpbench.cell/1";
  j["experiment"] = ctx.experiment;
  j["cell_id"] = cell.id;
  j["slug"] = cell.slug;
  nlohmann::json axes = nlohmann::json::object();
  for (const auto& [k, v] : cell.axes) axes[k] = v;
  j["axes"] = axes;
  j["is_baseline"] = cell.is_baseline;
  j["config"] = cell_config_to_json(cfg);
  j["config_hash"] = config_hash(j["config"]);
  j["device"] = {{"kind", ctx.device->kind}, {"name", ctx.device->name}, {"emulated", {{"gemm", ctx.gemm_support}}}};
  const PrecisionPolicy& p = ctx.policy;
  j["precision"] = {{"name", p.name}, {"params", dtype_name(p.param)}, {"compute", dtype_name(p.compute)},
                    {"output", dtype_name(p.output)}, {"grads", dtype_name(p.grad())},
                    {"gemm", gemm_compute_name(p.gemm)}, {"master_weights", p.master_weights},
                    {"gemm_impl", ctx.gemm_support}};
  j["flops_per_step"] = repeats.empty() ? 0.0 : repeats[0].flops_per_step;

  // Timing statistics over the post-warmup steps of every repeat.
  std::vector<double> timed, per_repeat_median, final_losses, eval_loss, eval_acc;
  MemorySnapshot peak;
  int skipped = 0;
  nlohmann::json reps = nlohmann::json::array();
  for (size_t r = 0; r < repeats.size(); ++r) {
    const RunRecord& rec = repeats[r];
    reps.push_back(repeat_json(int(r), cfg.seed + r, rec, cfg));
    // Timing samples: post-warmup steps that did not also sample numerics.
    std::vector<double> mine;
    for (size_t i = static_cast<size_t>(cfg.warmup_steps); i < rec.step_ms.size(); ++i)
      if (!rec.probed[i]) mine.push_back(rec.step_ms[i]);
    if (mine.empty())  // every step was probed: time them all rather than none
      mine.assign(rec.step_ms.begin() + std::min<size_t>(cfg.warmup_steps, rec.step_ms.size()), rec.step_ms.end());
    timed.insert(timed.end(), mine.begin(), mine.end());
    per_repeat_median.push_back(median(mine));
    // Final loss: mean over the last 10% of steps (at least one), less noisy than the last step.
    size_t tail = std::max<size_t>(1, rec.loss.size() / 10);
    final_losses.push_back(mean(std::vector<double>(rec.loss.end() - long(tail), rec.loss.end())));
    eval_loss.push_back(rec.evals.back().loss);
    eval_acc.push_back(rec.evals.back().accuracy);
    for (int c = 0; c < kMemCategoryCount; ++c) peak.peak[c] = std::max(peak.peak[c], rec.memory.peak[c]);
    peak.peak_total = std::max(peak.peak_total, rec.memory.peak_total);
    for (int s : rec.skipped) skipped += s;
  }
  j["repeats"] = reps;

  nlohmann::json s;
  const double med = median(timed);
  s["step_time_ms"] = {{"median", med}, {"p10", quantile(timed, 0.1)}, {"p90", quantile(timed, 0.9)}};
  const double sps = double(cfg.batch_size) / (med / 1000.0);
  s["samples_per_s"] = sps;
  nlohmann::json sps_reps = nlohmann::json::array();
  for (double m : per_repeat_median) sps_reps.push_back(double(cfg.batch_size) / (m / 1000.0));
  s["samples_per_s_repeats"] = sps_reps;
  s["step_time_ms_repeats"] = per_repeat_median;
  s["speedup"] = ctx.baseline_samples_per_s ? nlohmann::json(sps / *ctx.baseline_samples_per_s) : nlohmann::json(nullptr);
  const double gflops = j["flops_per_step"].get<double>() / (med * 1e6);
  s["gflops"] = gflops;
  s["ceiling_gflops"] = ctx.ceiling_gflops;
  s["ceiling_fraction"] = ctx.ceiling_gflops > 0 ? nlohmann::json(gflops / ctx.ceiling_gflops) : nlohmann::json(nullptr);
  s["peak_memory_bytes"] = memory_json(peak);
  s["final_loss"] = mean(final_losses);
  s["eval_loss"] = mean(eval_loss);
  s["eval_accuracy"] = mean(eval_acc);
  s["skipped_steps"] = skipped;
  j["summary"] = s;
  return j;
}

double cell_samples_per_s(const nlohmann::json& cell) { return cell.at("summary").at("samples_per_s").get<double>(); }

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
}  // namespace

std::string summary_csv(const std::vector<nlohmann::json>& cells) {
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
  out << ",samples_per_s,speedup,step_ms_median,step_ms_p10,step_ms_p90,gflops,ceiling_fraction";
  for (const char* m : mems) out << ",mem_" << m;
  out << ",final_loss,eval_loss,eval_accuracy,skipped_steps,config_hash\n";
  for (const auto& c : cells) {
    const auto& s = c.at("summary");
    out << csv_field(c.at("cell_id")) << ',' << csv_field(c.at("is_baseline"));
    for (const auto& k : axis_keys) out << ',' << (c.at("axes").contains(k) ? csv_field(c.at("axes").at(k)) : "");
    out << ',' << csv_field(s.at("samples_per_s")) << ',' << csv_field(s.at("speedup")) << ','
        << csv_field(s.at("step_time_ms").at("median")) << ',' << csv_field(s.at("step_time_ms").at("p10")) << ','
        << csv_field(s.at("step_time_ms").at("p90")) << ',' << csv_field(s.at("gflops")) << ','
        << csv_field(s.at("ceiling_fraction"));
    for (const char* m : mems) out << ',' << csv_field(s.at("peak_memory_bytes").at(m));
    out << ',' << csv_field(s.at("final_loss")) << ',' << csv_field(s.at("eval_loss")) << ','
        << csv_field(s.at("eval_accuracy")) << ',' << csv_field(s.at("skipped_steps")) << ','
        << csv_field(c.at("config_hash")) << '\n';
  }
  return out.str();
}

}  // namespace mpb
