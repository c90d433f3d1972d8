// Attention's unfused path on the GPU: the masked softmax over
// materialised scores and its backward (the fused kernels are
// attention_fused.cu). The mask rule and the softmax formulas are the shared
// scalar cores of ops/attention.h, exactly as backends/cpu/kernels/attention.cpp
// uses them. Arguments arrive checked (core/device.h).
//
// Masked softmax / softmax backward: one warp per row (grid-stride over rows);
// the row max, the sum of exponentials and the backward's dot product are
// fp32 reductions (lanes in order, then a fixed butterfly), so the results are
// run-to-run reproducible and agree with the CPU to fp32-summation bounds. The
// logits themselves (masked_logit), the max and every exponential are the same
// fp32 operations as on the CPU.
#include <cmath>
#include <cstdint>

#include "backends/cuda/attention_warp.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "ops/attention.h"
#include "ops/dtype_io.h"

namespace mpb::cuda {

namespace {

using attention_warp::lane_id;
using attention_warp::row_warp_grid;
using attention_warp::warp_global;
using attention_warp::warp_max;
using attention_warp::warp_sum;
using attention_warp::warps_in_grid;
using scalar::load_f32;
using scalar::store_f32;

// probs = softmax(masked_logit(scores)) per row, one warp per row. Each lane
// reads and writes the same columns in every pass, so probs may alias scores.
__global__ void masked_softmax_kernel(void* probs, DType pt, const void* scores, DType st, const int32_t* key_valid,
                                      int64_t rows, int64_t rows_per_b, int64_t Tk, float scale, float mask) {
  const unsigned lane = lane_id();
  for (int64_t r = warp_global(); r < rows; r += warps_in_grid()) {
    const int32_t* kvb = key_valid + (r / rows_per_b) * Tk;
    const int64_t base = r * Tk;
    float mx = -INFINITY;
    for (int64_t j = lane; j < Tk; j += 32) {
      const float l = scalar::masked_logit(load_f32(scores, st, base + j), scale, kvb[j], mask);
      mx = l > mx ? l : mx;  // a NaN logit is skipped here but poisons the sum below (as on the CPU)
    }
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int64_t j = lane; j < Tk; j += 32)
      sum += scalar::softmax_exp(scalar::masked_logit(load_f32(scores, st, base + j), scale, kvb[j], mask), mx);
    sum = warp_sum(sum);
    for (int64_t j = lane; j < Tk; j += 32) {
      const float e =
          scalar::softmax_exp(scalar::masked_logit(load_f32(scores, st, base + j), scale, kvb[j], mask), mx);
      store_f32(probs, pt, base + j, e / sum);
    }
  }
}

// dscores = scale * p * (dp - sum_j p_j dp_j), one warp per row (may alias
// either input: each lane reads an element before it writes it).
__global__ void softmax_backward_kernel(void* ds, DType dst, const void* p, DType pt, const void* dp, DType dpt,
                                        int64_t rows, int64_t C, float scale) {
  const unsigned lane = lane_id();
  for (int64_t r = warp_global(); r < rows; r += warps_in_grid()) {
    const int64_t base = r * C;
    float dot = 0.0f;
    for (int64_t j = lane; j < C; j += 32) dot += load_f32(p, pt, base + j) * load_f32(dp, dpt, base + j);
    dot = warp_sum(dot);
    for (int64_t j = lane; j < C; j += 32)
      store_f32(ds, dst, base + j,
                scalar::softmax_grad(load_f32(p, pt, base + j), load_f32(dp, dpt, base + j), dot, scale));
  }
}

}  // namespace

void CudaDevice::masked_softmax_forward_impl(const Tensor& probs, const Tensor& scores, const Tensor& key_valid,
                                             float scale, float mask_value) {
  const int64_t Tk = scores.shape[3];
  const int64_t rows_per_b = scores.shape[1] * scores.shape[2];
  const auto* kv = static_cast<const int32_t*>(key_valid.data);
  const int64_t rows = scores.rows();
  if (rows == 0 || Tk == 0) return;
  const float mask = scalar::attention_mask_rounded(scores.dtype, mask_value);
  masked_softmax_kernel<<<row_warp_grid(*this, rows), kThreads, 0, stream()>>>(
      probs.data, probs.dtype, scores.data, scores.dtype, kv, rows, rows_per_b, Tk, scale, mask);
  MPB_CHECK_LAUNCH("masked_softmax_kernel");
}

void CudaDevice::softmax_backward_impl(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs,
                                       float scale) {
  const int64_t rows = probs.rows(), C = probs.cols();
  softmax_backward_kernel<<<row_warp_grid(*this, rows), kThreads, 0, stream()>>>(
      dscores.data, dscores.dtype, probs.data, probs.dtype, dprobs.data, dprobs.dtype, rows, C, scale);
  MPB_CHECK_LAUNCH("softmax_backward_kernel");
}

}  // namespace mpb::cuda
