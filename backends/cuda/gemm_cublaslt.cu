// GEMM through cuBLASLt: CublasLtGemm's handle and 32 MiB workspace
// (allocated once, MemCategory::Workspace), run() (checks the backend's
// limits and, for FP8 operands, decides the layout: fp8_gemm_layout.h),
// what the device reports about its GEMM math, and the column copy kernel
// the other parts use. The parts, one job each (gemm_cublaslt_impl.h):
//   gemm_problem.h       row-major to column-major, the types table, the
//                        problem and its plan key
//   gemm_lt_rules.h      the pure decisions (alignments, D types, GELU aux),
//                        tested on the CPU
//   gemm_plan_cache.cpp  strided batches, plans and the heuristic, the matmul call
//   gemm_epilogues.cpp   bias types, GELU aux, backward epilogues, fallbacks
//   gemm_fp8.cpp         FP8 operands and n-padded outputs
#include "backends/cuda/gemm_cublaslt.h"

#include <cublasLt.h>

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/fp8_gemm_layout.h"
#include "backends/cuda/gemm_cublaslt_impl.h"
#include "backends/cuda/gemm_lt_rules.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/dtype_io.h"

namespace mpb::cuda {

namespace {

using scalar::load_f32;
using scalar::store_f32;

// dst[r * dst_ld + c] = src[r * src_ld + c] for r < rows, c < cols (dtype
// conversion included): the GELU aux into pre_act, and the FP8 path's
// matrices into and out of their n-padded scratch.
__global__ void copy_columns_kernel(void* dst, DType dt, int64_t dst_ld, const void* src, DType st, int64_t src_ld,
                                    int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t r = i / cols, c = i - r * cols;
    store_f32(dst, dt, r * dst_ld + c, load_f32(src, st, r * src_ld + c));
  }
}

// Backend limit (the argument rules are core/device.h's, checked by
// Device::gemm): cuBLASLt's batch count is an int32.
void check_limits(const GemmArgs& g) {
  require(g.batch <= 0x7FFFFFFF, "gemm", "batch exceeds cuBLASLt's int32 batch count");
}

}  // namespace

CublasLtGemm::CublasLtGemm(CudaDevice& device) : impl_(std::make_unique<Impl>(device)) {
  MPB_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  impl_->workspace =
      device.alloc(Shape{static_cast<int64_t>(kWorkspaceBytes / sizeof(float))}, DType::F32, MemCategory::Workspace);
}

CublasLtGemm::~CublasLtGemm() = default;

size_t CublasLtGemm::cached_plans() const { return impl_->plans.size(); }

bool CublasLtGemm::runs(GemmCompute c) const {
  // Tensor-core TF32, fp16 and bf16 with fp32 accumulation: sm_80 and newer
  // (CudaDevice refuses older GPUs anyway: no kernel image for them).
  if (c == GemmCompute::F32) return true;
  return impl_->dev.cc_major() >= 8;
}

std::string CublasLtGemm::math(GemmCompute c) {
  // The compute_type() run() asks for, and the operand types of the table in gemm_problem.h.
  const std::string compute =
      compute_type(c) == CUBLAS_COMPUTE_32F_FAST_TF32 ? "CUBLAS_COMPUTE_32F_FAST_TF32" : "CUBLAS_COMPUTE_32F";
  const char* operands = c == GemmCompute::F16 ? "A/B CUDA_R_16F" : c == GemmCompute::BF16 ? "A/B CUDA_R_16BF"
                                                                                           : "A/B CUDA_R_32F";
  return "cublasLt " + compute + ", " + operands + ", scale CUDA_R_32F";
}

void CublasLtGemm::run(const GemmArgs& g) {
  check_limits(g);
  if (!g.fp8_a.enabled) {
    impl_->run_planned(g, g, nullptr);
    return;
  }
  // D is C, or pre_act where the activation is split off: both must be aligned.
  const uint32_t c_align = alignment_of(g.c.data);
  const uint32_t pre_align = g.pre_act.empty() ? c_align : alignment_of(g.pre_act.data);
  const Fp8GemmLayout fp8 = fp8_gemm_layout(g.m, g.n, g.k, g.c.dtype, g.beta, c_align < pre_align ? c_align : pre_align,
                                            g.fp8_a.format, g.fp8_b.format);
  if (fp8.scratch_output) {
    impl_->run_fp8_through_scratch(g, fp8);
  } else {
    impl_->run_planned(g, g, &fp8);
  }
}

void CublasLtGemm::Impl::copy_columns(const Tensor& dst, int64_t dst_ld, const Tensor& src, int64_t src_ld,
                                      int64_t rows, int64_t cols) {
  const int64_t count = rows * cols;
  copy_columns_kernel<<<dev.elementwise_grid(count), kThreads, 0, dev.stream()>>>(dst.data, dst.dtype, dst_ld,
                                                                                   src.data, src.dtype, src_ld, rows,
                                                                                   cols);
  MPB_CHECK_LAUNCH("copy_columns_kernel");
}

void CublasLtGemm::Impl::zero_bytes(void* begin, size_t bytes) {
  if (bytes > 0) MPB_CUDA_CHECK(cudaMemsetAsync(begin, 0, bytes, dev.stream()));
}

std::string cublaslt_version_string() {
  const size_t v = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

}  // namespace mpb::cuda
