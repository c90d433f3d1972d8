// Softmax cross-entropy and accuracy on the GPU: one block per row, fp32 row
// max and sum-of-exp reduced in a fixed order, the per-element math from
// ops/softmax_xent.h. Row losses are summed into a double in a fixed order by
// a single block, so a call's loss is bit-reproducible. A returning call reads
// it back (a host wait); a deferred one adds it to the device's loss sum (a
// double in mapped pinned memory, read and zeroed by read_loss_sum_impl)
// without waiting: calls are added in stream order.
//
// Labels: a negative label marks an ignored row (ops/softmax_xent.h,
// scalar::xent_ignored): its loss is exactly 0, its dlogits row exactly 0,
// count_correct skips it; the unfused forward still writes its probabilities.
// A label >= the number of classes is an error: the kernels raise
// kFlagBadLabel (the next synchronising call throws DeviceError) and the
// row's loss is NaN.
#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/dtype_io.h"
#include "ops/softmax_xent.h"

namespace mpb::cuda {

namespace {

using scalar::load_f32;
using scalar::store_f32;

// One block per row. Writes the row's loss (0 for an ignored row, NaN for a
// label >= C, which also raises kFlagBadLabel) and either probs (forward) or
// dlogits (fused; an ignored row's are zeros, without the reductions, as on
// the CPU).
// The probability expression is the same in both modes and the same as the
// CPU's, so fused and unfused dlogits agree bit for bit.
__global__ void xent_rows_kernel(const void* logits, DType lt, const int32_t* labels, int64_t C, float* probs,
                                 void* dlogits, DType dt, float grad_scale, float* row_loss, int* flags) {
  __shared__ float smem[kWarps];
  const int64_t r = blockIdx.x;
  const int64_t base = r * C;
  const int32_t label = labels[r];
  const bool ignored = scalar::xent_ignored(label);
  if (ignored && probs == nullptr) {  // fused: no loss, no gradient (uniform per block: no barrier skipped)
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) store_f32(dlogits, dt, base + c, 0.0f);
    if (threadIdx.x == 0) row_loss[r] = 0.0f;
    return;
  }
  const bool bad = !ignored && static_cast<int64_t>(label) >= C;
  // Read before the reductions' barriers: the output may alias the logits
  // (in place), and the last pass overwrites them.
  const float x_label = (threadIdx.x == 0 && !bad && !ignored) ? load_f32(logits, lt, base + label) : 0.0f;

  float local_max = -INFINITY;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) local_max = fmaxf(local_max, load_f32(logits, lt, base + c));
  const float row_max = block_reduce(local_max, -INFINITY, MaxOp{}, smem);

  float local_sum = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    local_sum += scalar::xent_exp(load_f32(logits, lt, base + c), row_max);
  const float sum_exp = block_reduce(local_sum, 0.0f, SumOp{}, smem);

  // The CPU's probability expression (backends/cpu/kernels/loss.cpp): exp times the reciprocal of the sum.
  const float inv = 1.0f / sum_exp;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float prob = scalar::xent_exp(load_f32(logits, lt, base + c), row_max) * inv;
    if (probs != nullptr)
      probs[base + c] = prob;
    else
      store_f32(dlogits, dt, base + c, scalar::xent_grad(prob, c == label, grad_scale));
  }
  if (threadIdx.x == 0) {
    if (bad) {
      raise_flag(flags, kFlagBadLabel);
      row_loss[r] = NAN;
    } else if (ignored) {
      row_loss[r] = 0.0f;
    } else {
      row_loss[r] = scalar::xent_row_loss(x_label, row_max, sum_exp);
    }
  }
}

// Sum of the row losses in double: thread i adds rows i, i+kThreads, ... in
// order, then a fixed tree; the total is stored in *out, or added to it
// (`accumulate`: the deferred loss sum). One block.
__global__ void sum_rows_kernel(const float* row_loss, int64_t rows, double* out, bool accumulate) {
  __shared__ double smem[kWarps];
  double acc = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) acc += static_cast<double>(row_loss[r]);
  const double total = block_reduce(acc, 0.0, SumOp{}, smem);
  if (threadIdx.x == 0) *out = accumulate ? *out + total : total;
}

__global__ void xent_backward_kernel(void* dlogits, DType dt, const float* probs, const int32_t* labels, int64_t rows,
                                     int64_t C, float grad_scale, int* flags) {
  const int64_t n = rows * C;
  // (r, c) advance by a constant per grid stride: no 64-bit division per element.
  const int64_t stride = grid_threads();
  const int64_t step_r = stride / C, step_c = stride - step_r * C;
  int64_t i = global_thread();
  int64_t r = i / C, c = i - r * C;
  for (; i < n; i += stride, r += step_r, c += step_c) {
    if (c >= C) {
      c -= C;
      ++r;
    }
    const int32_t label = labels[r];
    const bool ignored = scalar::xent_ignored(label);
    if (c == 0 && !ignored && static_cast<int64_t>(label) >= C) raise_flag(flags, kFlagBadLabel);
    store_f32(dlogits, dt, i, ignored ? 0.0f : scalar::xent_grad(probs[i], c == label, grad_scale));
  }
}

// Argmax per row with the CPU's sequential semantics: the first index whose
// value is strictly greater than every earlier one, starting from element 0.
// So ties go to the lowest index, NaNs never win, and a NaN in element 0 makes
// the answer 0. In parallel: each thread keeps its best non-NaN (value,
// index), combined by (greater value, then lower index); element 0 being NaN
// is checked separately.
struct ArgMax {
  float v;
  int64_t i;  // -1: no candidate yet
};

__device__ inline ArgMax better(ArgMax a, ArgMax b) {
  if (b.i < 0) return a;
  if (a.i < 0) return b;
  return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}

__global__ void count_correct_kernel(const void* logits, DType lt, const int32_t* labels, int64_t C,
                                     unsigned long long* correct, int* flags) {
  __shared__ float sv[kWarps];
  __shared__ int64_t si[kWarps];
  const int64_t r = blockIdx.x;
  const int64_t base = r * C;
  ArgMax best{0.0f, -1};
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const float v = load_f32(logits, lt, base + c);
    if (!isnan(v) && (best.i < 0 || v > best.v)) best = ArgMax{v, c};  // c increases: ties keep the earlier
  }
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int off = 16; off > 0; off >>= 1) {
    ArgMax other{__shfl_down_sync(0xffffffffu, best.v, off), __shfl_down_sync(0xffffffffu, best.i, off)};
    best = better(best, other);
  }
  if (lane == 0) {
    sv[warp] = best.v;
    si[warp] = best.i;
  }
  __syncthreads();
  if (warp == 0) {
    best = lane < static_cast<unsigned>(kWarps) ? ArgMax{sv[lane], si[lane]} : ArgMax{0.0f, -1};
    for (int off = 16; off > 0; off >>= 1) {
      ArgMax other{__shfl_down_sync(0xffffffffu, best.v, off), __shfl_down_sync(0xffffffffu, best.i, off)};
      best = better(best, other);
    }
    if (lane == 0) {
      const int64_t arg = (best.i < 0 || isnan(load_f32(logits, lt, base))) ? 0 : best.i;
      const int32_t label = labels[r];
      if (!scalar::xent_ignored(label)) {  // an ignored row is not counted
        if (static_cast<int64_t>(label) >= C) raise_flag(flags, kFlagBadLabel);
        if (arg == static_cast<int64_t>(label)) atomicAdd(correct, 1ull);  // integer adds: order-independent
      }
    }
  }
}

// Backend limit: one block per row, and gridDim.x is at most 2^31 - 1 (the
// backward kernel is grid-stride and would not need it; kept so that the four
// ops accept the same shapes).
void check_rows(const char* op, const Tensor& logits) {
  require(logits.rows() <= 0x7FFFFFFF, op, "too many rows for one grid");
}

// The forward and fused ops over B > 0 rows of C > 0 logits: xent_rows_kernel
// writes each row's loss and either probs (forward) or dlogits (fused), then
// sum_rows_kernel sums the row losses. Deferred: added to the device's loss
// sum, 0 returned at once; otherwise returned (waits). `op` names the op,
// `rows` the row kernel's launch, in errors.
double xent_rows_and_sum(CudaDevice& dev, const char* op, const char* rows, const Tensor& logits,
                         const Tensor& labels, float* probs, void* dlogits, DType dt, float grad_scale,
                         bool deferred) {
  const int64_t B = logits.rows(), C = logits.cols();
  auto* row_loss = static_cast<float*>(dev.scratch(kScratchReduce, static_cast<size_t>(B) * sizeof(float)));
  xent_rows_kernel<<<static_cast<unsigned>(B), kThreads, 0, dev.stream()>>>(
      logits.data, logits.dtype, static_cast<const int32_t*>(labels.data), C, probs, dlogits, dt, grad_scale,
      row_loss, dev.device_flags());
  MPB_CHECK_LAUNCH(rows);
  double* total = deferred ? dev.loss_sum() : static_cast<double*>(dev.scratch(kScratchResult, sizeof(double)));
  sum_rows_kernel<<<1, kThreads, 0, dev.stream()>>>(row_loss, B, total, deferred);
  MPB_CHECK_LAUNCH("sum_rows_kernel");
  if (deferred) return 0.0;
  double host = 0.0;
  dev.read_back(&host, total, sizeof(host), op);
  return host;
}

}  // namespace

double CudaDevice::softmax_xent_forward_impl(const Tensor& probs, const Tensor& logits, const Tensor& labels,
                                             bool deferred) {
  check_rows("softmax_xent_forward", logits);
  const int64_t B = logits.rows(), C = logits.cols();
  if (B == 0 || C == 0) return 0.0;
  return xent_rows_and_sum(*this, "softmax_xent_forward", "xent_rows_kernel(forward)", logits, labels,
                           static_cast<float*>(probs.data), nullptr, DType::F32, 0.0f, deferred);
}

void CudaDevice::softmax_xent_backward_impl(const Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                                            float grad_scale) {
  check_rows("softmax_xent_backward", probs);
  const int64_t B = probs.rows(), C = probs.cols();
  if (B == 0 || C == 0) return;
  xent_backward_kernel<<<elementwise_grid(B * C), kThreads, 0, stream()>>>(
      dlogits.data, dlogits.dtype, static_cast<const float*>(probs.data), static_cast<const int32_t*>(labels.data), B,
      C, grad_scale, device_flags());
  MPB_CHECK_LAUNCH("xent_backward_kernel");
}

double CudaDevice::softmax_xent_fused_impl(const Tensor& dlogits, const Tensor& logits, const Tensor& labels,
                                           float grad_scale, bool deferred) {
  check_rows("softmax_xent_fused", logits);
  const int64_t B = logits.rows(), C = logits.cols();
  if (B == 0 || C == 0) return 0.0;
  // In place (the contract: same dtype) works: each element is read and
  // written by one thread, after the row's reductions.
  return xent_rows_and_sum(*this, "softmax_xent_fused", "xent_rows_kernel(fused)", logits, labels, nullptr,
                           dlogits.data, dlogits.dtype, grad_scale, deferred);
}

// Waits for the stream (and raises a flagged bad label), then reads the
// mapped sum and zeroes it: the sum is zero afterwards whether or not the
// wait raises a device error.
double CudaDevice::read_loss_sum_impl() { return take_loss_sum("read_loss_sum"); }

double CudaDevice::take_loss_sum(const char* op) {
  volatile double* sum = loss_sum_host_;
  try {
    sync_and_check(op);
  } catch (...) {
    *sum = 0.0;
    throw;
  }
  const double host = *sum;
  *sum = 0.0;
  return host;
}

int64_t CudaDevice::count_correct_impl(const Tensor& logits, const Tensor& labels) {
  const int64_t B = logits.rows(), C = logits.cols();
  if (B == 0 || C == 0) return 0;
  check_rows("count_correct", logits);
  auto* correct = static_cast<unsigned long long*>(scratch(kScratchResult, sizeof(unsigned long long)));
  MPB_CUDA_CHECK(cudaMemsetAsync(correct, 0, sizeof(unsigned long long), stream()));
  count_correct_kernel<<<static_cast<unsigned>(B), kThreads, 0, stream()>>>(
      logits.data, logits.dtype, static_cast<const int32_t*>(labels.data), C, correct, device_flags());
  MPB_CHECK_LAUNCH("count_correct_kernel");
  unsigned long long host = 0;
  read_back(&host, correct, sizeof(host), "count_correct");
  return static_cast<int64_t>(host);
}

}  // namespace mpb::cuda
