// Embedding lookup and its gradient on the CPU.
//
// Backward determinism: every table row is owned by one task. The positions
// of each id are listed in ascending order (a counting sort: O(N + V), stable),
// and a row's gradient is  (Accumulate ? dtable[v] : 0) + dout[i1] + dout[i2]
// + ... over its positions i1 < i2 < ..., summed in fp32 and rounded to
// dtable's dtype once. No atomics, so the same sum order on every run and
// thread count; the CUDA kernel must sum in the same order to agree bit for bit.
// Rows no id refers to are zeroed (Overwrite) or left alone (Accumulate).
#include <algorithm>
#include <vector>

#include "backends/cpu/kernel_errors.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/kernels/dispatch.h"
#include "backends/cpu/kernels/elementwise_map.h"  // kParallelMin

namespace mpb::cpu::MPB_CPU_ISA_NS {

using scalar::Elem;

namespace {

// Ids outside [0, vocab) are an error in the data, which only the backend can
// read (core/device.h): here, before anything is written, as std::out_of_range.
const int32_t* check_ids(const char* op, const Tensor& ids, int64_t rows, int64_t vocab) {
  const int32_t* id = static_cast<const int32_t*>(ids.data);
  for (int64_t i = 0; i < rows; ++i)
    if (id[i] < 0 || id[i] >= vocab)
      throw_bad_id(op, id[i], i, vocab);
  return id;
}

}  // namespace

void Kernels::embedding_forward_impl(const Tensor& out, const Tensor& table, const Tensor& ids) {
  const int64_t N = out.rows(), C = out.cols();
  const int32_t* id = check_ids("embedding_forward", ids, N, table.rows());
  dispatch_float2(table.dtype, out.dtype, [&](auto T, auto O) {
    using ET = Elem<decltype(T)::value>;
    using EO = Elem<decltype(O)::value>;
    const void* pt = table.data;
    void* po = out.data;
#pragma omp parallel for if (N * C > kParallelMin)
    for (int64_t i = 0; i < N; ++i) {
      const int64_t src = static_cast<int64_t>(id[i]) * C, dst = i * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) EO::store(po, dst + c, ET::load(pt, src + c));
    }
  });
}

void Kernels::embedding_backward_impl(const Tensor& dtable, const Tensor& dout, const Tensor& ids, GradMode mode) {
  const int64_t N = dout.rows(), C = dout.cols(), V = dtable.rows();
  const int32_t* id = check_ids("embedding_backward", ids, N, V);
  // Counting sort of the positions by id (stable: ascending positions per id).
  std::vector<int64_t> start(static_cast<size_t>(V + 1), 0);
  for (int64_t i = 0; i < N; ++i) ++start[static_cast<size_t>(id[i]) + 1];
  for (int64_t v = 0; v < V; ++v) start[static_cast<size_t>(v + 1)] += start[static_cast<size_t>(v)];
  std::vector<int64_t> pos(static_cast<size_t>(N));
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < N; ++i) pos[static_cast<size_t>(next[static_cast<size_t>(id[i])]++)] = i;
  }
  const bool accumulate = mode == GradMode::Accumulate;
  dispatch_float2(dout.dtype, dtable.dtype, [&](auto G, auto T) {
    using EG = Elem<decltype(G)::value>;
    using ET = Elem<decltype(T)::value>;
    const void* pg = dout.data;
    void* pt = dtable.data;
#pragma omp parallel if ((N + V) * C > kParallelMin)
    {
      std::vector<float> acc(static_cast<size_t>(C));
      float* a = acc.data();
#pragma omp for schedule(dynamic, 64)
      for (int64_t v = 0; v < V; ++v) {
        const int64_t b = start[static_cast<size_t>(v)], e = start[static_cast<size_t>(v + 1)];
        const int64_t row = v * C;
        if (b == e && accumulate) continue;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) a[c] = accumulate ? ET::load(pt, row + c) : 0.0f;
        for (int64_t k = b; k < e; ++k) {
          const int64_t src = pos[static_cast<size_t>(k)] * C;
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) a[c] += EG::load(pg, src + c);
        }
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) ET::store(pt, row + c, a[c]);
      }
    }
  });
}

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
