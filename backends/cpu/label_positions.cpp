// The sparse MLM head's gather list on the CPU (core/device.h,
// label_positions): ops/label_partition.h over the whole label vector as one
// chunk. A few thousand int32 reads per micro-batch: a single thread is
// faster than waking the OpenMP team, and the slots are the same integers in
// any chunking (the CUDA kernel uses one chunk per thread).
#include <stdexcept>
#include <stdexcept>
#include <string>

#include "backends/cpu/cpu_device_impl.h"
#include "ops/label_partition.h"

namespace mpb::cpu {

void CpuDevice::label_positions_impl(const Tensor& pos, const Tensor& pos_labels, const Tensor& labels) {
  const auto* y = static_cast<const int32_t*>(labels.data);
  const int64_t n = labels.numel(), cap = pos.numel();
  const int64_t total = scalar::count_labelled(y, 0, n);
  // Checked before anything is written (core/device.h's contract).
  if (total > cap)
    throw std::out_of_range("label_positions: " + std::to_string(total) + " labelled positions, but pos holds " +
                            std::to_string(cap) + " (the sparse MLM head would drop the loss of " +
                            std::to_string(total - cap) + " of them)");
  scalar::place_labelled(y, 0, n, 0, total, cap, static_cast<int32_t*>(pos.data),
                         static_cast<int32_t*>(pos_labels.data));
}

}  // namespace mpb::cpu
