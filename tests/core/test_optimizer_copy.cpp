// The fused AdamW's parameter copy: written in the same pass, it must equal
// exactly what a separate cast of the updated parameters gives.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/rng.h"

namespace mpb {
namespace {

TEST(AdamWCopy, EqualsACastOfTheUpdatedWeightsBitForBit) {
  auto dev = make_cpu_device();
  const int64_t n = 100003;  // not a multiple of any vector width
  Rng rng(5);
  std::vector<float> p(n), g(n);
  for (auto& x : p) x = float(rng.uniform(-1, 1));
  for (auto& x : g) x = float(rng.uniform(-1e-2, 1e-2));
  for (DType copy_dtype : {DType::BF16, DType::F16}) {
    DeviceBuffer param[2], grad = dev->alloc(Shape{n}, DType::F32, MemCategory::Grads), m[2], v[2];
    for (int k = 0; k < 2; ++k) {
      param[k] = dev->alloc(Shape{n}, DType::F32, MemCategory::Params);
      m[k] = dev->alloc(Shape{n}, DType::F32, MemCategory::Optimizer);
      v[k] = dev->alloc(Shape{n}, DType::F32, MemCategory::Optimizer);
      dev->upload(param[k], p.data());
      dev->fill(m[k], 0.0f);
      dev->fill(v[k], 0.0f);
    }
    dev->upload(grad, g.data());
    DeviceBuffer fused_copy = dev->alloc(Shape{n}, copy_dtype, MemCategory::Params);
    DeviceBuffer cast_copy = dev->alloc(Shape{n}, copy_dtype, MemCategory::Params);
    const AdamWHyper h{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1};
    dev->adamw_step(param[0], grad, m[0], v[0], h, 0.5f, true, fused_copy);
    dev->adamw_step(param[1], grad, m[1], v[1], h, 0.5f, true, Tensor{});
    dev->cast(cast_copy, param[1]);
    std::vector<uint16_t> a(n), b(n);
    dev->download(a.data(), fused_copy);
    dev->download(b.data(), cast_copy);
    EXPECT_EQ(a, b) << dtype_name(copy_dtype);
    std::vector<float> pa(n), pb(n);
    dev->download(pa.data(), param[0]);
    dev->download(pb.data(), param[1]);
    EXPECT_EQ(0, std::memcmp(pa.data(), pb.data(), n * sizeof(float))) << "the master update must not change";
  }
}

}  // namespace
}  // namespace mpb
