// `runner selftest` must fail when an op computes wrongly: a CPU device with
// one planted bug (an op's output perturbed by 1%, as an off-by-one scale or a
// lost term would) fails the op's cases, and a bug in a gradient op fails the
// training steps that use it, naming the tensor. The clean CPU passes (the
// e2e test tests/e2e/test_selftest.py runs the whole command).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backends/cpu/cpu_device.h"
#include "core/forwarding_device.h"
#include "runner/commands/selftest.h"

namespace mpb {
namespace {

// Multiplies element 0 of an fp32 output by 1.01 (a 1% error; every bound of
// the fp32 cases is far tighter). 16-bit outputs are left alone.
void plant(const Tensor& t) {
  if (t.dtype == DType::F32 && t.numel() > 0) static_cast<float*>(t.data)[0] *= 1.01f;
}

// The CPU device with one op wrapped (core/forwarding_device.h).
class GeluBug : public ForwardingDevice {
 public:
  GeluBug() : ForwardingDevice(make_cpu_device()) {}

 protected:
  void activation_forward_impl(Activation act, const Tensor& out, const Tensor& in) override {
    ForwardingDevice::activation_forward_impl(act, out, in);
    if (act == Activation::Gelu) plant(out);
  }
};

class BiasGradBug : public ForwardingDevice {
 public:
  BiasGradBug() : ForwardingDevice(make_cpu_device()) {}

 protected:
  void bias_grad_impl(const Tensor& db, const Tensor& dy, GradMode mode) override {
    ForwardingDevice::bias_grad_impl(db, dy, mode);
    plant(db);
  }
};

const opcheck::OpResult* first_failed(const SelftestReport& r) {
  for (const opcheck::OpResult& o : r.ops)
    if (o.status == opcheck::Status::Fail) return &o;
  return nullptr;
}

TEST(Selftest, APlantedBugInOneOpFailsItsCases) {
  GeluBug dev;
  const std::unique_ptr<Device> clean_device = make_cpu_device();
  Device& clean = *clean_device;
  const SelftestReport r = run_selftest_checks(dev, clean, /*quick=*/true);
  const opcheck::OpResult* failed = first_failed(r);
  ASSERT_NE(failed, nullptr) << "no op case failed with a planted GELU bug";
  EXPECT_EQ(failed->op, "activation_forward");
  for (const opcheck::OpResult& o : r.ops) {
    if (o.status == opcheck::Status::Fail) {
      EXPECT_TRUE(o.op == "activation_forward" || o.op.rfind("gemm", 0) == 0) << o.op << " failed too";
    }
  }
  EXPECT_GT(r.failed(), 0);
  EXPECT_NE(selftest_table(r, false).find("FAIL"), std::string::npos);
  EXPECT_EQ(selftest_json(r)["exit_code"], 1);
}

TEST(Selftest, APlantedBugInAGradientFailsTheTrainingStep) {
  BiasGradBug dev;
  const std::unique_ptr<Device> clean_device = make_cpu_device();
  Device& clean = *clean_device;
  const SelftestReport r = run_selftest_checks(dev, clean, /*quick=*/true);
  bool step_failed = false;
  for (const selftest::TrainingCheck& t : r.training) {
    if (t.name != "step mlp fp32 unfused") continue;
    step_failed = t.status == opcheck::Status::Fail;
    ASSERT_FALSE(t.failures.empty());
    EXPECT_NE(t.failures.front().find("bias"), std::string::npos) << t.failures.front();
  }
  EXPECT_TRUE(step_failed) << "a 1% error in every bias gradient passed the fp32 training step";
}

TEST(Selftest, TheCleanCpuPassesQuick) {
  const std::unique_ptr<Device> device = make_cpu_device();
  Device& dev = *device;
  const SelftestReport r = run_selftest_checks(dev, dev, /*quick=*/true);
  EXPECT_EQ(r.failed(), 0) << selftest_table(r, false);
  EXPECT_GT(r.ops.size(), 100u);
  ASSERT_FALSE(r.training.empty());
  EXPECT_EQ(r.training.front().name, "loss scaler skip path (inf injected)");
  EXPECT_TRUE(r.facts["tf32_rounding"].is_string());
  const nlohmann::json j = selftest_json(r);
  EXPECT_EQ(j["schema"], "mpbench.selftest/1");
  EXPECT_EQ(j["exit_code"], 0);
}

// The bound is per precision and grows with the depth of the step.
TEST(Selftest, StepBoundIsPerPrecision) {
  const double fp32 = selftest::step_error_bound("fp32", 8, 256);
  const double tf32 = selftest::step_error_bound("tf32", 8, 256);
  const double bf16 = selftest::step_error_bound("amp_bf16", 8, 256);
  EXPECT_LT(fp32, 1e-4);
  EXPECT_EQ(tf32, selftest::step_error_bound("amp_fp16", 8, 256));
  EXPECT_NEAR(bf16 / tf32, 8.0, 0.1);  // u_bf16 / u_fp16 = 2^3, up to the fp32 accumulation term
  EXPECT_LT(bf16, 0.1);                 // a 10% error is a bug even in bf16
  EXPECT_GT(selftest::step_error_bound("amp_bf16", 42, 512), bf16);
}

}  // namespace
}  // namespace mpb
