// models/param_store.h: the parameter table's layout, the buffers each
// precision policy keeps and their dtypes (docs/ARCHITECTURE.md, "Precision
// policies"), the initial upload, and load_compute_weights refreshing the
// copies from updated weights.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cpu/cpu_device.h"
#include "core/numerics.h"
#include "models/param_store.h"

namespace mpb {
namespace {

// Values of a downloaded tensor of any float dtype, as float.
std::vector<float> values(Device& dev, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F32) {
    dev.download(out.data(), t);
    return out;
  }
  std::vector<uint16_t> bits(out.size());
  dev.download(bits.data(), t);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = t.dtype == DType::F16 ? half_bits_to_float(bits[i]) : bf16_bits_to_float(bits[i]);
  return out;
}

float round_to(DType t, float v) {
  if (t == DType::F16) return round_to_half(v);
  if (t == DType::BF16) return round_to_bf16(v);
  return v;
}

// Not representable in fp16 or bf16, so every copy shows its own rounding.
std::vector<float> host_weights(int64_t n, float base) {
  std::vector<float> h(static_cast<size_t>(n));
  for (size_t i = 0; i < h.size(); ++i) h[i] = base + 0.1234567f * static_cast<float>(i) - 1.0f;
  return h;
}

// A two-tensor table: "w" [3,4], "b" [3].
void add_table(ParamStore& s) {
  EXPECT_EQ(s.add("layer.weight", Shape{3, 4}, ParamRole::Weight), 0);
  EXPECT_EQ(s.add("layer.bias", Shape{3}, ParamRole::Bias), 1);
}

TEST(ParamStore, TableOffsetsAreConsecutiveInTheOrderAdded) {
  auto dev = make_cpu_device();
  ParamStore s(*dev, resolve_policy("fp32"));
  add_table(s);
  EXPECT_EQ(s.add("other", Shape{2, 2, 2}, ParamRole::Weight), 2);
  ASSERT_EQ(s.info().size(), 3u);
  EXPECT_EQ(s.info()[0].name, "layer.weight");
  EXPECT_EQ(s.info()[0].offset, 0);
  EXPECT_EQ(s.info()[1].offset, 12);
  EXPECT_EQ(s.info()[2].offset, 15);
  EXPECT_EQ(s.info()[2].shape, (Shape{2, 2, 2}));
  EXPECT_EQ(s.numel(), 23);
  s.allocate();
  const ParamRef b = s.ref(1);
  EXPECT_EQ(b.p.shape, Shape{3});
  EXPECT_EQ(static_cast<char*>(b.p.data) - static_cast<char*>(s.params().data), 12 * 4);
  EXPECT_EQ(static_cast<char*>(b.g.data) - static_cast<char*>(s.grads().data), 12 * 4);
  EXPECT_EQ(s.ref(0).g.shape, (Shape{3, 4}));
  EXPECT_THROW(s.add("late", Shape{1}, ParamRole::Weight), std::logic_error);
  EXPECT_THROW(s.upload(std::vector<float>(5)), std::invalid_argument);
}

struct Expect {
  const char* policy;
  bool master, half, compute;  // which buffers exist
  DType param, gemm_copy;      // dtypes of ref().p and ref().c (grads: param)
  const char* weight_copy;     // "compute", "half" or "" (empty)
};

// add_table()'s parameters in a store under the case's policy, allocated.
class ParamStorePolicy : public ::testing::TestWithParam<Expect> {
 protected:
  void SetUp() override {
    add_table(s);
    s.allocate();
  }
  const Expect e = GetParam();
  std::unique_ptr<Device> dev = make_cpu_device();
  ParamStore s{*dev, resolve_policy(e.policy)};
};

TEST_P(ParamStorePolicy, BuffersAndDtypesFollowThePolicy) {
  const int64_t n = s.numel();
  EXPECT_EQ(!s.master().empty(), e.master);
  EXPECT_EQ(!s.half_params().empty(), e.half);
  EXPECT_EQ(!s.compute_weights().empty(), e.compute);
  if (e.master) { EXPECT_EQ(s.master().dtype, DType::F32); }
  if (e.half) { EXPECT_EQ(s.half_params().dtype, e.param); }
  if (e.compute) { EXPECT_EQ(s.compute_weights().dtype, e.gemm_copy); }
  // What the optimizer updates: the master weights when there are any.
  EXPECT_EQ(s.params().data, e.master ? s.master().data : s.half_params().data);
  EXPECT_EQ(s.params().numel(), n);
  EXPECT_EQ(s.grads().dtype, e.param);
  EXPECT_EQ(s.grads().numel(), n);
  const ParamRef w = s.ref(0);
  EXPECT_EQ(w.p.dtype, e.param);
  EXPECT_EQ(w.c.dtype, e.gemm_copy);
  EXPECT_EQ(w.g.dtype, e.param);
  EXPECT_EQ(w.c.data == w.p.data, !e.compute) << "the GEMMs read the parameters when no copy is kept";
  const std::string copy = e.weight_copy;
  if (copy.empty()) { EXPECT_TRUE(s.weight_copy().empty()); }
  if (copy == "compute") { EXPECT_EQ(s.weight_copy().data, s.compute_weights().data); }
  if (copy == "half") { EXPECT_EQ(s.weight_copy().data, s.half_params().data); }
  // Memory: every parameter buffer under Params, gradients under Grads.
  const size_t p_bytes = (e.master ? 4 : 0) + (e.half ? 2 : 0) + (e.compute ? dtype_size(e.gemm_copy) : 0);
  const MemorySnapshot m = dev->memory().snapshot();
  EXPECT_EQ(m.current[static_cast<size_t>(MemCategory::Params)], p_bytes * static_cast<size_t>(n));
  EXPECT_EQ(m.current[static_cast<size_t>(MemCategory::Grads)], dtype_size(e.param) * static_cast<size_t>(n));
}

TEST_P(ParamStorePolicy, UploadThenRefreshWritesTheCopiesFromTheUpdatedWeights) {
  const std::vector<float> h0 = host_weights(s.numel(), 0.0f);
  s.upload(h0);
  auto expect_rounded = [&](const Tensor& t, const std::vector<float>& h, const char* what) {
    const std::vector<float> got = values(*dev, t);
    for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(got[i], round_to(t.dtype, h[i])) << what << " [" << i << "]";
  };
  // After the upload every buffer holds the initial weights in its dtype.
  expect_rounded(s.params(), h0, "params");
  expect_rounded(s.model_params(), h0, "model params");
  expect_rounded(s.ref(0).c, std::vector<float>(h0.begin(), h0.begin() + 12), "GEMM weights");

  // An optimizer step writes params(); the copies are stale until the refresh.
  std::vector<float> h1 = host_weights(s.numel(), 0.5f);
  for (float& v : h1) v = round_to(s.params().dtype, v);  // representable in params()
  std::vector<float> raw(h1);
  if (s.params().dtype != DType::F32) {
    DeviceBuffer staging = dev->alloc(Shape{s.numel()}, DType::F32, MemCategory::Workspace);
    dev->upload(staging, h1.data());
    dev->cast(s.params(), staging);
  } else {
    dev->upload(s.params(), raw.data());
  }
  if (!s.weight_copy().empty()) expect_rounded(s.weight_copy(), h0, "weight copy before the refresh");
  s.load_compute_weights();
  expect_rounded(s.params(), h1, "params");
  expect_rounded(s.model_params(), h1, "model params after the refresh");
  if (!s.weight_copy().empty()) expect_rounded(s.weight_copy(), h1, "weight copy after the refresh");
  if (e.compute) expect_rounded(s.compute_weights(), h1, "compute copy after the refresh");
  expect_rounded(s.ref(1).c, std::vector<float>(h1.begin() + 12, h1.end()), "GEMM view of the bias");
}

INSTANTIATE_TEST_SUITE_P(
    Policies, ParamStorePolicy,
    ::testing::Values(
        // fp32: the master weights are the parameters and what the GEMMs read.
        Expect{"fp32", true, false, false, DType::F32, DType::F32, ""},
        // autocast: fp32 parameters, a bf16 copy for the GEMMs.
        Expect{"amp_bf16", true, false, true, DType::F32, DType::BF16, "compute"},
        // apex O2: fp16 model weights (read by the GEMMs) beside fp32 masters.
        Expect{"O2", true, true, false, DType::F16, DType::F16, "half"},
        // apex O3: fp16 parameters only; the optimizer updates them directly.
        Expect{"O3", false, true, false, DType::F16, DType::F16, ""}),
    [](const ::testing::TestParamInfo<Expect>& i) { return std::string(i.param.policy); });

}  // namespace
}  // namespace mpb
