// GEMM through cuBLASLt.
//
// Row-major to column-major. cuBLASLt is column-major; a row-major [r,c]
// matrix is the column-major [c,r] matrix with ld = c, i.e. its transpose.
// So the row-major C[m,n] = op(A) op(B) is computed as the column-major
//   C^T[n,m] = op(B)^T op(A)^T
// with cuBLASLt's "A" = our B and "B" = our A:
//   - B stored [k,n] (no trans_b) is column-major [n,k], ld n: op N.
//     B stored [n,k] (trans_b)    is column-major [k,n], ld k: op T.
//   - A stored [m,k] (no trans_a) is column-major [k,m], ld k: op N.
//     A stored [k,m] (trans_a)    is column-major [m,k], ld m: op T.
//   - C/D: column-major [n,m], ld n.
// The bias vector (one value per column of row-major C) is one value per ROW
// of C^T, which is what cuBLASLt's bias epilogues broadcast (length = rows of
// D = n). The GELU aux output has D's shape: column-major [n,m] with its own
// ld, i.e. row-major [m, ld] in our terms.
//
// Types (cuBLASLt's supported combinations, all with fp32 scale type):
//   F32  : CUBLAS_COMPUTE_32F,           A/B/C/D CUDA_R_32F
//   TF32 : CUBLAS_COMPUTE_32F_FAST_TF32, A/B/C/D CUDA_R_32F
//   F16  : CUBLAS_COMPUTE_32F,           A/B CUDA_R_16F,  C/D CUDA_R_16F or CUDA_R_32F
//   BF16 : CUBLAS_COMPUTE_32F,           A/B CUDA_R_16BF, C/D CUDA_R_16BF or CUDA_R_32F
//
// Bias data type. cublasLt.h (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE): "Bias
// vector elements are the same type as the elements of output matrix (Dtype)"
// except for IMMA (int8) and fp8 kernels. Our bias has the parameters' dtype
// (any float type, GemmArgs::bias), so BIAS_DATA_TYPE is always D's type and:
//   bias dtype == D's, 16-byte aligned -> used as is.
//   otherwise -> converted (Device::cast: exact when widening, round to
//                nearest even when narrowing) into a 256-byte aligned scratch
//                vector of D's type. Per (bias, D):
//     fp16/bf16 bias, fp32 D  -> widened exactly (what the CPU backend does:
//                                oneDNN gets the bias widened to fp32).
//     fp32 bias, fp16/bf16 D  -> rounded to D's type before it is added (in
//                                fp32) to the accumulator: at most half an ulp
//                                of the 16-bit format, below the rounding of
//                                the 16-bit output itself. The CPU adds it in
//                                fp32 unrounded.
//     fp16 bias, bf16 D or    -> rounded the same way (bf16 -> fp16 can also
//     bf16 bias, fp16 D          overflow beyond 65504 or lose bf16's
//                                smallest values); precision policies never
//                                mix the two 16-bit types (core/precision.cpp).
//   A misaligned bias pointer (a view into a packed parameter arena) is
//   copied to scratch too (same dtype: a plain copy).
//
// GELU aux (pre_act with Epilogue::BiasGelu). CUBLASLT_EPILOGUE_GELU_AUX_BIAS
// stores the GELU input (after the bias) to EPILOGUE_AUX_POINTER with
// EPILOGUE_AUX_LD, which "must be divisible by 8 and be no less than the
// number of rows in the output matrix" (= n); its element type defaults to
// D's type. pre_act is used directly when n % 8 == 0, pre_act has C's dtype,
// is 16-byte aligned and does not alias C; otherwise cuBLASLt writes the aux
// into scratch with ld = n rounded up to 8, and a kernel copies it into
// pre_act (dropping the padding, converting the dtype). If pre_act aliases C,
// or with BiasRelu (whose aux is a bit mask, not values), the GEMM runs with
// the BIAS epilogue into pre_act and the activation kernel computes C from
// pre_act, as the CPU backend does.
//
// Backward epilogues (Epilogue::DGelu, DGeluBGrad; contract in core/device.h).
// DGelu -> CUBLASLT_EPILOGUE_DGELU, DGeluBGrad -> CUBLASLT_EPILOGUE_DGELU_BGRAD,
// with EPILOGUE_AUX_POINTER = pre_act (the forward GELU input, read) and
// EPILOGUE_AUX_LD = n. The aux rules are the forward GELU_AUX path's: pre_act
// must have C's dtype (the aux type defaults to D's), n % 8 == 0 (the ld) and
// 16-byte alignment. The bias gradient: DGELU_BGRAD writes one value per row
// of the column-major D [n,m] (reduced over its m columns), i.e. one per
// column of our row-major C summed over its m rows: bias_grad_out [n], in
// BIAS_DATA_TYPE = D's dtype
// (written through BIAS_POINTER). bias_grad_out is used directly when it has
// D's dtype and is 16-byte aligned, through an aligned scratch vector (then
// copied) when it only is misaligned. Explicit fallback, same math (never a
// change of semantics): when pre_act does not meet the aux rules, or
// cuBLASLt's heuristic has no algorithm for the fused epilogue, the GEMM runs
// with no epilogue into C, then the activation_backward kernel (C = C *
// gelu'(pre_act), the CPU backend's exact sequence) and, for DGeluBGrad, the
// bias_grad kernel (Overwrite). When bias_grad_out's dtype differs from D's
// (say fp32 bias gradients of a bf16 C) the GEMM uses CUBLASLT_EPILOGUE_DGELU
// and the bias_grad kernel sums the stored C in fp32 into bias_grad_out,
// rather than rounding the gradient through D's 16-bit type.
// Not mapped: BGRADA/BGRADB (see core/device.h for why BGradB is not offered).
//
// Strided batch (GemmArgs::batch > 1, the attention products). Every
// layout gets CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = batch and
// CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = its stride in elements, with
// the operand swap above: cuBLASLt's A layout (our B) takes stride_b, its B
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
//
// Forward epilogue fallback. When the heuristic refuses BIAS, RELU_BIAS,
// GELU_BIAS or GELU_AUX_BIAS (m == 1 or n == 1 are known cases), the GEMM
// runs without epilogue and the add_bias / activation / cast kernels do the
// rest (Impl::forward_fallback); each such call is counted by epilogue name
// (DeviceCounters::gemm_fallbacks, the cell JSON's gemm_fallbacks). The
// backward DGELU/DGELU_BGRAD refusals below are counted the same way. The 32 MiB workspace is allocated once (MemCategory::Workspace).
//
// FP8 operands (GemmArgs::fp8_a/fp8_b, sm_89 and newer: CudaDevice::
// fp8_gemm_support). cuBLASLt's FP8 matmuls take A and B as
// CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2 (not both E5M2, which the models never
// ask for: gradients are E5M2, inputs and weights E4M3) in its "TN" layout
// only: its A transposed, its B not, i.e. both operands with the reduction
// index contiguous, and leading dimensions that are multiples of 16 bytes.
// Both operands are quantized anyway (fp8_quantize.cu, core/fp8.h's per
// element code, the CPU emulation's), so the quantizing pass writes them in
// that layout: our A as [m, kp], our B as [n, kp] (transposed where they are
// stored the other way), kp = k rounded up to 16 with zero codes in the
// pad (exact zeros: the sums do not change). The problem is then the
// trans_a = false, trans_b = true GEMM of the codes with k = kp, and
// CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER point at 1 / scale of each operand
// (cuBLASLt multiplies the fp32 accumulator by both, exact for power-of-two
// scales): D = alpha * (qa / sa) . (qb / sb) + beta * C, the contract of
// core/device.h. Everything after the operands (C/D types, epilogues and
// their fallbacks, the plan cache keyed also by the two formats) is the
// path above, with three differences decided by fp8_gemm_layout()
// (fp8_gemm_layout.h, proven on the CPU by tests/backends/cuda/test_fp8_gemm_layout.cpp):
//   - Output width. D's rows (our n) must be a multiple of 16 as well: B's
//     codes are written [np, kp] with zero rows beyond n, and when n % 16 != 0
//     (or C/pre_act is not 16-byte aligned) run_fp8_through_scratch runs the
//     GEMM on n-padded scratch outputs (kScratchFp8Out/PreAct/Bias: C copied
//     in first when beta != 0, pre_act copied in for the backward epilogues,
//     the bias zero-padded) and copies the first n columns back.
//   - Bias type. cuBLASLt's FP8 kernels take a bf16 bias for an fp32 D (D's
//     type otherwise), so the bias is cast to bf16 (round to nearest even,
//     one n-element launch per call into kScratchGemmBias) and the fused
//     epilogue adds that rounded value: within 2^-9 relative of the fp32
//     bias, which the tests' reference rounds the same way. DGELU_BGRAD is
//     fused only when bias_grad_out has that type (else DGELU + bias_grad).
//   - Accumulation. Forward GEMMs (both operands E4M3) set FAST_ACCUM, as
//     Transformer Engine's fprop does: the partial sums stay in the tensor
//     cores' accumulator instead of being promoted to fp32 every few k-blocks.
//     The backward GEMMs (an E5M2 gradient operand) keep the default
//     promotion, closer to the CPU's fp32 sums.
#include "backends/cuda/gemm_cublaslt.h"

#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/fp8_gemm_layout.h"
#include "backends/cuda/fp8_quantize.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/plan_key.h"
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

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: throw std::invalid_argument("gemm: integer tensors are not GEMM operands");
  }
}

cudaDataType_t fp8_cuda_type(Fp8Format f) { return f == Fp8Format::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

cublasComputeType_t compute_type(GemmCompute c) {
  return c == GemmCompute::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

const char* epilogue_name(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "DEFAULT";
    case CUBLASLT_EPILOGUE_BIAS: return "BIAS";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "RELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_DGELU: return "DGELU";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "DGELU_BGRAD";
    default: return "?";
  }
}

// Largest power of two (<= 256) dividing the address: what MIN_ALIGNMENT_*
// preferences are about.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 1;
  while (al < 256 && a % (2 * al) == 0) al *= 2;
  return al;
}

// The alignment every matrix of a strided batch has: the base pointer's and
// the stride's (in bytes), whichever is smaller. batch == 1: the pointer's.
uint32_t batch_alignment(const void* p, int64_t batch, int64_t stride, DType t) {
  uint32_t al = alignment_of(p);
  if (batch > 1) {
    const uint64_t bytes = static_cast<uint64_t>(stride) * dtype_size(t);
    uint32_t sal = 1;
    while (sal < 256 && bytes % (2 * sal) == 0) sal *= 2;
    al = al < sal ? al : sal;
  }
  return al;
}

bool d_type_allowed(GemmCompute c, DType d) {
  switch (c) {
    case GemmCompute::F32:
    case GemmCompute::TF32: return d == DType::F32;
    case GemmCompute::F16: return d == DType::F32 || d == DType::F16;
    case GemmCompute::BF16: return d == DType::F32 || d == DType::BF16;
  }
  return false;
}

// Backend limit (the argument rules are core/device.h's, checked by
// Device::gemm): cuBLASLt's batch count is an int32.
void check_limits(const GemmArgs& g) {
  require(g.batch <= 0x7FFFFFFF, "gemm", "batch exceeds cuBLASLt's int32 batch count");
}

using PlanKey = PlanKeyWords<20>;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // cuBLASLt's A (our B), B (our A), C = D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  // false: cuBLASLt has no algorithm for this key ("no algorithm" is cached
  // like a plan, so a refused shape costs one heuristic call, not one per
  // GEMM); `refusal` says what it answered.
  bool has_algo = false;
  std::string refusal;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) MPB_CUBLAS_REPORT(cublasLtMatrixLayoutDestroy(d));
    if (b) MPB_CUBLAS_REPORT(cublasLtMatrixLayoutDestroy(b));
    if (a) MPB_CUBLAS_REPORT(cublasLtMatrixLayoutDestroy(a));
    if (op) MPB_CUBLAS_REPORT(cublasLtMatmulDescDestroy(op));
  }
};

struct PreferenceGuard {
  cublasLtMatmulPreference_t p = nullptr;
  ~PreferenceGuard() {
    if (p) MPB_CUBLAS_REPORT(cublasLtMatmulPreferenceDestroy(p));
  }
};

// One call's resolved problem (after choosing output, bias and aux buffers).
struct Problem {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  GemmCompute compute = GemmCompute::F32;
  DType ab = DType::F32;
  const void* a = nullptr;  // our A (cuBLASLt's B)
  const void* b = nullptr;  // our B (cuBLASLt's A)
  void* d = nullptr;        // C = D
  DType d_dtype = DType::F32;
  float alpha = 1.0f, beta = 0.0f;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // in bias_dtype when set
  DType bias_dtype = DType::F32;  // D's, or for FP8 fp8_bias_dtype(D's): BIAS_DATA_TYPE
  void* aux = nullptr;
  int64_t aux_ld = 0;
  // Strided batch: 1, or > 1 with the element strides of our A, B and C.
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  // FP8 codes in a and b (see the top of the file): their formats and the
  // device floats holding 1 / scale of each.
  bool fp8 = false;
  Fp8Format fp8_a = Fp8Format::E4M3, fp8_b = Fp8Format::E4M3;
  const float* descale_a = nullptr;
  const float* descale_b = nullptr;
  bool fast_accum = false;  // CUBLASLT_MATMUL_DESC_FAST_ACCUM (FP8 forward GEMMs: fp8_gemm_layout.h)

  bool has_bias() const { return bias != nullptr; }
  cudaDataType_t a_type() const { return fp8 ? fp8_cuda_type(fp8_a) : cuda_type(ab); }
  cudaDataType_t b_type() const { return fp8 ? fp8_cuda_type(fp8_b) : cuda_type(ab); }
  bool batched() const { return batch > 1; }
  // The alignments cuBLASLt may assume (of every matrix of a batch).
  uint32_t align_a() const { return batch_alignment(a, batch, stride_a, ab); }
  uint32_t align_b() const { return batch_alignment(b, batch, stride_b, ab); }
  uint32_t align_d() const { return batch_alignment(d, batch, stride_c, d_dtype); }
  PlanKey key() const {
    return PlanKey{m,
                   n,
                   k,
                   (trans_a ? 1 : 0) | (trans_b ? 2 : 0),
                   static_cast<int64_t>(compute),
                   static_cast<int64_t>(ab),
                   static_cast<int64_t>(d_dtype),
                   static_cast<int64_t>(epilogue),
                   has_bias() ? 1 + static_cast<int64_t>(bias_dtype) : 0,
                   aux_ld,
                   align_a(),
                   align_b(),
                   align_d(),
                   has_bias() ? alignment_of(bias) : 0,
                   aux ? alignment_of(aux) : 0,
                   fp8 ? 1 + static_cast<int64_t>(fp8_a) * 2 + static_cast<int64_t>(fp8_b) + (fast_accum ? 4 : 0) : 0,
                   batched() ? batch : 1,
                   batched() ? stride_a : 0,
                   batched() ? stride_b : 0,
                   batched() ? stride_c : 0};
  }
  std::string describe() const {
    std::ostringstream s;
    s << "m=" << m << " n=" << n << " k=" << k << " trans_a=" << trans_a << " trans_b=" << trans_b
      << " compute=" << gemm_compute_name(compute) << " A/B=" << dtype_name(ab) << " C=" << dtype_name(d_dtype)
      << " epilogue=" << epilogue_name(epilogue) << " aux_ld=" << aux_ld << " align(A,B,C)=" << align_a() << ","
      << align_b() << "," << align_d();
    if (batched())
      s << " batch=" << batch << " strides(A,B,C)=" << stride_a << "," << stride_b << "," << stride_c;
    if (fp8)
      s << " FP8 codes A=" << (fp8_a == Fp8Format::E4M3 ? "E4M3" : "E5M2")
        << " B=" << (fp8_b == Fp8Format::E4M3 ? "E4M3" : "E5M2") << " (k padded to 16)"
        << (fast_accum ? " FAST_ACCUM" : "");
    if (has_bias()) s << " bias=" << dtype_name(bias_dtype);
    return s.str();
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
  const int32_t count = static_cast<int32_t>(batch);  // check_limits: batch <= INT32_MAX
  MPB_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
  MPB_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
}

void set_pointers(cublasLtMatmulDesc_t op, const Problem& p) {
  if (p.has_bias()) set_desc(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
  if (p.aux != nullptr) set_desc(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, p.aux);
  if (p.fp8) {  // the operand swap: cuBLASLt's A is our B
    set_desc(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.descale_b);
    set_desc(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p.descale_a);
  }
}

}  // namespace

struct CublasLtGemm::Impl {
  CudaDevice& dev;
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;

  explicit Impl(CudaDevice& d) : dev(d) {}
  ~Impl() {
    plans.clear();
    if (handle) MPB_CUBLAS_REPORT(cublasLtDestroy(handle));
  }

  // The plan for p's key: found in the cache, or built (descriptors, layouts,
  // the heuristic) and cached, counted as a plan creation on the device
  // (cell JSON plans_created_in_timed_steps). A key the heuristic refuses is
  // cached with has_algo false: "no algorithm" is an answer, not an error.
  Plan* plan(const Problem& p) {
    const PlanKey key = p.key();
    auto it = plans.find(key);
    if (it != plans.end()) return it->second.get();

    dev.note_plan_created();
    auto plan = std::make_unique<Plan>();
    MPB_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, compute_type(p.compute), CUDA_R_32F));
    const cublasOperation_t op_a = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our B
    const cublasOperation_t op_b = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, p.epilogue);
    if (p.has_bias())
      set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda_type(p.bias_dtype)));
    if (p.fast_accum) set_desc(plan->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<int8_t>(1));
    if (p.aux != nullptr) set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, p.aux_ld);
    set_pointers(plan->op, p);  // the heuristic reads their alignment

    const uint64_t m = static_cast<uint64_t>(p.m), n = static_cast<uint64_t>(p.n), k = static_cast<uint64_t>(p.k);
    // cuBLASLt A = our B: column-major [n,k] (ld n) or, transposed storage, [k,n] (ld k).
    MPB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, p.b_type(), p.trans_b ? k : n, p.trans_b ? n : k,
                                                static_cast<int64_t>(p.trans_b ? k : n)));
    // cuBLASLt B = our A: column-major [k,m] (ld k) or, transposed storage, [m,k] (ld m).
    MPB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, p.a_type(), p.trans_a ? m : k, p.trans_a ? k : m,
                                                static_cast<int64_t>(p.trans_a ? m : k)));
    // C = D: column-major [n,m], ld n.
    MPB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, cuda_type(p.d_dtype), n, m, static_cast<int64_t>(n)));
    if (p.batched()) {  // the operand swap: cuBLASLt's A is our B, its B our A
      set_batch(plan->a, p.batch, p.stride_b);
      set_batch(plan->b, p.batch, p.stride_a);
      set_batch(plan->d, p.batch, p.stride_c);
    }

    PreferenceGuard pref;
    MPB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.align_b());
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.align_a());
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.align_d());
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.align_d());

    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, plan->op, plan->a, plan->b, plan->d, plan->d,
                                                             pref.p, 1, &result, &found);
    // NOT_SUPPORTED and INVALID_VALUE are how the heuristic refuses an
    // epilogue at some shapes (PyTorch's cuBLASLt path avoids bias
    // epilogues for m == 1 or n == 1 because of INVALID_VALUE): no
    // algorithm. Any other failure is an error.
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE ||
        (st == CUBLAS_STATUS_SUCCESS && found <= 0)) {
      plan->refusal = "gemm: cuBLASLt has no algorithm for " + p.describe() + " (cublasLtMatmulAlgoGetHeuristic: " +
                      cublasLtGetStatusString(st) + ", " + std::to_string(found) + " results)";
      return plans.emplace(key, std::move(plan)).first->second.get();
    }
    if (st != CUBLAS_STATUS_SUCCESS) throw_cublas_error(st, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    if (result.state != CUBLAS_STATUS_SUCCESS)
      throw DeviceError("gemm: cuBLASLt heuristic result not usable for " + p.describe() + ": " +
                        cublasLtGetStatusString(result.state));
    if (result.workspaceSize > kWorkspaceBytes)
      throw DeviceError("gemm: cuBLASLt algorithm wants " + std::to_string(result.workspaceSize) +
                        " bytes of workspace for " + p.describe());
    plan->algo = result.algo;
    plan->workspace = result.workspaceSize;
    plan->has_algo = true;
    return plans.emplace(key, std::move(plan)).first->second.get();
  }

  // Runs p; false (nothing launched) only when allow_missing and cuBLASLt has
  // no algorithm for it: the caller runs its explicit fallback and counts it.
  // A plain GEMM (no epilogue) has no fallback: its refusal throws.
  bool matmul(const Problem& p, bool allow_missing = false) {
    Plan* pl = plan(p);
    if (!pl->has_algo) {
      if (allow_missing) return false;
      throw DeviceError(pl->refusal);
    }
    set_pointers(pl->op, p);
    MPB_CUBLAS_CHECK(cublasLtMatmul(handle, pl->op, &p.alpha, p.b, pl->a, p.a, pl->b, &p.beta, p.d, pl->d, p.d, pl->d,
                                    &pl->algo, workspace.tensor().data, kWorkspaceBytes, dev.stream()));
    return true;
  }

  // g's outputs (c, pre_act, bias, bias_grad_out, n) and operands' inputs
  // (a, b, their FP8 settings, m, n, k): the same GemmArgs except behind
  // run_fp8_through_scratch, where g's outputs are the n-padded scratch.
  void run_planned(const GemmArgs& g, const GemmArgs& operands, const Fp8GemmLayout* fp8);
  void run_fp8_through_scratch(const GemmArgs& g, const Fp8GemmLayout& fp8);
  void copy_columns(const Tensor& dst, int64_t dst_ld, const Tensor& src, int64_t src_ld, int64_t rows, int64_t cols);
  void zero_bytes(void* begin, size_t bytes);
  void forward_fallback(const GemmArgs& g, const Problem& p);
  void run_backward(const GemmArgs& g, Problem& p);
  void quantize_fp8(const GemmArgs& operands, Problem& p, const Fp8GemmLayout& fp8);
};

CublasLtGemm::CublasLtGemm(CudaDevice& device) : impl_(std::make_unique<Impl>(device)) {
  MPB_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
  impl_->workspace =
      device.alloc(Shape{static_cast<int64_t>(kWorkspaceBytes / sizeof(float))}, DType::F32, MemCategory::Workspace);
}

CublasLtGemm::~CublasLtGemm() = default;

size_t CublasLtGemm::cached_plans() const { return impl_->plans.size(); }

std::string CublasLtGemm::support(GemmCompute c) const {
  // Tensor-core TF32, fp16 and bf16 with fp32 accumulation: sm_80 and newer
  // (CudaDevice refuses older GPUs anyway: no kernel image for them).
  if (c == GemmCompute::F32) return "native";
  return impl_->dev.cc_major() >= 8 ? "native" : "unsupported";
}

std::string CublasLtGemm::math(GemmCompute c) {
  // The compute_type() run() asks for, and the operand types of the table at the top of this file.
  const std::string compute =
      compute_type(c) == CUBLAS_COMPUTE_32F_FAST_TF32 ? "CUBLAS_COMPUTE_32F_FAST_TF32" : "CUBLAS_COMPUTE_32F";
  const char* operands = c == GemmCompute::F16 ? "A/B CUDA_R_16F" : c == GemmCompute::BF16 ? "A/B CUDA_R_16BF"
                                                                                           : "A/B CUDA_R_32F";
  return "cublasLt " + compute + ", " + operands + ", scale CUDA_R_32F";
}

namespace {
// The scratch output is no fallback (the GEMM still runs on FP8 tensor
// cores) but it costs a copy the caller can avoid: said on stderr once per
// (n, output dtype, alignment) in the process, not per call.
void note_fp8_scratch_output(const GemmArgs& g, const Fp8GemmLayout& fp8) {
  static std::mutex mutex;
  static std::set<std::array<int64_t, 3>> said;
  const std::array<int64_t, 3> key{g.n, static_cast<int64_t>(g.c.dtype), fp8.n_padded == g.n ? 1 : 0};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!said.insert(key).second) return;
  }
  std::fprintf(stderr,
               "mpbench cuda: FP8 GEMM output [m, %lld] %s %s: written through an [m, %lld] scratch and copied back "
               "(cuBLASLt's FP8 kernels need n %% 16 == 0 and 16-byte aligned outputs)\n",
               static_cast<long long>(g.n), dtype_name(g.c.dtype),
               fp8.n_padded == g.n ? "is not 16-byte aligned" : "is not 16 columns wide",
               static_cast<long long>(fp8.n_padded));
}
}  // namespace

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
    note_fp8_scratch_output(g, fp8);
    impl_->run_fp8_through_scratch(g, fp8);
  } else {
    impl_->run_planned(g, g, &fp8);
  }
}

// An FP8 GEMM whose C is not 16 columns wide (or not 16-byte aligned), see
// fp8_gemm_layout.h: the same GEMM with every output widened to n_padded in
// scratch (C copied in first when beta != 0; pre_act copied in when it is
// the backward epilogues' input; the bias zero-padded), then the first n
// columns copied back. The padded columns multiply zero rows of B's codes
// and a zero bias (DGelu reads uninitialised pre_act there): every column of
// D, and of the bias gradient, depends on its own column only, and the pad
// columns are never copied back.
void CublasLtGemm::Impl::run_fp8_through_scratch(const GemmArgs& g, const Fp8GemmLayout& fp8) {
  const int64_t m = g.m, n = g.n, np = fp8.n_padded;
  GemmArgs wide = g;
  wide.n = np;
  wide.c = Tensor(dev.scratch(kScratchFp8Out, fp8.scratch_output_bytes), g.c.dtype, Shape{m, np});
  if (fp8.copy_c_in) copy_columns(wide.c, np, g.c, n, m, n);
  if (!g.pre_act.empty()) {
    if (g.pre_act.data == g.c.data) {
      wide.pre_act = wide.c;  // the caller's aliasing, kept
    } else {
      const size_t bytes = static_cast<size_t>(m * np) * dtype_size(g.pre_act.dtype);
      wide.pre_act = Tensor(dev.scratch(kScratchFp8PreAct, bytes), g.pre_act.dtype, Shape{m, np});
      if (is_backward_epilogue(g.epilogue)) copy_columns(wide.pre_act, np, g.pre_act, n, m, n);  // read there
    }
  }
  // The bias (forward) or the bias gradient (DGeluBGrad): [np] in the
  // caller's dtype, the pad zero.
  const Tensor& vec = is_backward_epilogue(g.epilogue) ? g.bias_grad_out : g.bias;
  Tensor wide_vec;
  if (!vec.empty() && g.epilogue != Epilogue::None && g.epilogue != Epilogue::DGelu) {  // read or written
    const size_t elem = dtype_size(vec.dtype);
    auto* base = static_cast<char*>(dev.scratch(kScratchFp8Bias, static_cast<size_t>(np) * elem));
    wide_vec = Tensor(base, vec.dtype, Shape{np});
    if (!is_backward_epilogue(g.epilogue)) {
      dev.copy(Tensor(base, vec.dtype, Shape{n}), vec);
      zero_bytes(base + static_cast<size_t>(n) * elem, static_cast<size_t>(np - n) * elem);
      wide.bias = wide_vec;
    } else {
      wide.bias_grad_out = wide_vec;
    }
  }

  run_planned(wide, g, &fp8);

  copy_columns(g.c, n, wide.c, np, m, n);
  if (!g.pre_act.empty() && g.pre_act.data != g.c.data && !is_backward_epilogue(g.epilogue))
    copy_columns(g.pre_act, n, wide.pre_act, np, m, n);
  if (!g.bias_grad_out.empty() && g.epilogue == Epilogue::DGeluBGrad)
    dev.copy(g.bias_grad_out, Tensor(wide_vec.data, wide_vec.dtype, Shape{n}));
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

void CublasLtGemm::Impl::run_planned(const GemmArgs& g, const GemmArgs& operands, const Fp8GemmLayout* fp8) {
  Problem p;
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.trans_a = g.trans_a;
  p.trans_b = g.trans_b;
  p.compute = g.compute;
  p.ab = g.a.dtype;
  p.a = g.a.data;
  p.b = g.b.data;
  p.d = g.c.data;
  p.d_dtype = g.c.dtype;
  p.alpha = g.alpha;
  p.beta = g.beta;
  if (g.batch > 1) {  // (Device::gemm checked: no epilogue, no pre_act)
    p.batch = g.batch;
    p.stride_a = g.stride_a;
    p.stride_b = g.stride_b;
    p.stride_c = g.stride_c;
  }
  if (fp8 != nullptr) quantize_fp8(operands, p, *fp8);  // (Device::gemm checked: both operands, batch 1)

  if (is_backward_epilogue(g.epilogue)) {
    run_backward(g, p);
    return;
  }

  const bool act = g.epilogue == Epilogue::BiasRelu || g.epilogue == Epilogue::BiasGelu;
  const bool has_pre = !g.pre_act.empty();
  const Activation act_kind = g.epilogue == Epilogue::BiasGelu ? Activation::Gelu : Activation::Relu;
  // BiasRelu with pre_act, or pre_act aliasing C: GEMM + bias into the
  // pre-activation, then the activation kernel (see the top of the file).
  const bool split_act =
      act && has_pre && (g.epilogue == Epilogue::BiasRelu || g.pre_act.data == g.c.data);
  const bool gelu_aux = act && has_pre && !split_act;

  Tensor split_dst;  // where the split GEMM writes the pre-activation
  if (split_act) {
    if (d_type_allowed(g.compute, g.pre_act.dtype)) {
      split_dst = g.pre_act;
    } else {
      const size_t bytes = static_cast<size_t>(g.m * g.n) * dtype_size(g.c.dtype);
      split_dst = Tensor(dev.scratch(kScratchGemmAux, bytes), g.c.dtype, Shape{g.m, g.n});
    }
    p.d = split_dst.data;
    p.d_dtype = split_dst.dtype;
  }

  switch (g.epilogue) {
    case Epilogue::None: p.epilogue = CUBLASLT_EPILOGUE_DEFAULT; break;
    case Epilogue::Bias: p.epilogue = CUBLASLT_EPILOGUE_BIAS; break;
    case Epilogue::BiasRelu: p.epilogue = split_act ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS; break;
    case Epilogue::BiasGelu:
      p.epilogue = split_act ? CUBLASLT_EPILOGUE_BIAS
                             : (gelu_aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS);
      break;
    case Epilogue::DGelu:
    case Epilogue::DGeluBGrad: throw std::logic_error("gemm: backward epilogues are handled by run_backward");
  }

  if (g.epilogue != Epilogue::None) {
    // The bias in D's dtype (FP8: fp8_bias_dtype of it), 16-byte aligned (see the top of the file).
    p.bias_dtype = p.fp8 ? fp8_bias_dtype(p.d_dtype) : p.d_dtype;
    if (g.bias.dtype == p.bias_dtype && alignment_of(g.bias.data) >= 16) {
      p.bias = g.bias.data;
    } else {
      Tensor conv(dev.scratch(kScratchGemmBias, static_cast<size_t>(g.n) * dtype_size(p.bias_dtype)), p.bias_dtype,
                  Shape{g.n});
      dev.cast(conv, g.bias);
      p.bias = conv.data;
    }
  }

  bool aux_in_scratch = false;
  if (gelu_aux) {
    const bool direct =
        g.pre_act.dtype == g.c.dtype && g.n % 8 == 0 && alignment_of(g.pre_act.data) >= 16;
    if (direct) {
      p.aux = g.pre_act.data;
      p.aux_ld = g.n;
    } else {
      p.aux_ld = (g.n + 7) / 8 * 8;
      p.aux = dev.scratch(kScratchGemmAux, static_cast<size_t>(g.m * p.aux_ld) * dtype_size(g.c.dtype));
      aux_in_scratch = true;
    }
  }

  // Every forward epilogue may be refused (m == 1 or n == 1 among others):
  // then the plain GEMM and the bias/activation kernels, counted.
  if (!matmul(p, /*allow_missing=*/p.epilogue != CUBLASLT_EPILOGUE_DEFAULT)) {
    forward_fallback(g, p);
    aux_in_scratch = false;  // the fallback wrote pre_act itself
  }

  if (aux_in_scratch) {
    const int64_t count = g.m * g.n;
    copy_columns_kernel<<<dev.elementwise_grid(count), kThreads, 0, dev.stream()>>>(
        g.pre_act.data, g.pre_act.dtype, g.n, p.aux, g.c.dtype, p.aux_ld, g.m, g.n);
    MPB_CHECK_LAUNCH("copy_columns_kernel");
  }
  if (split_act) {
    if (split_dst.data != g.pre_act.data) dev.cast(g.pre_act, split_dst);
    dev.activation_forward(act_kind, g.c, g.pre_act);  // from the stored pre-activation, like the CPU
  }
  // Without an activation, pre_act (if given) is simply C.
  if (!act && has_pre && g.pre_act.data != g.c.data) dev.cast(g.pre_act, g.c);
}

// The explicit fallback for a forward epilogue cuBLASLt refused (counted as
// a GEMM fallback on the device; cell JSON gemm_fallbacks): the GEMM without
// epilogue into p's D, then the CPU backend's sequence of kernels. D is C, or
// the pre-activation when the caller splits the activation off (p's epilogue
// is then BIAS, and run() applies the activation after this).
//   BIAS:          D += bias
//   RELU_BIAS,
//   GELU_BIAS:     D += bias; D = act(D)
//   GELU_AUX_BIAS: D += bias; pre_act = D; D = gelu(D)
// The bias is added in fp32 from the parameter's dtype, unrounded, as on the
// CPU (the fused path rounds it to D's dtype first: see the top of the file).
void CublasLtGemm::Impl::forward_fallback(const GemmArgs& g, const Problem& p) {
  dev.note_gemm_fallback(epilogue_name(p.epilogue));
  Problem plain = p;
  plain.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  plain.bias = nullptr;
  plain.aux = nullptr;
  plain.aux_ld = 0;
  matmul(plain);
  const Tensor d(p.d, p.d_dtype, Shape{g.m, g.n});
  dev.add_bias(d, g.bias);
  switch (p.epilogue) {
    case CUBLASLT_EPILOGUE_BIAS: break;
    case CUBLASLT_EPILOGUE_RELU_BIAS: dev.activation_forward(Activation::Relu, d, d); break;
    case CUBLASLT_EPILOGUE_GELU_BIAS: dev.activation_forward(Activation::Gelu, d, d); break;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
      dev.cast(g.pre_act, d);
      dev.activation_forward(Activation::Gelu, d, d);
      break;
    default: throw std::logic_error(std::string("gemm: no forward fallback for epilogue ") + epilogue_name(p.epilogue));
  }
}

// FP8 operands (see the top of the file): quantizes our A into [m, kp] and
// our B into [n, kp] codes (transposing whichever is stored the other way)
// and turns p into the TN problem over them.
void CublasLtGemm::Impl::quantize_fp8(const GemmArgs& g, Problem& p, const Fp8GemmLayout& fp8) {
  if (g.fp8_a.format == Fp8Format::E5M2 && g.fp8_b.format == Fp8Format::E5M2)
    throw DeviceError("gemm: cuBLASLt has no FP8 matmul with both operands E5M2 (" + p.describe() + ")");
  const int64_t kp = fp8.k_padded, np = fp8.n_padded;
  auto* qa = static_cast<uint8_t*>(dev.scratch(kScratchFp8A, static_cast<size_t>(g.m * kp)));
  auto* qb = static_cast<uint8_t*>(dev.scratch(kScratchFp8B, static_cast<size_t>(np * kp)));
  auto* descale = static_cast<float*>(dev.scratch(kScratchFp8Descale, 2 * sizeof(float)));
  // A stored [m,k] (no trans_a) or [k,m] (trans_a); B stored [k,n] (no trans_b) or [n,k] (trans_b).
  fp8_quantize_operand(dev, qa, kp, descale, g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.trans_a, g.fp8_a);
  fp8_quantize_operand(dev, qb, kp, descale + 1, g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, !g.trans_b,
                       g.fp8_b);
  // B's codes as [np, kp]: rows n..np zero codes, so D's padded rows are exact zeros (plus the zero bias pad).
  zero_bytes(qb + static_cast<size_t>(g.n * kp), static_cast<size_t>((np - g.n) * kp));
  if (p.n != np)  // run() widened the outputs to np whenever np != n
    throw std::logic_error("gemm: FP8 output width " + std::to_string(p.n) + " is not the padded " + std::to_string(np));
  p.a = qa;
  p.b = qb;
  p.k = kp;
  p.trans_a = false;
  p.trans_b = true;
  p.fp8 = true;
  p.fp8_a = g.fp8_a.format;
  p.fp8_b = g.fp8_b.format;
  p.descale_a = descale;
  p.descale_b = descale + 1;
  p.fast_accum = fp8.fast_accum;
}

// DGelu / DGeluBGrad (see the top of the file). p holds the plain problem
// (operands, C, alpha, beta == 0, batch 1).
void CublasLtGemm::Impl::run_backward(const GemmArgs& g, Problem& p) {
  const bool bgrad = g.epilogue == Epilogue::DGeluBGrad;
  const bool aux_ok = g.pre_act.dtype == g.c.dtype && g.n % 8 == 0 && alignment_of(g.pre_act.data) >= 16;
  // DGELU_BGRAD writes the bias gradient in BIAS_DATA_TYPE (D's dtype, or
  // for FP8 fp8_bias_dtype of it: bf16 for an fp32 D): used only when
  // bias_grad_out has that dtype; otherwise DGELU and the bias_grad kernel.
  const DType bgrad_dtype = p.fp8 ? fp8_bias_dtype(g.c.dtype) : g.c.dtype;
  const bool fused_bgrad = bgrad && g.bias_grad_out.dtype == bgrad_dtype;
  bool bias_in_scratch = false;
  bool fused = false;
  if (aux_ok) {
    Problem f = p;
    f.epilogue = fused_bgrad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
    f.aux = g.pre_act.data;
    f.aux_ld = g.n;
    if (fused_bgrad) {
      f.bias_dtype = bgrad_dtype;
      if (alignment_of(g.bias_grad_out.data) >= 16) {
        f.bias = g.bias_grad_out.data;
      } else {
        f.bias = dev.scratch(kScratchGemmBias, static_cast<size_t>(g.n) * dtype_size(bgrad_dtype));
        bias_in_scratch = true;
      }
    }
    fused = matmul(f, /*allow_missing=*/true);
    if (!fused) dev.note_gemm_fallback(epilogue_name(f.epilogue));  // refused: counted, never silent
    if (fused && bias_in_scratch)
      dev.copy(g.bias_grad_out, Tensor(const_cast<void*>(f.bias), bgrad_dtype, Shape{g.n}));
  }
  if (!fused) {
    // Explicit fallback, the same math as the epilogue: GEMM, then
    // activation_backward in place on C, then (below) bias_grad.
    p.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    matmul(p);
    dev.activation_backward(Activation::Gelu, g.c, g.c, g.pre_act);
  }
  if (bgrad && !(fused && fused_bgrad)) dev.bias_grad(g.bias_grad_out, g.c, GradMode::Overwrite);
}

std::string cublaslt_version_string() {
  const size_t v = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

}  // namespace mpb::cuda
