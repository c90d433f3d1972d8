#include "backends/cuda/pinned_staging.h"

#include <cstring>
#include <stdexcept>

#include "backends/cuda/cuda_check.h"

namespace mpb::cuda {

PinnedStaging::~PinnedStaging() {
  for (Slot& s : slots_) {
    if (s.done) {
      MPB_CUDA_REPORT(cudaEventSynchronize(s.done));
      MPB_CUDA_REPORT(cudaEventDestroy(s.done));
    }
    if (s.host) MPB_CUDA_REPORT(cudaFreeHost(s.host));
  }
}

void PinnedStaging::wait_for(Slot& s) {
  if (!s.in_flight) return;
  const cudaError_t q = cudaEventQuery(s.done);
  if (q == cudaErrorNotReady) {
    dev_.note_host_sync();  // kSlots uploads are queued ahead of the device: wait for the oldest
    MPB_CUDA_CHECK(cudaEventSynchronize(s.done));
  } else if (q != cudaSuccess) {
    throw_cuda_error(q, "cudaEventQuery(slot.done)", __FILE__, __LINE__);
  }
  s.in_flight = false;
}

void PinnedStaging::grow(size_t bytes) {
  // cudaFreeHost/cudaHostAlloc may synchronise the device: a host sync, and
  // an allocation (counted apart from device memory: this is host memory).
  dev_.note_host_sync();
  for (Slot& s : slots_) {
    wait_for(s);
    if (s.host) MPB_CUDA_CHECK(cudaFreeHost(s.host));
    s.host = nullptr;
    MPB_CUDA_CHECK(cudaHostAlloc(&s.host, bytes, cudaHostAllocDefault));
    dev_.note_pinned_alloc();
    if (!s.done) MPB_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  }
  capacity_ = bytes;
}

void PinnedStaging::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes > kMaxStagedBytes) throw std::logic_error("PinnedStaging::upload: more than kMaxStagedBytes");
  if (bytes > capacity_) grow(bytes);
  Slot& s = slots_[static_cast<size_t>(next_)];
  next_ = (next_ + 1) % kSlots;
  wait_for(s);
  std::memcpy(s.host, host_src, bytes);
  MPB_CUDA_CHECK(cudaMemcpyAsync(dst, s.host, bytes, cudaMemcpyHostToDevice, stream_));
  MPB_CUDA_CHECK(cudaEventRecord(s.done, stream_));
  s.in_flight = true;
}

}  // namespace mpb::cuda
