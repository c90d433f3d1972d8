// Device::fp8_update_scales on the CPU (the contract is in core/device.h):
// slot by slot, each history row's filled entries reduced in index order by
// scalar::fp8_amax_max, which is order-free, so the CUDA kernel's tree gives
// the same bits. A few thousand slots of at most a few thousand entries: no
// ISA build or threads of its own.
#include <algorithm>

#include "backends/cpu/cpu_device_impl.h"
#include "ops/fp8_scale.h"

namespace mpb::cpu {

void CpuDevice::fp8_update_scales_impl(const Tensor& scale, const Tensor& amax, const Tensor& history,
                                       const Tensor& steps, const Tensor& fp8_max, const std::vector<bool>& touched,
                                       int margin, bool most_recent) {
  const int64_t n = scale.numel(), len = history.shape[1];
  auto* sc = static_cast<float*>(scale.data);
  auto* am = static_cast<float*>(amax.data);
  auto* hist = static_cast<float*>(history.data);
  auto* st = static_cast<int32_t*>(steps.data);
  const auto* fmax = static_cast<const float*>(fp8_max.data);
  for (int64_t i = 0; i < n; ++i) {
    if (!touched[static_cast<size_t>(i)]) continue;
    float* row = hist + i * len;
    const int64_t k = st[i];
    row[k % len] = am[i];
    st[i] = static_cast<int32_t>(k + 1);
    float r = am[i];
    if (!most_recent) {
      r = 0.0f;
      for (int64_t j = 0, filled = std::min(k + 1, len); j < filled; ++j) r = scalar::fp8_amax_max(r, row[j]);
    }
    sc[i] = scalar::fp8_scale_from_amax(r, fmax[i], margin, sc[i]);
  }
  std::fill(am, am + n, 0.0f);
}

}  // namespace mpb::cpu
