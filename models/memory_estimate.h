// Memory estimates: what a model, a data source or the trainer will allocate,
// from its configuration alone, before anything is built. Each estimate
// function sits next to the allocations it mirrors (estimate_mlp_memory in
// mlp.cpp, estimate_bert_memory in bert_layout.cpp, the data sources' in
// their files, the trainer's in train/trainer.cpp), so that a change to one
// is a change beside the other; tests/models/test_memory_estimate.cpp
// compares them with what the MemoryTracker measures.
//
// Pure arithmetic in double: a configuration asking for 2^31 classes gives
// an estimate of terabytes, never an integer overflow.
#pragma once

#include <array>

#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "core/precision.h"

namespace mpb {

struct MemoryEstimate {
  // Bytes per MemCategory, as the device's MemoryTracker counts them: the peak
  // of each category. Their sum bounds the tracker's peak total from above
  // (the categories need not peak together).
  std::array<double, kMemCategoryCount> device{};
  // Host memory the tracker never sees: data sets (a teacher network, a
  // Markov chain, a text file), the host batches, the run record.
  double host = 0;
  // Parameters (elements), for what sizes its buffers by them (the optimizer).
  double param_count = 0;

  double& operator[](MemCategory c) { return device[static_cast<size_t>(c)]; }
  double operator[](MemCategory c) const { return device[static_cast<size_t>(c)]; }
  double device_total() const;
  double total() const { return device_total() + host; }
  // Adds every category, the host bytes and the parameter counts.
  MemoryEstimate& operator+=(const MemoryEstimate& other);
};

// Bytes of one element of `t` (as a double, for the estimates).
double dtype_bytes(DType t);

// A ParamStore of `numel` parameters under `policy` (models/param_store.h):
// master weights, half parameters, the compute copy, the gradients, and O3's
// fp32 staging buffer for the initial upload (workspace, freed at once).
MemoryEstimate estimate_param_store(double numel, const PrecisionPolicy& policy);

// GEMM operand conversion (workspace): the CPU backend widens non-fp32 GEMM
// operands to fp32 and computes into an fp32 buffer when C is not fp32
// (backends/cpu/gemm_onednn.cpp, one grow-only buffer per operand). Bounded
// by three fp32 copies of the largest matrix any of the cell's GEMMs reads or
// writes, plus an fp32 copy of the widest 16-bit bias an epilogue widens (the
// compute copy's bias: widest_output elements); nothing when every GEMM is fp32
// in and out. The CUDA backend's own workspace (cuBLASLt's fixed 32 MiB) is the
// backend's, not the cell's.
double gemm_conversion_workspace(const PrecisionPolicy& policy, double largest_gemm_matrix, double widest_output);

}  // namespace mpb
