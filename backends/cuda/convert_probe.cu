// cuda_convert_probe (backends/cuda/convert_probe.h): the GPU's conversion
// instructions applied to host data, for the tests that check
// core/numerics.h against them.
#include "backends/cuda/convert_probe.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/kernel_util.cuh"

namespace mpb {

namespace {

__global__ void convert_probe_kernel(const float* in, int64_t n, uint16_t* half_out, uint16_t* bf16_out,
                                     float* tf32_out) {
  for (int64_t i = cuda::global_thread(); i < n; i += cuda::grid_threads()) {
    const float x = in[i];
    half_out[i] = __half_as_ushort(__float2half_rn(x));
    bf16_out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // Round to nearest, ties away from zero: the only fp32 -> tf32 conversion
    // on sm_80/86/89 (CUTLASS tfloat32_t uses the same instruction).
    uint32_t t;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(t) : "f"(x));
    tf32_out[i] = __uint_as_float(t);
#else
    tf32_out[i] = __uint_as_float(0x7FFFFFFFu);  // unreachable: the build targets sm_80 and newer
#endif
  }
}

// Device allocations freed on every path (errors are reported, not thrown).
struct DeviceAlloc {
  void* p = nullptr;
  DeviceAlloc() = default;
  DeviceAlloc(const DeviceAlloc&) = delete;
  DeviceAlloc& operator=(const DeviceAlloc&) = delete;
  ~DeviceAlloc() {
    if (p) MPB_CUDA_REPORT(cudaFree(p));
  }
};

// Restores the calling thread's current device.
struct DeviceRestore {
  int prev = -1;
  ~DeviceRestore() {
    if (prev >= 0) MPB_CUDA_REPORT(cudaSetDevice(prev));
  }
};

}  // namespace

void cuda_convert_probe(const float* host_in, size_t n, uint16_t* half_out, uint16_t* bf16_out, float* tf32_out) {
  if (auto reason = cuda_unavailable_reason()) throw DeviceError(*reason);
  if (n == 0) return;
  if (!host_in || !half_out || !bf16_out || !tf32_out) throw std::invalid_argument("cuda_convert_probe: null pointer");
  DeviceRestore restore;
  MPB_CUDA_CHECK(cudaGetDevice(&restore.prev));
  MPB_CUDA_CHECK(cudaSetDevice(0));
  DeviceAlloc in, h, b, t;
  MPB_CUDA_CHECK(cudaMalloc(&in.p, n * sizeof(float)));
  MPB_CUDA_CHECK(cudaMalloc(&h.p, n * sizeof(uint16_t)));
  MPB_CUDA_CHECK(cudaMalloc(&b.p, n * sizeof(uint16_t)));
  MPB_CUDA_CHECK(cudaMalloc(&t.p, n * sizeof(float)));
  MPB_CUDA_CHECK(cudaMemcpy(in.p, host_in, n * sizeof(float), cudaMemcpyHostToDevice));
  const int64_t count = static_cast<int64_t>(n);
  const int64_t blocks = (count + cuda::kThreads - 1) / cuda::kThreads;
  const unsigned grid = blocks > 65535 ? 65535u : static_cast<unsigned>(blocks);  // grid-stride beyond
  convert_probe_kernel<<<grid, cuda::kThreads>>>(static_cast<const float*>(in.p), count,
                                                 static_cast<uint16_t*>(h.p), static_cast<uint16_t*>(b.p),
                                                 static_cast<float*>(t.p));
  MPB_CHECK_LAUNCH("convert_probe_kernel");
  MPB_CUDA_CHECK(cudaDeviceSynchronize());
  MPB_CUDA_CHECK(cudaMemcpy(half_out, h.p, n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  MPB_CUDA_CHECK(cudaMemcpy(bf16_out, b.p, n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  MPB_CUDA_CHECK(cudaMemcpy(tf32_out, t.p, n * sizeof(float), cudaMemcpyDeviceToHost));
}

}  // namespace mpb
