#include "runner/measure/cost_estimate.h"

#include <cmath>
#include <cstdio>

#include "config/schema.h"
#include "train/cell_factory.h"
#include "train/cell_limits.h"

namespace mpb {

CellCost estimate_cell_cost(const CellConfig& cfg, const CostBasis& basis) {
  CellCost c;
  c.flops_per_step = cell_step_flops(cfg).hardware();
  const GemmCompute mode = cfg.policy.gemm;
  std::optional<double> peak_tflops;
  if (basis.peaks) {
    peak_tflops = basis.peaks->tflops(mode);
    if (!peak_tflops) c.why_none = basis.device + " has no " + gemm_compute_name(mode) + " tensor-core peak";
  } else if (const auto it = basis.ceiling.find(mode); it != basis.ceiling.end() && it->second > 0) {
    peak_tflops = it->second / 1000.0;
  } else {
    c.why_none = basis.why_none.empty() ? "no " + std::string(gemm_compute_name(mode)) + " ceiling was measured"
                                        : basis.why_none;
  }
  if (!peak_tflops) return c;
  const GpuStepModel& g = kGpuStepModel;
  c.gemm_share = !basis.peaks                 ? kAssumedMfu
                 : mode == GemmCompute::F32  ? g.gemm_share_fp32
                 : mode == GemmCompute::TF32 ? g.gemm_share_tf32
                                             : g.gemm_share_16bit;
  c.rate_tflops = c.gemm_share * *peak_tflops;
  double step = c.flops_per_step / (*c.rate_tflops * 1e12);
  if (basis.peaks && basis.peaks->bandwidth_tbs > 0) {
    const MemoryEstimate m = estimate_cell_memory(cfg, true);
    const double activation_elements = m[MemCategory::Activations] / dtype_bytes(cfg.policy.compute);
    c.memory_bytes_per_step =
        activation_elements * (cfg.fused ? g.bytes_per_activation_fused : g.bytes_per_activation_unfused) +
        m.param_count * g.optimizer_bytes_per_param;
    step += c.memory_bytes_per_step / (basis.peaks->bandwidth_tbs * 1e12);
  }
  c.step_seconds = step;
  c.seconds = step * double(cfg.steps) * double(cfg.repeats);
  return c;
}

std::string cost_assumption(const CostBasis& basis) {
  const std::string mfu = std::to_string(int(std::lround(kAssumedMfu * 100))) + "%";
  if (basis.peaks)
    return "GEMMs at 65% (16-bit), 40% (tf32) or 65% (fp32) of the dense peak of each cell's mode, plus the "
           "memory-bound rest at the memory bandwidth (the H200-fitted step model), on " + basis.peaks->model +
           " (" + basis.source + "; " + basis.peaks->source + ")";
  if (!basis.ceiling.empty())
    return "its GEMM FLOPs at " + mfu + " of the GEMM ceiling of each cell's mode, measured at start on " +
           basis.device;
  return "no estimate: " + basis.why_none;
}

nlohmann::json cell_cost_json(const CellConfig& cfg, const CellCost& cost, const CostBasis& basis) {
  nlohmann::json j;
  j["seconds"] = cost.seconds ? nlohmann::json(*cost.seconds) : nlohmann::json(nullptr);
  j["flops_per_step"] = cost.flops_per_step;
  j["steps"] = cfg.steps;
  j["repeats"] = cfg.repeats;
  j["assumed_mfu"] = cost.rate_tflops ? cost.gemm_share : kAssumedMfu;  // the GEMMs' assumed share of the peak
  j["rate_tflops"] = cost.rate_tflops ? nlohmann::json(*cost.rate_tflops) : nlohmann::json(nullptr);
  j["step_seconds"] = cost.step_seconds ? nlohmann::json(*cost.step_seconds) : nlohmann::json(nullptr);
  j["memory_bytes_per_step"] = cost.memory_bytes_per_step;  // the GPU model's memory-bound rest; 0 on the CPU
  j["bandwidth_tbs"] = basis.peaks && basis.peaks->bandwidth_tbs > 0 ? nlohmann::json(basis.peaks->bandwidth_tbs)
                                                                    : nlohmann::json(nullptr);
  j["basis"] = basis.peaks ? "gpu_peak" : basis.ceiling.empty() ? "none" : "measured_ceiling";
  j["device"] = basis.peaks ? basis.peaks->model : basis.device;
  j["source"] = basis.peaks ? basis.source + "; " + basis.peaks->source : basis.source;
  j["why"] = cost.seconds ? nlohmann::json(nullptr) : nlohmann::json(cost.why_none);
  return j;
}

std::string format_hours_minutes(std::optional<double> seconds) {
  if (!seconds) return "-";
  if (*seconds < 30) return "<0:01";
  const long long minutes = std::llround(*seconds / 60.0);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld", minutes / 60, minutes % 60);
  return buf;
}

CostBasis device_cost_basis(const DeviceInfo& info, const std::map<GemmCompute, double>& ceilings) {
  CostBasis b;
  b.device = info.name;
  if (info.kind == DeviceKind::Cuda) b.peaks = known_gpu_peaks(info.name);
  if (b.peaks) {
    b.source = "this device";
  } else if (!ceilings.empty()) {
    b.ceiling = ceilings;
    b.source = "GEMM ceiling measured at start";
  } else {
    b.why_none = "no dense peaks are known for '" + info.name + "' and no GEMM ceiling was measured; --assume-gpu "
                 "NAME estimates for one of: " + schema::join(known_gpu_names(), ", ");
  }
  return b;
}

std::optional<CostBasis> assumed_gpu_basis(const std::string& name, std::string* error) {
  const std::optional<DevicePeaks> peaks = gpu_peaks_by_name(name);
  if (!peaks) {
    if (error)
      *error = "--assume-gpu: unknown GPU '" + name + "'; known: " + schema::join(known_gpu_names(), ", ");
    return std::nullopt;
  }
  CostBasis b;
  b.device = peaks->model;
  b.peaks = peaks;
  b.source = "--assume-gpu " + name;
  return b;
}

}  // namespace mpb
