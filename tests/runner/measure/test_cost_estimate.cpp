// runner --dry-run's time estimate (runner/measure/cost_estimate.h): FLOPs from the
// configuration alone equal what the built models count; the arithmetic and
// the assumption; --assume-gpu's names; h:mm.
#include <gtest/gtest.h>

#include "backends/cpu/cpu_device.h"
#include "runner/experiment/config.h"
#include "runner/measure/cost_estimate.h"
#include "tests/runner/config_test_helpers.h"
#include "train/cell_factory.h"

namespace mpb {
namespace {

// A small BERT cell, as an experiment file gives it (the loader's defaults).
CellConfig bert_cell(CheckpointPolicy ckpt) {
  const std::string yaml = std::string("name: c\nbatch_size: 4\ncheckpointing: ") + checkpoint_policy_name(ckpt) +
                           "\nmodel: {kind: bert, layers: 3, seq_len: 16}\ndata: {kind: markov, vocab: 300}\n";
  return config_test::load(yaml).cells.at(0).config;
}

TEST(CostEstimate, StepFlopsFromTheConfigEqualTheBuiltModels) {
  auto dev = make_cpu_device();
  for (const CheckpointPolicy p : {CheckpointPolicy::Off, CheckpointPolicy::EveryLayer, CheckpointPolicy::Sqrt}) {
    const CellConfig c = bert_cell(p);
    const auto model = build_model(*dev, c, 1);
    const StepFlops f = cell_step_flops(c);
    EXPECT_DOUBLE_EQ(f.model, model->train_flops_per_sample() * c.batch_size) << checkpoint_policy_name(p);
    EXPECT_DOUBLE_EQ(f.recomputed, model->recompute_flops_per_sample() * c.batch_size) << checkpoint_policy_name(p);
  }
  CellConfig mlp;
  mlp.model.width = 96;
  mlp.batch_size = 8;
  EXPECT_DOUBLE_EQ(cell_step_flops(mlp).model, build_model(*dev, mlp, 1)->train_flops_per_sample() * 8);
  EXPECT_EQ(cell_step_flops(mlp).recomputed, 0.0);
}

TEST(CostEstimate, FlopsTimesStepsAndRepeatsOverTheAssumedShareOfThePeak) {
  std::string error;
  const auto basis = assumed_gpu_basis("rtx3090", &error);
  ASSERT_TRUE(basis) << error;
  CellConfig c = bert_cell(CheckpointPolicy::EveryLayer);
  set_precision(c, "amp_fp16");
  c.steps = 200;
  c.repeats = 3;
  const CellCost cost = estimate_cell_cost(c, *basis);
  ASSERT_TRUE(cost.seconds);
  EXPECT_DOUBLE_EQ(cost.flops_per_step, cell_step_flops(c).hardware());  // checkpointing's recompute is work too
  // The GPU step model: the GEMMs at 65% of the 3090's dense fp16 peak, plus the memory-bound
  // rest at its 936 GB/s.
  EXPECT_DOUBLE_EQ(*cost.rate_tflops, kGpuStepModel.gemm_share_16bit * 71.0);
  EXPECT_GT(cost.memory_bytes_per_step, 0.0);
  const double step = cost.flops_per_step / (*cost.rate_tflops * 1e12) + cost.memory_bytes_per_step / 0.936e12;
  EXPECT_NEAR(*cost.step_seconds, step, 1e-12 * step);
  EXPECT_NEAR(*cost.seconds, step * 600, 1e-12 * *cost.seconds);
  EXPECT_NE(cost_assumption(*basis).find("GEMMs at 65% (16-bit)"), std::string::npos);
  const nlohmann::json j = cell_cost_json(c, cost, *basis);
  EXPECT_EQ(j["basis"], "gpu_peak");
  EXPECT_EQ(j["device"], "GeForce RTX 3090");
  EXPECT_DOUBLE_EQ(j["assumed_mfu"].get<double>(), 0.65);
  EXPECT_DOUBLE_EQ(j["bandwidth_tbs"].get<double>(), 0.936);
  EXPECT_TRUE(j["why"].is_null());

  // A mode the GPU has no tensor-core peak for: no estimate, and why.
  const auto v100 = assumed_gpu_basis("v100", &error);
  set_precision(c, "tf32");
  const CellCost none = estimate_cell_cost(c, *v100);
  EXPECT_FALSE(none.seconds);
  EXPECT_NE(none.why_none.find("no tf32 tensor-core peak"), std::string::npos);
}

TEST(CostEstimate, TheCpuUsesTheMeasuredCeiling) {
  DeviceInfo cpu;
  cpu.kind = DeviceKind::Cpu;
  cpu.name = "AMD EPYC";
  CostBasis b = device_cost_basis(cpu, {{GemmCompute::F32, 500.0}});
  EXPECT_FALSE(b.peaks);
  CellConfig c;  // fp32 MLP
  const CellCost cost = estimate_cell_cost(c, b);
  ASSERT_TRUE(cost.seconds);
  EXPECT_DOUBLE_EQ(*cost.rate_tflops, 0.4 * 0.5);
  set_precision(c, "amp_bf16");  // a mode whose ceiling was not measured
  EXPECT_FALSE(estimate_cell_cost(c, b).seconds);
  // No ceiling and no known GPU: none, and the reason names --assume-gpu.
  DeviceInfo gpu;
  gpu.kind = DeviceKind::Cuda;
  gpu.name = "NVIDIA Imaginary 9000";
  b = device_cost_basis(gpu, {});
  EXPECT_NE(b.why_none.find("--assume-gpu"), std::string::npos);
  gpu.name = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(device_cost_basis(gpu, {}).peaks->model, "H100 SXM");
}

TEST(CostEstimate, AssumeGpuNamesAndErrors) {
  std::string error;
  for (const char* name : {"rtx3090", "RTX 3090", "rtx_3090", "RTX-3090"})
    EXPECT_EQ(assumed_gpu_basis(name, &error)->device, "GeForce RTX 3090") << name;
  for (const auto& [name, model] : std::vector<std::pair<std::string, std::string>>{
           {"a100", "A100"}, {"h100", "H100 SXM"}, {"l4", "L4"}, {"rtx4090", "GeForce RTX 4090"}})
    EXPECT_EQ(assumed_gpu_basis(name, &error)->device, model) << name;
  EXPECT_FALSE(assumed_gpu_basis("rtx9090", &error));
  EXPECT_EQ(error, "--assume-gpu: unknown GPU 'rtx9090'; known: h100-pcie, h100, h200, a100, a10, rtx3090, l40s, "
                   "l4, rtx4090, v100, t4");
}

TEST(CostEstimate, HoursAndMinutes) {
  EXPECT_EQ(format_hours_minutes(std::nullopt), "-");
  EXPECT_EQ(format_hours_minutes(29.0), "<0:01");
  EXPECT_EQ(format_hours_minutes(31.0), "0:01");
  EXPECT_EQ(format_hours_minutes(3719.0), "1:02");  // 61.98 minutes
  EXPECT_EQ(format_hours_minutes(36000.0), "10:00");
}

}  // namespace
}  // namespace mpb
