// The GPU cost model (runner/measure/cost_estimate.h, kGpuStepModel) against what it was
// fitted to: the nine gpu_smoke cells an H200 ran on 2026-11-27 (results/gpu/, committed).
// experiments/gpu_smoke.yaml loaded through the real loader gives each cell's config; the
// committed cell JSON gives its measured median step. Issue 44's target: every cell's
// estimate within 25% of its measurement (the GEMM-only estimate it replaces was 2-3.5x
// optimistic for the 16-bit and TF32 cells).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/experiment/config.h"
#include "runner/measure/cost_estimate.h"

namespace mpb {
namespace {

const char* const kSmokeCells = "/results/gpu/20261127-0735-smoke-h200/smoke/results/gpu_smoke/cells";

std::map<std::string, double> measured_step_ms() {
  std::map<std::string, double> out;
  for (const auto& f : std::filesystem::directory_iterator(std::string(MPB_SOURCE_DIR) + kSmokeCells)) {
    std::ifstream in(f.path());
    const nlohmann::json cell = nlohmann::json::parse(in);
    out[cell.at("cell_id").get<std::string>()] = cell.at("summary").at("step_time_ms").at("median").get<double>();
  }
  return out;
}

TEST(CostModelH200, EveryGpuSmokeCellWithinAQuarterOfItsMeasuredStep) {
  const std::map<std::string, double> measured = measured_step_ms();
  ASSERT_EQ(measured.size(), 9u) << "the committed H200 smoke run has 9 cells";
  std::string error;
  const auto basis = assumed_gpu_basis("h200", &error);
  ASSERT_TRUE(basis) << error;
  const ExperimentConfig e = load_experiment(std::string(MPB_SOURCE_DIR) + "/experiments/gpu_smoke.yaml");
  int compared = 0;
  double worst = 0;
  for (const Cell& c : e.cells) {
    const auto it = measured.find(c.id);
    if (it == measured.end()) continue;  // a cell added since the lease (batch 256)
    const CellCost cost = estimate_cell_cost(c.config, *basis);
    ASSERT_TRUE(cost.step_seconds) << c.id << ": " << cost.why_none;
    const double ratio = *cost.step_seconds * 1e3 / it->second;
    worst = std::max(worst, std::abs(std::log(ratio)));
    EXPECT_LT(std::abs(ratio - 1.0), 0.25) << c.id << ": estimated " << *cost.step_seconds * 1e3 << " ms, measured "
                                           << it->second << " ms";
    EXPECT_GT(cost.memory_bytes_per_step, 0.0) << c.id;
    ++compared;
  }
  EXPECT_EQ(compared, 9) << "every committed cell is still a cell of gpu_smoke.yaml";
  RecordProperty("worst_log_ratio", std::to_string(worst));
}

TEST(CostModelH200, TheGemmOnlyEstimateWasTheOptimisticOne) {
  // What the fit fixed, kept as a check that the memory term is doing the work: the
  // GEMMs alone at their assumed share come to well under the measured bf16 step.
  std::string error;
  const auto basis = assumed_gpu_basis("h200", &error);
  const ExperimentConfig e = load_experiment(std::string(MPB_SOURCE_DIR) + "/experiments/gpu_smoke.yaml");
  for (const Cell& c : e.cells) {
    if (c.id != "precision=amp_bf16,fusion=on,loss_scale=none") continue;
    const CellCost cost = estimate_cell_cost(c.config, *basis);
    const double gemm_ms = cost.flops_per_step / (*cost.rate_tflops * 1e12) * 1e3;
    EXPECT_LT(gemm_ms, 0.5 * measured_step_ms().at(c.id));  // 3.5 of 11.0 ms
    return;
  }
  FAIL() << "no amp_bf16 fused cell in gpu_smoke.yaml";
}

}  // namespace
}  // namespace mpb
