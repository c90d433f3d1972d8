// The cuBLASLt plans of CublasLtGemm: descriptors, matrix layouts, the
// preference and the heuristic's algorithm per problem key, cached, and the
// cublasLtMatmul call that runs a problem on its plan.
//
// Strided batch (GemmArgs::batch > 1, the attention products). Every
// layout gets CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = batch and
// CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = its stride in elements, with
// the operand swap of gemm_problem.h: cuBLASLt's A layout (our B) takes stride_b, its B
// layout (our A) stride_a, C = D stride_c. The rules are the Device contract's
// (core/device.h): strides at least the matrix sizes (gaps allowed, never
// written; no overlap or broadcast), operands at least (batch - 1) * stride +
// matrix elements, and no epilogue or pre_act; cuBLASLt adds one limit of its
// own, batch <= INT32_MAX.
// Matrix i starts at element i * stride, so the alignment cuBLASLt may assume
// for an operand is the smaller of the base pointer's and the stride's in
// bytes (batch_alignment). With batch == 1 the strides are ignored (as on the
// CPU), the layouts carry no batch attributes and the plan key is what it was
// before batches existed.
//
// Plans. Descriptors, layouts, the preference and the heuristic's algorithm
// are created once per key (shape, transposes, dtypes, compute, epilogue, bias
// type, aux ld, and the alignment of every pointer: cuBLASLt assumes 256-byte
// alignment unless told otherwise through MIN_ALIGNMENT_*, and
// AlgoGetHeuristic reads the bias/aux pointer values to learn theirs) and
// cached, each creation counted on the device (Device::counters). A key the
// heuristic refuses (NOT_SUPPORTED, INVALID_VALUE, or no result) is cached
// as "no algorithm". Per call only the bias/aux pointers are set on the
// cached descriptor.
#include <cublasLt.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm_cublaslt_impl.h"
#include "backends/cuda/gemm_lt_rules.h"

namespace mpb::cuda {

namespace {

struct PreferenceGuard {
  cublasLtMatmulPreference_t p = nullptr;
  ~PreferenceGuard() {
    if (p) MPB_CUBLAS_REPORT(cublasLtMatmulPreferenceDestroy(p));
  }
};

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value) {
  MPB_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
  MPB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

void set_batch(cublasLtMatrixLayout_t layout, int64_t batch, int64_t stride) {
  const int32_t count = static_cast<int32_t>(batch);  // gemm_cublaslt.cu check_limits: batch <= INT32_MAX
  MPB_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  MPB_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
}

void set_pointers(cublasLtMatmulDesc_t op, const GemmProblem& p) {
  if (p.has_bias()) set_desc(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  if (p.aux != nullptr) set_desc(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
  if (p.fp8) {  // the operand swap: cuBLASLt's A is our B
    set_desc(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.descale_b);
    set_desc(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p.descale_a);
  }
}

// cublasLtMatmulAlgoConfigGetAttribute, checked: the size it reports must be the value's.
template <typename T>
void algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T& value) {
  size_t written = 0;
  MPB_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written));
  if (written != sizeof(value))
    throw DeviceError("gemm: cublasLtMatmulAlgoConfigGetAttribute(" + std::to_string(static_cast<int>(attr)) +
                      ") wrote " + std::to_string(written) + " bytes, expected " + std::to_string(sizeof(value)));
}

// MPB_GEMM_PLAN_LOG=1: one stderr line per plan built (the problem and the
// heuristic's algorithm: id, tile, stages, split-K, reduction scheme), for
// reading which kernels a GPU run used. Read once.
bool plan_log_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("MPB_GEMM_PLAN_LOG");
    return v != nullptr && v[0] != '\0' && v[0] != '0';
  }();
  return on;
}

static_assert(CUBLASLT_REDUCTION_SCHEME_INPLACE == kLtReductionInplace &&
                  CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE == kLtReductionComputeType &&
                  CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE == kLtReductionOutputType &&
                  CUBLASLT_REDUCTION_SCHEME_MASK == kLtReductionAll,
              "gemm_lt_rules.h's reduction scheme bits are cublasLt.h's");

}  // namespace

GemmPlan* CublasLtGemm::Impl::plan(const GemmProblem& p) {
  const GemmPlanKey key = p.key();
  auto it = plans.find(key);
  if (it != plans.end()) return it->second.get();

  dev.note_plan_created();
  auto built = std::make_unique<GemmPlan>();
  MPB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&built->op, compute_type(p.compute), CUDA_R_32F));
  const cublasOperation_t op_a = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our B
  const cublasOperation_t op_b = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_desc(built->op, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set_desc(built->op, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  set_desc(built->op, CUBLASLT_MATMUL_DESC_EPILOGUE, p.epilogue);
  if (p.has_bias())
    set_desc(built->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda_type(p.bias_dtype)));
  if (p.fast_accum) set_desc(built->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<int8_t>(1));
  if (p.aux != nullptr) set_desc(built->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.aux_ld);
  set_pointers(built->op, p);  // the heuristic reads their alignment

  const uint64_t m = static_cast<uint64_t>(p.m), n = static_cast<uint64_t>(p.n), k = static_cast<uint64_t>(p.k);
  // cuBLASLt A = our B: column-major [n,k] (ld n) or, transposed storage, [k,n] (ld k).
  MPB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&built->a, p.b_type(), p.trans_b ? k : n, p.trans_b ? n : k,
                                              static_cast<int64_t>(p.trans_b ? k : n)));
  // cuBLASLt B = our A: column-major [k,m] (ld k) or, transposed storage, [m,k] (ld m).
  MPB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&built->b, p.a_type(), p.trans_a ? m : k, p.trans_a ? k : m,
                                              static_cast<int64_t>(p.trans_a ? m : k)));
  // C = D: column-major [n,m], ld n.
  MPB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&built->d, cuda_type(p.d_dtype), n, m, static_cast<int64_t>(n)));
  if (p.batched()) {  // the operand swap: cuBLASLt's A is our B, its B our A
    set_batch(built->a, p.batch, p.stride_b);
    set_batch(built->b, p.batch, p.stride_a);
    set_batch(built->d, p.batch, p.stride_c);
  }

  PreferenceGuard pref;
  MPB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.align_b());
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.align_a());
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.align_d());
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.align_d());
  // Split-K partial sums of a 16-bit D stay fp32 (gemm_lt_rules.h reduction_scheme_mask).
  const uint32_t reduction_mask = reduction_scheme_mask(p.d_dtype);
  set_pref(pref.p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reduction_mask);

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, built->op, built->a, built->b, built->d, built->d,
                                                           pref.p, 1, &result, &found);
  // NOT_SUPPORTED and INVALID_VALUE are how the heuristic refuses an
  // epilogue at some shapes (PyTorch's cuBLASLt path avoids bias
  // epilogues for m == 1 or n == 1 because of INVALID_VALUE): no
  // algorithm. Any other failure is an error.
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE ||
      (st == CUBLAS_STATUS_SUCCESS && found <= 0)) {
    built->refusal = "gemm: cuBLASLt has no algorithm for " + p.describe() + " (cublasLtMatmulAlgoGetHeuristic: " +
                    cublasLtGetStatusString(st) + ", " + std::to_string(found) + " results) [" + p.describe_lt() + "]";
    return plans.emplace(key, std::move(built)).first->second.get();
  }
  if (st != CUBLAS_STATUS_SUCCESS) throw_cublas_error(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  if (result.state != CUBLAS_STATUS_SUCCESS)
    throw DeviceError("gemm: cuBLASLt heuristic result not usable for " + p.describe() + ": " +
                      cublasLtGetStatusString(result.state));
  if (result.workspaceSize > kWorkspaceBytes)
    throw DeviceError("gemm: cuBLASLt algorithm wants " + std::to_string(result.workspaceSize) +
                      " bytes of workspace for " + p.describe());
  int32_t splits = 1;
  uint32_t scheme = 0;
  algo_config(result.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, splits);
  algo_config(result.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, scheme);
  if (plan_log_enabled()) {
    int32_t id = 0;
    uint32_t tile = 0, stages = 0;
    algo_config(result.algo, CUBLASLT_ALGO_CONFIG_ID, id);
    algo_config(result.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, tile);
    algo_config(result.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, stages);
    std::fprintf(stderr, "[mpb gemm plan] %s: algo %d tile %u stages %u splitK %d reduction scheme %u (mask %u) workspace %zu\n",
                 p.describe().c_str(), id, tile, stages, splits, scheme, reduction_mask, result.workspaceSize);
  }
  if (!reduction_honours_mask(reduction_mask, splits, scheme))
    throw DeviceError("gemm: cuBLASLt returned split-K " + std::to_string(splits) + " with reduction scheme " +
                      std::to_string(scheme) + " outside the requested mask " + std::to_string(reduction_mask) +
                      " for " + p.describe());
  built->algo = result.algo;
  built->workspace = result.workspaceSize;
  built->has_algo = true;
  return plans.emplace(key, std::move(built)).first->second.get();
}

bool CublasLtGemm::Impl::matmul(const GemmProblem& p, bool allow_missing) {
  GemmPlan* pl = plan(p);
  if (!pl->has_algo) {
    if (allow_missing) return false;
    throw DeviceError(pl->refusal);
  }
  set_pointers(pl->op, p);
  void* ws = workspace.tensor().data;
  const cublasStatus_t st = cublasLtMatmul(handle, pl->op, &p.alpha, p.b, pl->a, p.a, pl->b, &p.beta, p.d, pl->d, p.d,
                                           pl->d, &pl->algo, ws, kWorkspaceBytes, dev.stream());
  if (st != CUBLAS_STATUS_SUCCESS) throw DeviceError(matmul_refusal(p, *pl, st, ws));
  return true;
}

// cublasLtMatmul refused (or failed) the algorithm its heuristic gave for
// this plan: the message names every attribute that was set (describe_lt),
// the algorithm and what cublasLtMatmulAlgoCheck says of it, so that one
// line of a GPU run's log says what the refusal is about.
std::string CublasLtGemm::Impl::matmul_refusal(const GemmProblem& p, const GemmPlan& pl, cublasStatus_t st,
                                               const void* ws) {
  std::string msg = std::string(__FILE__) + ": cublasLtMatmul failed: " + cublasLtGetStatusName(st) + " (" +
                    std::to_string(static_cast<int>(st)) + "): " + cublasLtGetStatusString(st) +
                    ", with the heuristic's algorithm for " + p.describe() + " [" + p.describe_lt() + "]";
  int32_t algo_id = -1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&pl.algo, CUBLASLT_ALGO_CONFIG_ID, &algo_id, sizeof(algo_id), &written) ==
      CUBLAS_STATUS_SUCCESS)
    msg += "; algo id " + std::to_string(algo_id);
  msg += ", heuristic workspace " + std::to_string(pl.workspace) + " of " + std::to_string(kWorkspaceBytes) +
         " bytes at align " + std::to_string(alignment_of(ws));
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t cs = cublasLtMatmulAlgoCheck(handle, pl.op, pl.a, pl.b, pl.d, pl.d, &pl.algo, &check);
  msg += std::string("; cublasLtMatmulAlgoCheck: ") + cublasLtGetStatusName(cs);
  if (cs == CUBLAS_STATUS_SUCCESS)
    msg += std::string(", state ") + cublasLtGetStatusName(check.state) + ", workspace " +
           std::to_string(check.workspaceSize);
  return msg;
}

}  // namespace mpb::cuda
