#include "models/memory_estimate.h"

namespace mpb {

double MemoryEstimate::device_total() const {
  double sum = 0;
  for (const double bytes : device) sum += bytes;
  return sum;
}

MemoryEstimate& MemoryEstimate::operator+=(const MemoryEstimate& other) {
  for (size_t i = 0; i < device.size(); ++i) device[i] += other.device[i];
  host += other.host;
  param_count += other.param_count;
  return *this;
}

double dtype_bytes(DType t) { return static_cast<double>(dtype_size(t)); }

// Mirrors ParamStore::allocate and ParamStore::upload (models/param_store.cpp).
MemoryEstimate estimate_param_store(double numel, const PrecisionPolicy& policy) {
  MemoryEstimate e;
  e.param_count = numel;
  const bool half_params = policy.param != DType::F32;
  const bool master = !half_params || policy.master_weights;
  if (master) e[MemCategory::Params] += numel * 4;
  if (half_params) e[MemCategory::Params] += numel * dtype_bytes(policy.param);
  if (policy.compute != policy.param) e[MemCategory::Params] += numel * dtype_bytes(policy.compute);
  e[MemCategory::Grads] += numel * dtype_bytes(policy.grad());
  if (!master) e[MemCategory::Workspace] += numel * 4;  // the upload's fp32 staging
  return e;
}

double gemm_conversion_workspace(const PrecisionPolicy& policy, double largest_gemm_matrix, double widest_output) {
  const bool converts = policy.gemm != GemmCompute::F32 || policy.compute != DType::F32;
  // The bias slot (gemm_onednn.cpp's workspace 3) was missing: 1,200 bytes over
  // on BERT-tiny amp_bf16 where bf16 is emulated (AVX2, 2026-11-29).
  return converts ? 3 * largest_gemm_matrix * 4 + widest_output * 4 : 0.0;
}

}  // namespace mpb
