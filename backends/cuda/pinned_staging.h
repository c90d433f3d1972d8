// Asynchronous uploads of batches (issue 10): the host data is copied into
// pinned host memory and a cudaMemcpyAsync to the device is queued on the
// stream, so Device::upload returns without waiting for the GPU (the caller
// may reuse its own buffer at once: the staging copy is ours). Internal to
// the CUDA backend.
//
// kSlots pinned buffers are used round-robin, each with an event recorded
// after its copy. A slot is reused only once its event has completed:
// cudaEventQuery first, so no wait happens unless kSlots uploads are still
// queued ahead of the device (then cudaEventSynchronize, counted as a host
// sync). All slots have one capacity, the largest upload seen so far: the
// warm-up's uploads (the same sizes as every later step's) grow them, and
// no timed step does, whichever slot an upload lands on.
// Uploads larger than kMaxStagedBytes (initial weights, the ceiling's
// matrices) are set-up, not steps: they copy from the caller's memory and
// wait, as before, rather than pinning that much memory.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>

#include "core/device.h"

namespace mpb::cuda {

class PinnedStaging {
 public:
  static constexpr int kSlots = 16;
  static constexpr size_t kMaxStagedBytes = size_t{16} << 20;

  PinnedStaging(Device& dev, cudaStream_t stream) : dev_(dev), stream_(stream) {}
  ~PinnedStaging();  // waits for copies still in flight, then frees
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // Queues a copy of `bytes` (<= kMaxStagedBytes) from host_src to device
  // memory dst on the stream; returns before it runs.
  void upload(void* dst, const void* host_src, size_t bytes);

 private:
  struct Slot {
    void* host = nullptr;         // cudaHostAlloc'd, `capacity_` bytes
    cudaEvent_t done = nullptr;   // recorded after the slot's last copy
    bool in_flight = false;       // `done` was recorded since the slot was last known free
  };
  void wait_for(Slot& s);         // until the slot's last copy has completed
  void grow(size_t bytes);        // every slot to `bytes` of pinned memory

  Device& dev_;
  cudaStream_t stream_;
  std::array<Slot, kSlots> slots_{};
  size_t capacity_ = 0;
  int next_ = 0;
};

}  // namespace mpb::cuda
