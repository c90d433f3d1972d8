// The sparse MLM head's gather list on the CPU (core/device.h,
// label_positions): ops/label_partition.h over the whole label vector as one
// chunk. A few thousand int32 reads per micro-batch: a single thread is
// faster than waking the OpenMP team, and the slots are the same integers in
// any chunking (the CUDA kernel uses one chunk per thread).

#include "backends/cpu/kernel_errors.h"
#include "backends/cpu/kernels/kernels.h"
#include "ops/label_partition.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

void Kernels::label_positions_impl(const Tensor& pos, const Tensor& pos_labels, const Tensor& labels) {
  const auto* y = static_cast<const int32_t*>(labels.data);
  const int64_t n = labels.numel(), cap = pos.numel();
  const int64_t total = scalar::count_labelled(y, 0, n);
  // Checked before anything is written (core/device.h's contract).
  if (total > cap)
    throw_too_many_labels(total, cap);
  scalar::place_labelled(y, 0, n, 0, total, cap, static_cast<int32_t*>(pos.data),
                         static_cast<int32_t*>(pos_labels.data));
}

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
