// Embedding lookup and its gradient on the GPU.
//
// Forward: a gather, out[i, :] = table[ids[i], :] through the dtype
// conversion: bit-identical to the CPU.
//
// Backward: deterministic and bit-identical to the CPU (backends/cpu/kernels/embedding.cpp).
// Each table row is owned by one thread per column, which computes
//   (Accumulate ? dtable[v] : 0) + dout[i1] + dout[i2] + ...   (i1 < i2 < ...)
// in fp32 and rounds once to dtable's dtype: the CPU's expression in the CPU's
// order. The positions of each id in ascending order come from a counting sort
// on the device, made stable without relying on the order of atomics:
//   1. counts[v]: how many positions hold id v (integer atomics: the counts do
//      not depend on their order);
//   2. start[v]: the exclusive prefix sum of the counts (one block);
//   3. every position is dropped into its id's bucket at an atomically claimed
//      slot (an arbitrary order inside the bucket);
//   4. every position's rank in its bucket = the number of bucket entries
//      smaller than it, and it is written at start[v] + rank: the bucket is
//      now sorted ascending, whatever order step 3 produced. (Cost: the sum of
//      the squared bucket sizes; for real token streams, dominated by the most
//      frequent id.)
// Rows no id refers to are zeroed (Overwrite) or left untouched (Accumulate),
// as on the CPU.
//
// Ids outside [0, rows of the table) can't throw from a kernel (the CPU
// throws std::out_of_range before touching anything): the kernels skip them
// (the forward writes NaN rows for them) and raise kFlagBadId, which the next
// synchronising call reports as a DeviceError (backends/cuda/cuda_device.cpp).
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/block_scan.cuh"
#include "backends/cuda/kernel_util.cuh"
#include "ops/dtype_io.h"

namespace mpb::cuda {

namespace {

using scalar::load_f32;
using scalar::store_f32;

__device__ inline bool id_ok(int32_t id, int64_t V) { return id >= 0 && static_cast<int64_t>(id) < V; }

__global__ void embedding_forward_kernel(void* out, DType ot, const void* table, DType tt, const int32_t* ids,
                                         int64_t N, int64_t C, int64_t V, int* flags) {
  const int64_t n = N * C;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t row = i / C, c = i - row * C;
    const int32_t id = ids[row];
    if (!id_ok(id, V)) {
      if (c == 0) raise_flag(flags, kFlagBadId);
      store_f32(out, ot, i, NAN);
      continue;
    }
    store_f32(out, ot, i, load_f32(table, tt, static_cast<int64_t>(id) * C + c));
  }
}

// 1. counts[id] += 1 per valid position.
__global__ void embedding_count_kernel(const int32_t* ids, int64_t N, int64_t V, int* counts, int* flags) {
  for (int64_t i = global_thread(); i < N; i += grid_threads()) {
    const int32_t id = ids[i];
    if (!id_ok(id, V)) {
      raise_flag(flags, kFlagBadId);
      continue;
    }
    atomicAdd(&counts[id], 1);
  }
}

// 2. start[v] = sum_{u < v} counts[u], start[V] = the total. One block: thread
// t scans a contiguous chunk; the chunk totals are scanned in order by thread 0.
__global__ void embedding_scan_kernel(const int* counts, int64_t V, int* start) {
  __shared__ int chunk_base[kThreads];
  const int64_t per = (V + kThreads - 1) / kThreads;
  const int64_t v0 = static_cast<int64_t>(threadIdx.x) * per;
  const int64_t v1 = v0 + per < V ? v0 + per : V;
  int total = 0;
  for (int64_t v = v0; v < v1; ++v) total += counts[v];
  chunk_base[threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.x == 0) start[V] = exclusive_prefix_in_order(chunk_base);
  __syncthreads();
  int run = chunk_base[threadIdx.x];
  for (int64_t v = v0; v < v1; ++v) {
    start[v] = run;
    run += counts[v];
  }
}

// 3. Each valid position into its bucket, at a claimed (unordered) slot.
__global__ void embedding_scatter_kernel(const int32_t* ids, int64_t N, int64_t V, const int* start, int* fill,
                                         int* unordered) {
  for (int64_t i = global_thread(); i < N; i += grid_threads()) {
    const int32_t id = ids[i];
    if (!id_ok(id, V)) continue;
    const int slot = atomicAdd(&fill[id], 1);
    unordered[start[id] + slot] = static_cast<int>(i);
  }
}

// 4. The position's rank among its bucket's entries: its place in ascending order.
__global__ void embedding_rank_kernel(const int32_t* ids, int64_t N, int64_t V, const int* start, const int* counts,
                                      const int* unordered, int* pos) {
  for (int64_t i = global_thread(); i < N; i += grid_threads()) {
    const int32_t id = ids[i];
    if (!id_ok(id, V)) continue;
    const int b = start[id], n = counts[id];
    const int me = static_cast<int>(i);
    int rank = 0;
    for (int k = 0; k < n; ++k) rank += unordered[b + k] < me ? 1 : 0;
    pos[b + rank] = me;
  }
}

// 5. One thread per (row, column): the CPU's sum, in the CPU's order. Loads
// are issued four at a time; the additions stay in position order.
__global__ void embedding_accumulate_kernel(void* dtable, DType tt, const void* dout, DType gt, const int* start,
                                            const int* pos, int64_t V, int64_t C, bool accumulate) {
  const int64_t n = V * C;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t v = i / C, c = i - v * C;
    const int b = start[v], e = start[v + 1];
    if (b == e && accumulate) continue;  // untouched
    float a = accumulate ? load_f32(dtable, tt, i) : 0.0f;
    int k = b;
    for (; k + 4 <= e; k += 4) {
      const float g0 = load_f32(dout, gt, static_cast<int64_t>(pos[k]) * C + c);
      const float g1 = load_f32(dout, gt, static_cast<int64_t>(pos[k + 1]) * C + c);
      const float g2 = load_f32(dout, gt, static_cast<int64_t>(pos[k + 2]) * C + c);
      const float g3 = load_f32(dout, gt, static_cast<int64_t>(pos[k + 3]) * C + c);
      a += g0;
      a += g1;
      a += g2;
      a += g3;
    }
    for (; k < e; ++k) a += load_f32(dout, gt, static_cast<int64_t>(pos[k]) * C + c);
    store_f32(dtable, tt, i, a);
  }
}

// Backend limit: positions are int32 in the backward's buckets (the forward
// gather would not need it; kept so both directions accept the same shapes).
void check_positions(const char* op, int64_t rows) {
  require(rows <= 0x7FFFFFFF, op, "too many positions for int32 bucket indices");
}

}  // namespace

void CudaDevice::embedding_forward_impl(const Tensor& out, const Tensor& table, const Tensor& ids) {
  const int64_t N = out.rows(), C = out.cols();
  check_positions("embedding_forward", N);
  if (N * C == 0) return;
  embedding_forward_kernel<<<elementwise_grid(N * C), kThreads, 0, stream()>>>(
      out.data, out.dtype, table.data, table.dtype, static_cast<const int32_t*>(ids.data), N, C, table.rows(),
      device_flags());
  MPB_CHECK_LAUNCH("embedding_forward_kernel");
}

void CudaDevice::embedding_backward_impl(const Tensor& dtable, const Tensor& dout, const Tensor& ids,
                                         GradMode mode) {
  const char* op = "embedding_backward";
  const int64_t N = dout.rows(), C = dout.cols(), V = dtable.rows();
  check_positions(op, N);
  require(V <= 0x7FFFFFFF, op, "too many table rows");  // backend limit: int32 bucket starts
  if (V * C == 0) return;
  const bool accumulate = mode == GradMode::Accumulate;
  if (N == 0) {  // an empty sum: 0 (Overwrite), nothing to add (Accumulate)
    if (!accumulate) fill(dtable, 0.0f);
    return;
  }
  // Scratch: counts[V], fill[V], start[V + 1], unordered[N], pos[N] (int32).
  const size_t ints = static_cast<size_t>(3 * V + 1 + 2 * N);
  int* counts = static_cast<int*>(scratch(kScratchEmbedding, ints * sizeof(int)));
  int* filled = counts + V;
  int* start = filled + V;
  int* unordered = start + V + 1;
  int* pos = unordered + N;
  const auto* id = static_cast<const int32_t*>(ids.data);
  MPB_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<size_t>(2 * V) * sizeof(int), stream()));  // counts, filled
  const unsigned grid_n = elementwise_grid(N);
  embedding_count_kernel<<<grid_n, kThreads, 0, stream()>>>(id, N, V, counts, device_flags());
  MPB_CHECK_LAUNCH("embedding_count_kernel");
  embedding_scan_kernel<<<1, kThreads, 0, stream()>>>(counts, V, start);
  MPB_CHECK_LAUNCH("embedding_scan_kernel");
  embedding_scatter_kernel<<<grid_n, kThreads, 0, stream()>>>(id, N, V, start, filled, unordered);
  MPB_CHECK_LAUNCH("embedding_scatter_kernel");
  embedding_rank_kernel<<<grid_n, kThreads, 0, stream()>>>(id, N, V, start, counts, unordered, pos);
  MPB_CHECK_LAUNCH("embedding_rank_kernel");
  embedding_accumulate_kernel<<<elementwise_grid(V * C), kThreads, 0, stream()>>>(
      dtable.data, dtable.dtype, dout.data, dout.dtype, start, pos, V, C, accumulate);
  MPB_CHECK_LAUNCH("embedding_accumulate_kernel");
}

}  // namespace mpb::cuda
