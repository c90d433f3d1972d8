// CublasLtGemm's state and the parts of one GEMM call, each defined in the
// file of its job:
//   gemm_cublaslt.cu    the public class: handle, workspace, run() (the FP8
//                       layout decision), support/math, the column copy kernel
//   gemm_plan_cache.cpp descriptors, layouts, the heuristic, the plan cache,
//                       cublasLtMatmul itself (plan(), matmul())
//   gemm_epilogues.cpp  which cuBLASLt epilogue a call gets, its bias and aux
//                       buffers, the explicit fallbacks (run_planned,
//                       forward_fallback, run_backward)
//   gemm_fp8.cpp        FP8 operands: quantizing into the TN layout and the
//                       n-padded scratch outputs (quantize_fp8,
//                       run_fp8_through_scratch)
// Internal to those files.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/fp8_gemm_layout.h"
#include "backends/cuda/gemm_cublaslt.h"
#include "backends/cuda/gemm_problem.h"

namespace mpb::cuda {

// A cached plan: what cuBLASLt needs besides the pointers.
struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // cuBLASLt's A (our B), B (our A), C = D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  // false: cuBLASLt has no algorithm for this key ("no algorithm" is cached
  // like a plan, so a refused shape costs one heuristic call, not one per
  // GEMM); `refusal` says what it answered.
  bool has_algo = false;
  std::string refusal;

  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan() {
    if (d) MPB_CUBLAS_REPORT(cublasLtMatrixLayoutDestroy(d));
    if (b) MPB_CUBLAS_REPORT(cublasLtMatrixLayoutDestroy(b));
    if (a) MPB_CUBLAS_REPORT(cublasLtMatrixLayoutDestroy(a));
    if (op) MPB_CUBLAS_REPORT(cublasLtMatmulDescDestroy(op));
  }
};

struct CublasLtGemm::Impl {
  CudaDevice& dev;
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::unordered_map<GemmPlanKey, std::unique_ptr<GemmPlan>, PlanKeyHash> plans;

  explicit Impl(CudaDevice& d) : dev(d) {}
  ~Impl() {
    plans.clear();
    if (handle) MPB_CUBLAS_REPORT(cublasLtDestroy(handle));
  }

  // The plan for p's key: found in the cache, or built (descriptors, layouts,
  // the heuristic) and cached, counted as a plan creation on the device
  // (cell JSON plans_created_in_timed_steps). A key the heuristic refuses is
  // cached with has_algo false: "no algorithm" is an answer, not an error.
  GemmPlan* plan(const GemmProblem& p);
  // Runs p; false (nothing launched) only when allow_missing and cuBLASLt has
  // no algorithm for it: the caller runs its explicit fallback and counts it.
  // A plain GEMM (no epilogue) has no fallback: its refusal throws.
  bool matmul(const GemmProblem& p, bool allow_missing = false);
  // The message of a cublasLtMatmul failure (see gemm_plan_cache.cpp).
  std::string matmul_refusal(const GemmProblem& p, const GemmPlan& pl, cublasStatus_t st, const void* ws);

  // g's outputs (c, pre_act, bias, bias_grad_out, n) and operands' inputs
  // (a, b, their FP8 settings, m, n, k): the same GemmArgs except behind
  // run_fp8_through_scratch, where g's outputs are the n-padded scratch.
  void run_planned(const GemmArgs& g, const GemmArgs& operands, const Fp8GemmLayout* fp8);
  void run_fp8_through_scratch(const GemmArgs& g, const Fp8GemmLayout& fp8);
  void copy_columns(const Tensor& dst, int64_t dst_ld, const Tensor& src, int64_t src_ld, int64_t rows, int64_t cols);
  void zero_bytes(void* begin, size_t bytes);
  void forward_fallback(const GemmArgs& g, const GemmProblem& p);
  void run_backward(const GemmArgs& g, GemmProblem& p);
  void quantize_fp8(const GemmArgs& operands, GemmProblem& p, const Fp8GemmLayout& fp8);
};

}  // namespace mpb::cuda
