// The in-order scan one-block kernels share (embedding.cu's bucket starts,
// label_positions.cu's slots): each thread totals a contiguous chunk, thread 0
// turns the chunk totals into offsets, each thread then works from its own.
#pragma once

#include "backends/cuda/kernel_util.cuh"

namespace mpb::cuda {

// Thread 0's scan of a block's kThreads chunk totals (in shared memory) into
// their exclusive prefix sums, added in chunk order, so every run gives the
// same integers; returns their sum. The block syncs before reading them.
template <typename T>
__device__ T exclusive_prefix_in_order(T* chunk) {
  T run = 0;
  for (int t = 0; t < kThreads; ++t) {
    const T c = chunk[t];
    chunk[t] = run;
    run += c;
  }
  return run;
}

}  // namespace mpb::cuda
