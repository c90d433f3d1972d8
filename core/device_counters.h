// What a Device did that a training step must not do once warmed up (issue
// 10): make the host wait for the device, create a GEMM plan, or run a GEMM
// epilogue through its fallback. Allocations are the MemoryTracker's count
// (core/memory_tracker.h). The trainer takes the difference around each step
// (train/trainer.cpp); docs/RESULTS.md has the cell JSON fields.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace mpb {

struct DeviceCounters {
  // Calls through which the host waits for the device's results: synchronize(),
  // download(), every op returning a host value (losses, count_correct, stats,
  // exponent_histogram), reading a timer, and any wait a backend makes inside
  // an otherwise asynchronous call (CUDA: a scratch buffer that must grow
  // while kernels may still read it, a pinned staging buffer still in flight).
  int64_t host_syncs = 0;
  // Plans built: cuBLASLt descriptors + heuristic and cuDNN SDPA graphs
  // (CUDA), oneDNN matmul primitives (CPU). Both backends cache them; a miss
  // is a creation.
  int64_t plans_created = 0;
  // Pinned host buffers allocated (CUDA upload staging, backends/cuda/
  // pinned_staging.h): host memory, so not in the MemoryTracker's per-category
  // bytes, but an allocation a timed step must not make all the same.
  int64_t pinned_allocs = 0;
  // GEMMs whose fused epilogue the library refused ("no algorithm"), run as a
  // plain GEMM plus the bias/activation kernels instead, by epilogue name
  // ("BIAS", "RELU_BIAS", "GELU_AUX_BIAS", "DGELU_BGRAD", ...). Never silent.
  std::map<std::string, int64_t> gemm_fallbacks;
  // Fused attention calls (attention_forward and attention_backward each
  // count one) by the implementation that ran them: "cudnn_sdpa" (the CUDA
  // backend through cuDNN's SDPA graphs, fp16/bf16 on shapes cuDNN accepts),
  // "cuda_kernel" (the CUDA backend's hand-written kernel: fp32, shapes cuDNN
  // refuses, builds without cudnn_frontend), "cpu_kernel" (the CPU backend).
  // The cell JSON's attention_impl (runner/measure/step_counters.h).
  std::map<std::string, int64_t> attention_impls;
};

}  // namespace mpb
