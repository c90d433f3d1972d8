// Device::fp8_update_scales on the GPU (the contract is in core/device.h),
// as Transformer Engine's amax-and-scale update: one kernel, no host wait.
// One block per slot: its threads reduce the history row's filled entries by
// scalar::fp8_amax_max (order-free: the CPU's bits, backends/cpu/fp8_scales.cpp)
// with this step's amax in the entry it replaces, and thread 0 then writes
// the entry, the count, the scale (scalar::fp8_scale_from_amax) and the zeroed
// amax. The touched flags travel as a bit set in the kernel's parameters (384
// bytes for Device::kFp8MaxSlots): no upload, no device buffer.
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/fp8_scale.h"

namespace mpb::cuda {

namespace {

struct TouchedBits {
  unsigned long long word[Device::kFp8MaxSlots / 64];
};
static_assert(Device::kFp8MaxSlots % 64 == 0, "whole words of touched bits");

struct AmaxMaxOp {
  __device__ float operator()(float a, float b) const { return scalar::fp8_amax_max(a, b); }
};

__global__ void fp8_update_scales_kernel(float* scale, float* amax, float* history, int32_t* steps,
                                         const float* fp8_max, const __grid_constant__ TouchedBits touched,
                                         int64_t len, int margin, bool most_recent) {
  __shared__ float smem[kWarps];
  const int64_t i = blockIdx.x;
  if (((touched.word[i >> 6] >> (i & 63)) & 1ull) == 0) {  // uniform per block
    if (threadIdx.x == 0) amax[i] = 0.0f;
    return;
  }
  float* row = history + i * len;
  const int64_t k = steps[i];  // every thread reads both before thread 0 writes (after the reduction's barriers)
  const float a = amax[i];
  const int64_t head = k % len, filled = k + 1 < len ? k + 1 : len;
  float r = a;
  if (!most_recent) {  // uniform: a kernel parameter
    float v = 0.0f;
    for (int64_t j = threadIdx.x; j < filled; j += blockDim.x) v = scalar::fp8_amax_max(v, j == head ? a : row[j]);
    r = block_reduce(v, 0.0f, AmaxMaxOp{}, smem);
  }
  if (threadIdx.x == 0) {
    row[head] = a;
    steps[i] = static_cast<int32_t>(k + 1);
    scale[i] = scalar::fp8_scale_from_amax(r, fp8_max[i], margin, scale[i]);
    amax[i] = 0.0f;
  }
}

}  // namespace

void CudaDevice::fp8_update_scales_impl(const Tensor& scale, const Tensor& amax, const Tensor& history,
                                        const Tensor& steps, const Tensor& fp8_max, const std::vector<bool>& touched,
                                        int margin, bool most_recent) {
  const int64_t n = scale.numel();
  if (n == 0) return;
  TouchedBits bits{};
  for (int64_t i = 0; i < n; ++i)
    if (touched[static_cast<size_t>(i)]) bits.word[i >> 6] |= 1ull << (i & 63);
  fp8_update_scales_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream()>>>(
      static_cast<float*>(scale.data), static_cast<float*>(amax.data), static_cast<float*>(history.data),
      static_cast<int32_t*>(steps.data), static_cast<const float*>(fp8_max.data), bits, history.shape[1], margin,
      most_recent);
  MPB_CHECK_LAUNCH("fp8_update_scales_kernel");
}

}  // namespace mpb::cuda
