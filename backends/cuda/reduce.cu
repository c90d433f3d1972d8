// Tensor statistics and exponent histograms on the GPU. Both are two-stage
// reductions whose grid depends only on the element count, so results are
// reproducible run to run and across GPUs. Element classification (finite,
// zero, frexp exponent) is exactly the CPU backend's (backends/cpu/kernels/reduce.cpp).
#include <cmath>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/dtype_io.h"
#include "ops/optimizer.h"

namespace mpb::cuda {

namespace {

using scalar::load_f32;

constexpr unsigned kStatsMaxBlocks = 1024;
constexpr int64_t kStatsPerBlock = int64_t{kThreads} * 16;

// Stage 1: per block, the sum of squares of the finite elements (in double)
// and the count of non-finite ones.
__global__ void stats_partial_kernel(const void* x, DType t, int64_t n, double* part_sum,
                                     unsigned long long* part_bad) {
  __shared__ double sd[kWarps];
  __shared__ unsigned long long su[kWarps];
  double s = 0.0;
  unsigned long long bad = 0;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float v = load_f32(x, t, i);
    if (isfinite(v))
      s += static_cast<double>(v) * static_cast<double>(v);
    else
      ++bad;
  }
  s = block_reduce(s, 0.0, SumOp{}, sd);
  bad = block_reduce(bad, 0ull, SumOp{}, su);
  if (threadIdx.x == 0) {
    part_sum[blockIdx.x] = s;
    part_bad[blockIdx.x] = bad;
  }
}

// Stage 2 (one block): the partials in a fixed order; thread 0 gets the totals.
__device__ void stats_finish(const double* part_sum, const unsigned long long* part_bad, int parts, double& s,
                             unsigned long long& bad) {
  __shared__ double sd[kWarps];
  __shared__ unsigned long long su[kWarps];
  s = 0.0;
  bad = 0;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) {
    s += part_sum[i];
    bad += part_bad[i];
  }
  s = block_reduce(s, 0.0, SumOp{}, sd);
  bad = block_reduce(bad, 0ull, SumOp{}, su);
}

__global__ void stats_finish_kernel(const double* part_sum, const unsigned long long* part_bad, int parts,
                                    double* out_sum, unsigned long long* out_bad) {
  double s = 0.0;
  unsigned long long bad = 0;
  stats_finish(part_sum, part_bad, parts, s, bad);
  if (threadIdx.x == 0) {
    *out_sum = s;
    *out_bad = bad;
  }
}

// decide_step's stage 2: the same totals, then the decision by the host's
// formula (scalar::decide_step) in one thread, written to the device slot
// and to the host's mapped one.
__global__ void decide_finish_kernel(const double* part_sum, const unsigned long long* part_bad, int parts,
                                     double loss_scale, double grad_clip, StepDecisionSlot* dev_slot,
                                     StepDecisionSlot* host_slot) {
  double s = 0.0;
  unsigned long long bad = 0;
  stats_finish(part_sum, part_bad, parts, s, bad);
  if (threadIdx.x == 0) {
    const scalar::StepDecision d = scalar::decide_step(s, static_cast<long long>(bad), loss_scale, grad_clip);
    const StepDecisionSlot r{s, bad, d.norm, d.grad_scale, d.skip ? 1 : 0};
    *dev_slot = r;
    *host_slot = r;
  }
}

constexpr int kHistMaxBins = 8192;  // shared-memory counters: (bins + 2) * 4 bytes <= 32 KiB
constexpr unsigned kHistMaxBlocks = 1024;

// counts[0..nbins) the bins, counts[nbins] zeros, counts[nbins+1] non-finite.
// Integer counts: the atomics' order does not change the result.
__global__ void exponent_histogram_kernel(const void* x, DType t, int64_t n, int lo, int nbins,
                                          unsigned long long* counts) {
  extern __shared__ unsigned int sh[];
  for (int i = threadIdx.x; i < nbins + 2; i += blockDim.x) sh[i] = 0u;
  __syncthreads();
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const float v = load_f32(x, t, i);
    if (!isfinite(v)) {
      atomicAdd(&sh[nbins + 1], 1u);
    } else if (v == 0.0f) {
      atomicAdd(&sh[nbins], 1u);
    } else {
      int e = 0;
      (void)frexpf(v, &e);  // |v| = f * 2^e, f in [0.5, 1)  =>  floor(log2|v|) = e - 1
      int64_t bin = static_cast<int64_t>(e) - 1 - lo;
      bin = bin < 0 ? 0 : (bin >= nbins ? nbins - 1 : bin);
      atomicAdd(&sh[bin], 1u);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nbins + 2; i += blockDim.x)
    if (sh[i] != 0u) atomicAdd(&counts[i], static_cast<unsigned long long>(sh[i]));
}

struct StatsPartials {
  int parts = 0;
  double* sum = nullptr;
  unsigned long long* bad = nullptr;
};

// Stage 1 of stats and decide_step (none for an empty tensor), into kScratchReduce.
StatsPartials launch_stats_partials(CudaDevice& dev, const Tensor& t) {
  StatsPartials p;
  const int64_t n = t.numel();
  if (n == 0) return p;
  const unsigned blocks = reduction_grid(n, kStatsPerBlock, kStatsMaxBlocks);
  char* part = static_cast<char*>(dev.scratch(kScratchReduce, blocks * (sizeof(double) + sizeof(unsigned long long))));
  p.parts = static_cast<int>(blocks);
  p.sum = reinterpret_cast<double*>(part);
  p.bad = reinterpret_cast<unsigned long long*>(part + blocks * sizeof(double));
  stats_partial_kernel<<<blocks, kThreads, 0, dev.stream()>>>(t.data, t.dtype, n, p.sum, p.bad);
  MPB_CHECK_LAUNCH("stats_partial_kernel");
  return p;
}

}  // namespace

TensorStats CudaDevice::stats_impl(const Tensor& t) {
  TensorStats out;
  if (t.numel() == 0) return out;
  struct Result {
    double sum;
    unsigned long long bad;
  };
  auto* result = static_cast<Result*>(scratch(kScratchResult, sizeof(Result)));
  const StatsPartials p = launch_stats_partials(*this, t);
  stats_finish_kernel<<<1, kThreads, 0, stream()>>>(p.sum, p.bad, p.parts, &result->sum, &result->bad);
  MPB_CHECK_LAUNCH("stats_finish_kernel");
  Result host{};
  read_back(&host, result, sizeof(host), "stats");
  out.sum_squares = host.sum;
  out.nonfinite = static_cast<int64_t>(host.bad);
  return out;
}

// No host wait: the decision stays on the device (and in the mapped slot)
// until read_step_results_impl.
void CudaDevice::decide_step_impl(const Tensor& grads, double loss_scale, double grad_clip) {
  decision_dev_ = static_cast<StepDecisionSlot*>(scratch(kScratchDecision, sizeof(StepDecisionSlot)));
  const StatsPartials p = launch_stats_partials(*this, grads);
  decide_finish_kernel<<<1, kThreads, 0, stream()>>>(p.sum, p.bad, p.parts, loss_scale, grad_clip, decision_dev_,
                                                      decision_mapped_);
  MPB_CHECK_LAUNCH("decide_finish_kernel");
}

// One wait (the loss sum's read), then the mapped decision as it stands.
StepResults CudaDevice::read_step_results_impl() {
  StepResults r;
  r.loss_sum = take_loss_sum("read_step_results");
  const volatile StepDecisionSlot* d = decision_host_;
  r.grad_stats.sum_squares = d->sum_squares;
  r.grad_stats.nonfinite = static_cast<int64_t>(d->nonfinite);
  r.skip = d->skip != 0;
  r.grad_norm = d->norm;
  r.grad_scale = d->grad_scale;
  return r;
}

ExponentHistogram CudaDevice::exponent_histogram_impl(const Tensor& t, int lo, int nbins) {
  // Backend limit: the counters live in shared memory.
  require(nbins <= kHistMaxBins, "exponent_histogram", "nbins must be <= 8192 on the CUDA backend");
  ExponentHistogram h;
  h.lo = lo;
  h.bins.assign(static_cast<size_t>(nbins), 0);
  const int64_t n = t.numel();
  h.total = n;
  if (n == 0) return h;
  const unsigned blocks = reduction_grid(n, kStatsPerBlock, kHistMaxBlocks);
  // Backend limit: per-block shared counters are 32-bit; a block sees at most ceil(n/blocks) elements.
  require((n + blocks - 1) / blocks < (int64_t{1} << 32), "exponent_histogram", "tensor too large");
  const size_t count_bytes = static_cast<size_t>(nbins + 2) * sizeof(unsigned long long);
  auto* counts = static_cast<unsigned long long*>(scratch(kScratchResult, count_bytes));
  MPB_CUDA_CHECK(cudaMemsetAsync(counts, 0, count_bytes, stream()));
  const size_t shmem = static_cast<size_t>(nbins + 2) * sizeof(unsigned int);
  exponent_histogram_kernel<<<blocks, kThreads, shmem, stream()>>>(t.data, t.dtype, n, lo, nbins, counts);
  MPB_CHECK_LAUNCH("exponent_histogram_kernel");
  std::vector<unsigned long long> host(static_cast<size_t>(nbins + 2));
  read_back(host.data(), counts, count_bytes, "exponent_histogram");
  for (int i = 0; i < nbins; ++i) h.bins[static_cast<size_t>(i)] = static_cast<int64_t>(host[static_cast<size_t>(i)]);
  h.zeros = static_cast<int64_t>(host[static_cast<size_t>(nbins)]);
  h.nonfinite = static_cast<int64_t>(host[static_cast<size_t>(nbins) + 1]);
  return h;
}

}  // namespace mpb::cuda
