#include "runner/results/terminal_table.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "runner/results/results.h"

namespace mpb {

namespace {

// "1.07x", the interval "1.01-1.12", and what they mean.
void speedup_columns(const nlohmann::json& s, std::string& speed, std::string& interval, std::string& note) {
  speed = interval = "-";
  if (s.at("speedup").is_null()) return;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2fx", s.at("speedup").get<double>());
  speed = buf;
  const nlohmann::json& iv = s.value("speedup_interval", nlohmann::json());
  if (iv.is_object()) {
    std::snprintf(buf, sizeof buf, "%.2f-%.2f", iv.at("lo").get<double>(), iv.at("hi").get<double>());
    interval = buf;
  }
  const std::string verdict = s.value("speedup_verdict", nlohmann::json()).is_string() ? s.at("speedup_verdict").get<std::string>() : "";
  if (verdict == "baseline") note = "(baseline)";
  else if (verdict == "no measurable difference") note = "(no measurable difference)";
}

// Below the table: the host syncs per step (the same in every cell of a
// model, so one line unless they differ), and a warning for every cell whose
// timed steps allocated or built GEMM plans, or whose GEMMs fell back from
// a fused epilogue. Files from before the counters have none: nothing said.
void print_step_counters(const std::vector<nlohmann::json>& cells) {
  int64_t lo = -1, hi = -1;
  for (const auto& c : cells) {
    const nlohmann::json& v = c.at("summary").value("host_syncs_per_step", nlohmann::json());
    if (!v.is_number()) continue;
    const int64_t n = v.get<int64_t>();
    lo = lo < 0 ? n : std::min(lo, n);
    hi = std::max(hi, n);
  }
  if (lo >= 0) {
    if (lo == hi) std::printf("host syncs per timed step: %lld\n", static_cast<long long>(lo));
    else std::printf("host syncs per timed step: %lld to %lld\n", static_cast<long long>(lo), static_cast<long long>(hi));
  }
  for (const auto& c : cells) {
    const nlohmann::json& s = c.at("summary");
    const std::string id = c.at("cell_id").get<std::string>();
    const nlohmann::json& a = s.value("allocs_in_timed_steps", nlohmann::json());
    const nlohmann::json& p = s.value("plans_created_in_timed_steps", nlohmann::json());
    if ((a.is_number() && a.get<int64_t>() > 0) || (p.is_number() && p.get<int64_t>() > 0))
      std::printf("warning: %s: %lld allocation(s) and %lld GEMM plan creation(s) inside timed steps after warm-up\n",
                  id.c_str(), static_cast<long long>(a.is_number() ? a.get<int64_t>() : 0),
                  static_cast<long long>(p.is_number() ? p.get<int64_t>() : 0));
    std::string fb;
    // A named copy: items() refers to its object, which a temporary would not outlive in the loop.
    const nlohmann::json fallbacks = s.value("gemm_fallbacks", nlohmann::json::object());
    for (const auto& [name, n] : fallbacks.items())
      fb += (fb.empty() ? "" : ", ") + name + " " + std::to_string(n.get<int64_t>());
    if (!fb.empty()) std::printf("note: %s: fused GEMM epilogues the library refused, run unfused: %s\n", id.c_str(), fb.c_str());
    // The CUDA backend's hand-written attention kernel (fp32 math on CUDA
    // cores) instead of cuDNN SDPA: shapes cuDNN refuses, builds without
    // cudnn_frontend, and the labels that say cuDNN failed
    // ("cuda_kernel_cudnn_unavailable", "cuda_kernel_cudnn_plan_failed":
    // backends/cuda/sdpa_policy.h). docs/GPU.md; fp32/TF32 BERT cells run
    // unfused attention.
    const nlohmann::json attention = s.value("attention_impl_calls", nlohmann::json::object());
    int64_t kernel_calls = 0;
    for (const auto& [impl, n] : attention.items())
      if (impl.rfind("cuda_kernel", 0) == 0) kernel_calls += n.get<int64_t>();
    if (kernel_calls > 0)
      std::printf("note: %s: fused attention ran the hand-written CUDA kernel for %lld call(s), not cuDNN SDPA "
                  "(attention_impl %s)\n",
                  id.c_str(), static_cast<long long>(kernel_calls),
                  s.value("attention_impl", nlohmann::json("?")).dump().c_str());
  }
}

}  // namespace

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  // h:mm:ss, so a long run reads like the dry run's h:mm estimate ("3:07:12", not "187:12").
  long s = std::lround(seconds);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

std::string fmt(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

std::string percent(double f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * f);
  return buf;
}

std::string table_id(const std::string& id, size_t width) {
  if (id.size() <= width) return id;
  const size_t head = (width - 3) * 2 / 3, tail = width - 3 - head;
  return id.substr(0, head) + "..." + id.substr(id.size() - tail);
}

void print_table(const std::vector<nlohmann::json>& cells) {
  constexpr size_t kMaxWidth = 96;
  size_t w = 4;
  for (const auto& c : cells) w = std::max(w, std::min(kMaxWidth, c.at("cell_id").get<std::string>().size()));
  std::printf("\n%-*s  %12s  %8s  %11s  %10s  %8s  %11s  %9s  %-12s\n", int(w), "cell", "samples/s", "speedup",
              "95% CI", "step ms", "ceiling", "peak mem", "eval loss", "vs baseline");
  std::vector<std::string> noisy;
  for (const auto& c : cells) {
    const auto& s = c.at("summary");
    std::string speed, interval, note;
    speedup_columns(s, speed, interval, note);
    const std::string frac = s.at("ceiling_fraction").is_number() ? percent(s.at("ceiling_fraction").get<double>()) : "-";
    // A diverged cell (NaN loss) is a result, not an error: say so.
    char eval[32] = "diverged";
    if (!cell_diverged(c)) std::snprintf(eval, sizeof eval, "%.4f", s.at("eval_loss").get<double>());
    // summary.convergence's verdict (docs/RESULTS.md): "-" without a baseline of the same model and data.
    const nlohmann::json& conv = s.value("convergence", nlohmann::json());
    const std::string trains = conv.is_object() && conv.at("verdict").is_string() ? conv.at("verdict").get<std::string>() : "-";
    if (s.value("throttled", nlohmann::json()).is_boolean() && s.at("throttled").get<bool>())
      note += note.empty() ? "(throttled)" : " (throttled)";
    const nlohmann::json& noise = s.value("noise", nlohmann::json());
    if (noise.is_object() && noise.at("noisy").get<bool>()) {
      note += note.empty() ? "(noisy)" : " (noisy)";
      std::string why;
      for (const auto& r : noise.at("reasons")) why += (why.empty() ? "" : "; ") + r.get<std::string>();
      noisy.push_back(c.at("cell_id").get<std::string>() + ": " + why);
    }
    std::printf("%-*s  %12.1f  %8s  %11s  %10.2f  %8s  %11s  %9s  %-12s%s%s\n", int(w),
                table_id(c.at("cell_id"), w).c_str(), s.at("samples_per_s").get<double>(), speed.c_str(),
                interval.c_str(), s.at("step_time_ms").at("median").get<double>(), frac.c_str(),
                human_bytes(s.at("peak_memory_bytes").at("total").get<double>()).c_str(), eval, trains.c_str(),
                note.empty() ? "" : "  ", note.c_str());
  }
  for (const std::string& n : noisy) std::printf("noisy: %s\n", n.c_str());
  // Why each verdict other than equivalent is what it is, and the time to target.
  for (const auto& c : cells) {
    const nlohmann::json& conv = c.at("summary").value("convergence", nlohmann::json());
    if (!conv.is_object() || !conv.at("verdict").is_string() || conv.at("verdict") == "baseline") continue;
    std::string line = c.at("cell_id").get<std::string>() + ": " + conv.at("verdict").get<std::string>() + " (" +
                       conv.at("reason").get<std::string>() + ")";
    const nlohmann::json& ttt = conv.value("time_to_target", nlohmann::json());
    if (ttt.is_object() && ttt.at("speedup").is_object())
      line += fmt("; time to target %.2fx the baseline's speed", ttt.at("speedup").at("speedup").get<double>());
    if (ttt.is_object() && ttt.at("never_reached").get<int>() > 0)
      line += fmt("; %d seed(s) never reached the target", ttt.at("never_reached").get<int>());
    if (ttt.is_object() && ttt.value("speedup_note", nlohmann::json()).is_string())
      line += "; " + ttt.at("speedup_note").get<std::string>();
    const nlohmann::json& curve = conv.value("curve", nlohmann::json());
    if (curve.is_object() && curve.value("verdict", "") == "apart")
      line += "; the eval curves were apart (mean |gap| above delta, or a NaN on one)";
    std::printf("convergence: %s\n", line.c_str());
  }
  print_step_counters(cells);
  for (const auto& c : cells) {
    const nlohmann::json& u = c.at("summary").value("utilization", nlohmann::json());
    if (u.is_object() && u.value("warning", nlohmann::json()).is_string())
      std::printf("warning: %s: %s\n", c.at("cell_id").get<std::string>().c_str(),
                  u.at("warning").get<std::string>().c_str());
  }
}

std::string load_warning(const std::string& when, const LoadWindow& w) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "machine busy %s: other processes used %.0f%% of the CPU time%s (load average %.2f)",
                when.c_str(), 100 * w.other_cpu.value_or(0.0),
                w.steal && *w.steal > 0.01 ? (", the hypervisor stole " + percent(*w.steal)).c_str() : "",
                w.loadavg.empty() ? 0.0 : w.loadavg[0]);
  return buf;
}

}  // namespace mpb
