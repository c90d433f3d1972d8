// The sparse MLM head's gather list on the GPU (core/device.h,
// label_positions): ops/label_partition.h, the CPU's functions, in one
// block. Thread t counts the labels of its contiguous chunk; thread 0 scans
// the chunk counts in order (kThreads additions); each thread then places
// its chunk from its prefix. The slots are integers, the same in every
// chunking, so the result is the CPU's bit for bit. N is a micro-batch's
// token count (a few thousand): one block is enough, and the whole op is one
// launch with no host synchronisation.
//
// More labelled positions than pos holds can't throw from a kernel: the
// kernel writes the slots that fit and raises kFlagLostLabel, which the next
// synchronising call reports as a DeviceError (backends/cuda/cuda_device.cpp).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/block_scan.cuh"
#include "backends/cuda/kernel_util.cuh"
#include "ops/label_partition.h"

namespace mpb::cuda {

namespace {

__global__ void label_positions_kernel(const int32_t* labels, int64_t n, int64_t cap, int32_t* pos,
                                       int32_t* pos_labels, int* flags) {
  __shared__ int64_t before[kThreads];
  __shared__ int64_t total;
  const int64_t per = (n + kThreads - 1) / kThreads;
  const int64_t b = static_cast<int64_t>(threadIdx.x) * per;
  const int64_t lo = b < n ? b : n;
  const int64_t hi = b + per < n ? b + per : n;
  before[threadIdx.x] = scalar::count_labelled(labels, lo, hi);
  __syncthreads();
  if (threadIdx.x == 0) total = exclusive_prefix_in_order(before);
  __syncthreads();
  const int64_t lost = scalar::place_labelled(labels, lo, hi, before[threadIdx.x], total, cap, pos, pos_labels);
  if (lost > 0) raise_flag(flags, kFlagLostLabel);
}

}  // namespace

void CudaDevice::label_positions_impl(const Tensor& pos, const Tensor& pos_labels, const Tensor& labels) {
  // Backend limit: positions are int32 (the embedding ops read them as ids).
  require(labels.numel() <= 0x7FFFFFFF, "label_positions", "too many positions for int32");
  label_positions_kernel<<<1, kThreads, 0, stream()>>>(
      static_cast<const int32_t*>(labels.data), labels.numel(), pos.numel(), static_cast<int32_t*>(pos.data),
      static_cast<int32_t*>(pos_labels.data), device_flags());
  MPB_CHECK_LAUNCH("label_positions_kernel");
}

}  // namespace mpb::cuda
