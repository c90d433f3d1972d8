// MFU / HFU (runner/measure/utilization.h) and the table of GPU peaks behind them
// (runner/measure/device_peaks.h): the names cudaGetDeviceProperties reports map to
// the right row, unknown GPUs and CPUs get null with a reason, and an fp32
// cell faster than the fp32 peak is flagged as hidden TF32.
#include <gtest/gtest.h>

#include "runner/measure/device_peaks.h"
#include "runner/measure/utilization.h"

namespace mpb {
namespace {

TEST(DevicePeaks, NamesMapToTheirRow) {
  const std::pair<const char*, const char*> names[] = {
      {"NVIDIA H100 80GB HBM3", "H100 SXM"}, {"NVIDIA H100 PCIe", "H100 PCIe"},
      {"NVIDIA H200", "H200 SXM"},           {"NVIDIA A100-SXM4-80GB", "A100"},
      {"NVIDIA A100 80GB PCIe", "A100"},     {"NVIDIA A10", "A10"},
      {"NVIDIA L4", "L4"},                   {"NVIDIA L40S", "L40S"},
      {"NVIDIA GeForce RTX 3090", "GeForce RTX 3090"}, {"NVIDIA GeForce RTX 4090", "GeForce RTX 4090"},
      {"Tesla V100-SXM2-16GB", "V100"},      {"Tesla T4", "T4"}};
  for (const auto& [name, row] : names) {
    const auto p = known_gpu_peaks(name);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ(p->model, row) << name;
  }
  for (const char* unknown : {"NVIDIA A10G", "NVIDIA H100 NVL", "NVIDIA GeForce RTX 3090 Ti", "NVIDIA L40", "AMD EPYC"})
    EXPECT_FALSE(known_gpu_peaks(unknown)) << unknown << " is not in the table: no guessed peak";
  const auto h100 = known_gpu_peaks("NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(*h100->tflops(GemmCompute::BF16), 989.4) << "dense, not the 1979 sparse figure";
  EXPECT_FALSE(known_gpu_peaks("Tesla T4")->tflops(GemmCompute::BF16)) << "no bf16 tensor cores on Turing";
}

DeviceInfo device(DeviceKind kind, const char* name) {
  DeviceInfo d;
  d.kind = kind;
  d.name = name;
  return d;
}

UtilizationInputs inputs(const DeviceInfo& dev, GemmCompute gemm, double step_ms) {
  UtilizationInputs in;
  in.device = &dev;
  in.gemm = gemm;
  in.model_flops_per_step = 3e12;
  in.recompute_flops_per_step = 1e12;
  in.median_step_ms = step_ms;
  in.ceiling_gflops = 600e3;
  return in;
}

TEST(Utilization, MfuAndHfuAgainstTheDensePeak) {
  const DeviceInfo dev = device(DeviceKind::Cuda, "NVIDIA H100 80GB HBM3");
  const auto j = utilization_json(inputs(dev, GemmCompute::BF16, 10.0));  // 300 TFLOP/s model, 400 hardware
  EXPECT_NEAR(j["mfu"].get<double>(), 300.0 / 989.4, 1e-12);
  EXPECT_NEAR(j["hfu"].get<double>(), 400.0 / 989.4, 1e-12);
  EXPECT_NEAR(j["ceiling_fraction_model"].get<double>(), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(j["hardware_flops_per_step"].get<double>(), 4e12);
  EXPECT_TRUE(j["why"].is_null());
  EXPECT_TRUE(j["warning"].is_null());
  EXPECT_NE(j["peak_source"].get<std::string>().find("H100 SXM"), std::string::npos);
}

TEST(Utilization, OneTensorCoreYardstickForEveryPrecision) {
  // fp32 against its CUDA-core peak looks better than bf16 against its tensor-core peak;
  // mfu_tensor_peak puts both on the bf16 dense peak (issue 44).
  const DeviceInfo dev = device(DeviceKind::Cuda, "NVIDIA H200");
  const auto fp32 = utilization_json(inputs(dev, GemmCompute::F32, 100.0));  // 30 TFLOP/s
  const auto bf16 = utilization_json(inputs(dev, GemmCompute::BF16, 15.0));  // 200 TFLOP/s
  EXPECT_GT(fp32["mfu"].get<double>(), bf16["mfu"].get<double>());           // the backwards column
  EXPECT_NEAR(fp32["mfu_tensor_peak"].get<double>(), 30.0 / 989.4, 1e-12);
  EXPECT_NEAR(bf16["mfu_tensor_peak"].get<double>(), 200.0 / 989.4, 1e-12);
  EXPECT_EQ(fp32["tensor_peak_mode"], "bf16");
  EXPECT_DOUBLE_EQ(fp32["tensor_peak_tflops"].get<double>(), 989.4);
  // No bf16 on a V100: its fp16 tensor-core peak, said
  const auto v100 = utilization_json(inputs(device(DeviceKind::Cuda, "Tesla V100-SXM2-16GB"), GemmCompute::F32, 300.0));
  EXPECT_EQ(v100["tensor_peak_mode"], "fp16");
  EXPECT_NEAR(v100["mfu_tensor_peak"].get<double>(), 10.0 / 125.0, 1e-12);
  const auto cpu = utilization_json(inputs(device(DeviceKind::Cpu, "AMD EPYC"), GemmCompute::F32, 10.0));
  EXPECT_TRUE(cpu["mfu_tensor_peak"].is_null());
}

TEST(Utilization, NullWithAReasonOnACpuOrAnUnknownGpu) {
  const DeviceInfo cpu = device(DeviceKind::Cpu, "AMD EPYC");
  auto j = utilization_json(inputs(cpu, GemmCompute::F32, 10.0));
  EXPECT_TRUE(j["mfu"].is_null());
  EXPECT_NE(j["why"].get<std::string>().find("CPUs"), std::string::npos);
  EXPECT_TRUE(j["ceiling_fraction_hardware"].is_number()) << "the measured ceiling stands in";
  const DeviceInfo gpu = device(DeviceKind::Cuda, "NVIDIA Future GPU");
  j = utilization_json(inputs(gpu, GemmCompute::BF16, 10.0));
  EXPECT_TRUE(j["hfu"].is_null());
  EXPECT_NE(j["why"].get<std::string>().find("not in the table"), std::string::npos);
}

TEST(Utilization, AnFp32CellFasterThanTheFp32PeakIsFlaggedAsHiddenTf32) {
  const DeviceInfo dev = device(DeviceKind::Cuda, "NVIDIA A100-SXM4-80GB");
  auto in = inputs(dev, GemmCompute::F32, 100.0);  // 40 TFLOP/s hardware > 19.5 fp32 peak
  in.ceiling_gflops = 15e3;
  auto j = utilization_json(in);
  ASSERT_TRUE(j["warning"].is_string());
  EXPECT_NE(j["warning"].get<std::string>().find("NVIDIA_TF32_OVERRIDE"), std::string::npos);
  in.median_step_ms = 400.0;  // 10 TFLOP/s: possible in fp32
  EXPECT_TRUE(utilization_json(in)["warning"].is_null());
  in.ceiling_gflops = 150e3;  // but a ceiling at TF32 speed is not
  EXPECT_TRUE(utilization_json(in)["warning"].is_string());
}

}  // namespace
}  // namespace mpb
