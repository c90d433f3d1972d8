// Which cuBLASLt epilogue a GEMM call gets, with its bias and GELU aux
// buffers, and the explicit fallbacks where cuBLASLt refuses one: the
// forward (run_planned, forward_fallback) and backward (run_backward)
// epilogues of CublasLtGemm. Host code: the kernels it needs are Device ops
// (cast, add_bias, activation_*, bias_grad) and CublasLtGemm's column copy.
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
// Forward epilogue fallback. When the heuristic refuses BIAS, RELU_BIAS,
// GELU_BIAS or GELU_AUX_BIAS (m == 1 or n == 1 are known cases), the GEMM
// runs without epilogue and the add_bias / activation / cast kernels do the
// rest (Impl::forward_fallback); each such call is counted by epilogue name
// (DeviceCounters::gemm_fallbacks, the cell JSON's gemm_fallbacks). The
// backward DGELU/DGELU_BGRAD refusals (above) are counted the same way.
#include <stdexcept>
#include <string>

#include "backends/cuda/fp8_gemm_layout.h"
#include "backends/cuda/gemm_cublaslt_impl.h"
#include "backends/cuda/gemm_lt_rules.h"

namespace mpb::cuda {

void CublasLtGemm::Impl::run_planned(const GemmArgs& g, const GemmArgs& operands, const Fp8GemmLayout* fp8) {
  GemmProblem p;
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
  // pre-activation, then the activation kernel (see the top of this file).
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
    // The bias in D's dtype (FP8: fp8_bias_dtype of it), 16-byte aligned (see the top of this file).
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
    if (gelu_aux_in_place(g.pre_act.dtype, g.c.dtype, g.n, alignment_of(g.pre_act.data))) {
      p.aux = g.pre_act.data;
      p.aux_ld = g.n;
    } else {
      p.aux_ld = gelu_aux_scratch_ld(g.n);
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

  if (aux_in_scratch)  // the aux's first n columns, converted to pre_act's dtype
    copy_columns(g.pre_act, g.n, Tensor(p.aux, g.c.dtype, Shape{g.m, p.aux_ld}), p.aux_ld, g.m, g.n);
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
// CPU (the fused path rounds it to D's dtype first: see the top of this file).
void CublasLtGemm::Impl::forward_fallback(const GemmArgs& g, const GemmProblem& p) {
  dev.note_gemm_fallback(epilogue_name(p.epilogue));
  GemmProblem plain = p;
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

// DGelu / DGeluBGrad (see the top of this file). p holds the plain problem
// (operands, C, alpha, beta == 0, batch 1).
void CublasLtGemm::Impl::run_backward(const GemmArgs& g, GemmProblem& p) {
  const bool bgrad = g.epilogue == Epilogue::DGeluBGrad;
  const bool aux_ok = gelu_aux_in_place(g.pre_act.dtype, g.c.dtype, g.n, alignment_of(g.pre_act.data));
  // DGELU_BGRAD writes the bias gradient in BIAS_DATA_TYPE (D's dtype, or
  // for FP8 fp8_bias_dtype of it: bf16 for an fp32 D): used only when
  // bias_grad_out has that dtype; otherwise DGELU and the bias_grad kernel.
  const DType bgrad_dtype = p.fp8 ? fp8_bias_dtype(g.c.dtype) : g.c.dtype;
  const bool fused_bgrad = bgrad && g.bias_grad_out.dtype == bgrad_dtype;
  bool bias_in_scratch = false;
  bool fused = false;
  if (aux_ok) {
    GemmProblem f = p;
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

}  // namespace mpb::cuda
