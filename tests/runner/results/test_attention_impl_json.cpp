// Which implementation ran a cell's fused attention (issue 10): the device
// counts every attention_forward/backward call by implementation
// (DeviceCounters::attention_impls: cudnn_sdpa, cuda_kernel, cpu_kernel),
// train() copies the counts into the RunRecord, and the cell JSON carries
// attention_impl_calls and attention_impl (runner/measure/step_counters.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "runner/measure/step_counters.h"
#include "runner/results/terminal_table.h"

namespace mpb {
namespace {

TEST(AttentionImplJson, RepeatAndSummaryFields) {
  RunRecord r;
  r.host_syncs = {1, 1}, r.allocs = {0, 0}, r.plans_created = {0, 0}, r.probed = {0, 0};
  r.attention_impls = {{"cudnn_sdpa", 48}};
  nlohmann::json a;
  add_step_counters(a, r, 1);
  EXPECT_EQ(a.at("attention_impl"), "cudnn_sdpa");
  EXPECT_EQ(a.at("attention_impl_calls").at("cudnn_sdpa"), 48);

  r.attention_impls = {{"cudnn_sdpa", 40}, {"cuda_kernel", 8}};
  nlohmann::json b;
  add_step_counters(b, r, 1);
  EXPECT_EQ(b.at("attention_impl"), "cuda_kernel+cudnn_sdpa");  // names in order, joined

  r.attention_impls.clear();  // the MLP, or fusion off: no fused attention
  nlohmann::json c;
  add_step_counters(c, r, 1);
  EXPECT_TRUE(c.at("attention_impl").is_null());
  EXPECT_TRUE(c.at("attention_impl_calls").empty());

  nlohmann::json old_repeat = {{"host_syncs_per_step", 1}, {"allocs_in_timed_steps", 0},
                               {"plans_created_in_timed_steps", 0}, {"gemm_fallbacks", nlohmann::json::object()}};
  nlohmann::json s;
  add_step_counter_summary(s, {a, b, c, old_repeat});
  EXPECT_EQ(s.at("attention_impl_calls").at("cudnn_sdpa"), 88);
  EXPECT_EQ(s.at("attention_impl_calls").at("cuda_kernel"), 8);
  EXPECT_EQ(s.at("attention_impl"), "cuda_kernel+cudnn_sdpa");
}

// The runner's note under the table names every cell whose fused attention
// ran the hand-written CUDA kernel, whatever the label says about why
// (cuda_kernel; cuda_kernel_cudnn_unavailable / _plan_failed, issue 30:
// backends/cuda/sdpa_policy.h), and stays quiet for cuDNN in either bias form.
TEST(AttentionImplJson, TheRunnerNotesEveryKernelLabel) {
  auto cell = [](const std::string& id, const nlohmann::json& calls) {
    nlohmann::json s = {{"speedup", nullptr}, {"ceiling_fraction", nullptr}, {"final_loss", 2.0}, {"eval_loss", 2.0},
                        {"samples_per_s", 100.0}, {"step_time_ms", {{"median", 10.0}}},
                        {"peak_memory_bytes", {{"total", 1e6}}}, {"attention_impl_calls", calls}};
    return nlohmann::json{{"cell_id", id}, {"summary", s}};
  };
  testing::internal::CaptureStdout();
  print_table({cell("no_handle", {{"cuda_kernel_cudnn_unavailable", 6}}), cell("plan", {{"cuda_kernel_cudnn_plan_failed", 4}, {"cudnn_sdpa", 2}}),
               cell("refused", {{"cuda_kernel", 3}}), cell("per_query", {{"cudnn_sdpa_bias_per_query", 8}})});
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("note: no_handle: fused attention ran the hand-written CUDA kernel for 6 call(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("note: plan: fused attention ran the hand-written CUDA kernel for 4 call(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("note: refused: fused attention ran the hand-written CUDA kernel for 3 call(s)"), std::string::npos) << out;
  EXPECT_EQ(out.find("note: per_query"), std::string::npos) << out;
}

// The CPU backend names no library: each call counts as its own kernel.
TEST(AttentionImplJson, CpuDeviceCountsCpuKernel) {
  std::unique_ptr<Device> dev = make_cpu_device();
  const Shape s{1, 2, 4, 8};
  DeviceBuffer q = dev->alloc(s, DType::F32, MemCategory::Activations);
  DeviceBuffer o = dev->alloc(s, DType::F32, MemCategory::Activations), g = dev->alloc(s, DType::F32, MemCategory::Activations);
  DeviceBuffer dq = dev->alloc(s, DType::F32, MemCategory::Activations), dk = dev->alloc(s, DType::F32, MemCategory::Activations);
  DeviceBuffer dv = dev->alloc(s, DType::F32, MemCategory::Activations);
  DeviceBuffer lse = dev->alloc(Shape{1, 2, 4}, DType::F32, MemCategory::Activations);
  DeviceBuffer kv = dev->alloc(Shape{1, 4}, DType::I32, MemCategory::Activations);
  const std::vector<int32_t> ones = {1, 0, 1, 1};
  dev->upload(kv, ones.data());
  dev->fill(q, 0.25f);
  dev->fill(g, 1.0f);
  dev->attention_forward(o, lse, q, q, q, kv, 0.5f, -1e9f);
  dev->attention_backward(dq, dk, dv, g, o, lse, q, q, q, kv, 0.5f, -1e9f);
  const auto& m = dev->counters().attention_impls;
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m.at("cpu_kernel"), 2);
}

}  // namespace
}  // namespace mpb
