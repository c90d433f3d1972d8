#include "runner/measure/utilization.h"

#include <cstdio>

#include "runner/measure/device_peaks.h"

namespace mpb {

namespace {
nlohmann::json ratio_or_null(double num, double den) {
  return den > 0.0 && num >= 0.0 ? nlohmann::json(num / den) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json utilization_json(const UtilizationInputs& in) {
  const double hardware = in.model_flops_per_step + in.recompute_flops_per_step;
  const double step_s = in.median_step_ms / 1000.0;
  const double model_flops_s = step_s > 0.0 ? in.model_flops_per_step / step_s : 0.0;
  const double hardware_flops_s = step_s > 0.0 ? hardware / step_s : 0.0;
  const std::string mode = gemm_compute_name(in.gemm);
  nlohmann::json j;
  j["model_flops_per_step"] = in.model_flops_per_step;
  j["hardware_flops_per_step"] = hardware;
  j["ceiling_fraction_model"] = ratio_or_null(model_flops_s, in.ceiling_gflops * 1e9);
  j["ceiling_fraction_hardware"] = ratio_or_null(hardware_flops_s, in.ceiling_gflops * 1e9);
  j["peak_tflops"] = nullptr;
  j["peak_source"] = nullptr;
  j["mfu"] = nullptr;
  j["hfu"] = nullptr;
  j["tensor_peak_tflops"] = nullptr;
  j["tensor_peak_mode"] = nullptr;
  j["mfu_tensor_peak"] = nullptr;
  j["why"] = nullptr;
  j["warning"] = nullptr;

  std::optional<DevicePeaks> peaks;
  if (in.device && in.device->kind == DeviceKind::Cuda) peaks = known_gpu_peaks(in.device->name);
  // 0: no peak for this mode (a plain double: GCC 12 misreads an optional here as maybe-uninitialized)
  const double peak = peaks ? peaks->tflops(in.gemm).value_or(0.0) : 0.0;
  j["formula"] = "MFU = model FLOPs per step (GEMMs: forward 2mnk, backward 4mnk) / median step time / dense " +
                 mode + " peak; HFU adds the forward GEMMs checkpointing recomputes; mfu_tensor_peak divides by "
                 "the dense 16-bit tensor-core peak (bf16, else fp16) whatever the cell's mode, so it compares "
                 "across precisions";
  if (!in.device || in.device->kind != DeviceKind::Cuda) {
    j["why"] = "no dense peak table for CPUs: see ceiling_fraction_* (the measured " + mode + " GEMM ceiling)";
    return j;
  }
  if (!peaks) {
    j["why"] = "'" + in.device->name + "' is not in the table of known GPUs (runner/measure/device_peaks.cpp): see "
               "ceiling_fraction_* (the measured GEMM ceiling)";
    return j;
  }
  // One yardstick for every cell: the chip's 16-bit dense tensor-core peak. An fp32 cell's
  // MFU against its own (CUDA-core) peak reads 0.52 where bf16's reads 0.20, backwards to
  // anyone asking which ran closer to what the chip can do (issue 44).
  const std::optional<double> tensor = peaks->bf16 ? peaks->bf16 : peaks->fp16;
  if (tensor && *tensor > 0.0) {
    j["tensor_peak_tflops"] = *tensor;
    j["tensor_peak_mode"] = peaks->bf16 ? "bf16" : "fp16";
    j["mfu_tensor_peak"] = model_flops_s / (*tensor * 1e12);
  }
  if (peak <= 0.0) {
    j["why"] = peaks->model + " has no dense " + mode + " tensor-core peak";
    return j;
  }
  j["peak_tflops"] = peak;
  j["peak_source"] = peaks->model + ": " + peaks->source;
  j["mfu"] = model_flops_s / (peak * 1e12);
  j["hfu"] = hardware_flops_s / (peak * 1e12);
  // Faster than fp32 can go: the GEMMs are not running in fp32. The usual
  // cause is a process-wide override (NVIDIA_TF32_OVERRIDE=1, or a library
  // default) that turns fp32 GEMMs into TF32 without a word (transformers#16588).
  const double fp32_peak_flops_s = peak * 1e12;
  if (in.gemm == GemmCompute::F32 &&
      (hardware_flops_s > 1.05 * fp32_peak_flops_s || in.ceiling_gflops * 1e9 > 1.05 * fp32_peak_flops_s)) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "an fp32 cell ran at %.1f TFLOP/s (ceiling %.1f) on %s, whose fp32 peak is %.1f: its GEMMs are "
                  "not fp32 (TF32 through NVIDIA_TF32_OVERRIDE or a library default?)",
                  hardware_flops_s / 1e12, in.ceiling_gflops / 1e3, peaks->model.c_str(), peak);
    j["warning"] = buf;
  }
  return j;
}

}  // namespace mpb
