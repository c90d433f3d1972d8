// GEMM on the GPU through cuBLASLt (see gemm_cublaslt_impl.h for its parts: the row-major to
// column-major mapping, the epilogue and bias-type rules and the plan cache).
#pragma once

#include <memory>
#include <string>

#include "core/device.h"

namespace mpb::cuda {

class CudaDevice;

class CublasLtGemm {
 public:
  // Creates the cuBLASLt handle and the 32 MiB workspace (MemCategory::Workspace).
  explicit CublasLtGemm(CudaDevice& device);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  void run(const GemmArgs& args);
  bool runs(GemmCompute c) const;  // natively on this GPU (CudaDevice::supports turns false into the reason)
  // "cublasLt CUBLAS_COMPUTE_32F_FAST_TF32, A/B CUDA_R_32F" (Device::gemm_math).
  static std::string math(GemmCompute c);
  size_t cached_plans() const;
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "13.1.0" from cublasLtGetVersion().
std::string cublaslt_version_string();

}  // namespace mpb::cuda
