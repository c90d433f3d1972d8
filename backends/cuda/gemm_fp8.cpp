// FP8 operands of CublasLtGemm: quantizing both operands into the layout
// cuBLASLt's FP8 kernels take (quantize_fp8) and the n-padded scratch
// outputs of a GEMM whose C they cannot write directly
// (run_fp8_through_scratch). The decisions are fp8_gemm_layout.h's.
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
// (16 bytes apart: kFp8DescaleStride)
// (cuBLASLt multiplies the fp32 accumulator by both, exact for power-of-two
// scales): D = alpha * (qa / sa) . (qb / sb) + beta * C, the contract of
// core/device.h. Everything after the operands (C/D types, epilogues and
// their fallbacks, the plan cache keyed also by the two formats) is the
// path of the other parts (gemm_cublaslt_impl.h), with three differences decided by fp8_gemm_layout()
// (fp8_gemm_layout.h, proven on the CPU by tests/backends/cuda/test_fp8_gemm_layout.cpp):
//   - Output shape. D's rows (our n) must be a multiple of 16 as well (our
//     m has no rule: mp == m, fp8_gemm_layout.h): B's codes are written
//     [np, kp] with zero rows beyond n, A's [mp, kp], and when n is no
//     multiple of 16 (or C/pre_act is not 16-byte aligned) run_fp8_through_scratch runs the
//     GEMM on padded [mp, np] scratch outputs (kScratchFp8Out/PreAct/Bias: C
//     copied in first when beta != 0, pre_act copied in for the backward
//     epilogues, the pad rows zero, the bias zero-padded) and copies the
//     first m rows and n columns back.
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
#include <array>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "backends/cuda/fp8_gemm_layout.h"
#include "backends/cuda/fp8_quantize.h"
#include "backends/cuda/gemm_cublaslt_impl.h"

namespace mpb::cuda {

namespace {
// The scratch output is no fallback (the GEMM still runs on FP8 tensor
// cores) but it costs a copy the caller can avoid: said on stderr once per
// (n, output dtype, alignment) in the process, not per call.
void note_fp8_scratch_output(const GemmArgs& g, const Fp8GemmLayout& fp8) {
  static std::mutex mutex;
  static std::set<std::array<int64_t, 4>> said;
  const std::array<int64_t, 4> key{g.m, g.n, static_cast<int64_t>(g.c.dtype),
                                   (fp8.n_padded == g.n ? 1 : 0) | (fp8.m_padded == g.m ? 2 : 0)};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (!said.insert(key).second) return;
  }
  std::string why;
  if (fp8.n_padded != g.n) why += "is not a multiple of 16 columns wide";
  if (fp8.m_padded != g.m) why += std::string(why.empty() ? "" : ", ") + "is not a multiple of 16 rows high";
  if (why.empty()) why = "is not 16-byte aligned";
  std::fprintf(stderr,
               "mpbench cuda: FP8 GEMM output [%lld, %lld] %s %s: written through a [%lld, %lld] scratch and copied "
               "back (cuBLASLt's FP8 kernels need n a multiple of 16 and 16-byte aligned outputs)\n",
               static_cast<long long>(g.m), static_cast<long long>(g.n), dtype_name(g.c.dtype), why.c_str(),
               static_cast<long long>(fp8.m_padded), static_cast<long long>(fp8.n_padded));
}
}  // namespace

// An FP8 GEMM whose C is not a multiple of 16 columns wide or rows high (or
// not 16-byte aligned), see fp8_gemm_layout.h: the same GEMM with every
// output widened to [m_padded, n_padded] in scratch (C copied in first when
// beta != 0; pre_act copied in when it is the backward epilogues' input; the
// bias zero-padded), then the first m rows and n columns copied back. The
// padded columns multiply zero rows of B's codes and a zero bias (DGelu
// reads uninitialised pre_act there): every column of D, and of the bias
// gradient, depends on its own column only, and the pad columns are never
// copied back. The padded rows multiply zero rows of A's codes, so D is
// alpha * 0 there; they are never copied back either, but the bias gradient
// (DGELU_BGRAD, or the bias_grad kernel of its fallback) sums over every row
// of D: the pad rows of C and pre_act are zeroed, so they add dgelu(0) * 0 =
// exact zeros and never a NaN from uninitialised memory.
void CublasLtGemm::Impl::run_fp8_through_scratch(const GemmArgs& g, const Fp8GemmLayout& fp8) {
  note_fp8_scratch_output(g, fp8);
  const int64_t m = g.m, n = g.n, np = fp8.n_padded, mp = fp8.m_padded;
  // Rows m..mp of a [mp, np] scratch matrix, zeroed (see above).
  auto zero_pad_rows = [&](const Tensor& t) {
    const size_t row = static_cast<size_t>(np) * dtype_size(t.dtype);
    zero_bytes(static_cast<char*>(t.data) + static_cast<size_t>(m) * row, static_cast<size_t>(mp - m) * row);
  };
  GemmArgs wide = g;
  wide.m = mp;
  wide.n = np;
  wide.c = Tensor(dev.scratch(kScratchFp8Out, fp8.scratch_output_bytes), g.c.dtype, Shape{mp, np});
  zero_pad_rows(wide.c);
  if (fp8.copy_c_in) copy_columns(wide.c, np, g.c, n, m, n);
  if (!g.pre_act.empty()) {
    if (g.pre_act.data == g.c.data) {
      wide.pre_act = wide.c;  // the caller's aliasing, kept
    } else {
      const size_t bytes = static_cast<size_t>(mp * np) * dtype_size(g.pre_act.dtype);
      wide.pre_act = Tensor(dev.scratch(kScratchFp8PreAct, bytes), g.pre_act.dtype, Shape{mp, np});
      zero_pad_rows(wide.pre_act);
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

// FP8 operands (see the top of this file): quantizes our A into [m, kp] and
// our B into [n, kp] codes (transposing whichever is stored the other way)
// and turns p into the TN problem over them.
void CublasLtGemm::Impl::quantize_fp8(const GemmArgs& g, GemmProblem& p, const Fp8GemmLayout& fp8) {
  if (g.fp8_a.format == Fp8Format::E5M2 && g.fp8_b.format == Fp8Format::E5M2)
    throw DeviceError("gemm: cuBLASLt has no FP8 matmul with both operands E5M2 (" + p.describe() + ")");
  const int64_t kp = fp8.k_padded, np = fp8.n_padded, mp = fp8.m_padded;
  auto* qa = static_cast<uint8_t*>(dev.scratch(kScratchFp8A, static_cast<size_t>(mp * kp)));
  auto* qb = static_cast<uint8_t*>(dev.scratch(kScratchFp8B, static_cast<size_t>(np * kp)));
  auto* descale = static_cast<float*>(dev.scratch(kScratchFp8Descale, 2 * kFp8DescaleStride * sizeof(float)));
  // A stored [m,k] (no trans_a) or [k,m] (trans_a); B stored [k,n] (no trans_b) or [n,k] (trans_b).
  fp8_quantize_operand(dev, qa, kp, descale, g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.trans_a, g.fp8_a);
  fp8_quantize_operand(dev, qb, kp, descale + kFp8DescaleStride, g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n,
                       !g.trans_b, g.fp8_b);
  // A's codes as [mp, kp] and B's as [np, kp]: rows m..mp and n..np zero
  // codes, so D's padded columns and rows are exact zeros (plus the zero bias pad).
  zero_bytes(qa + static_cast<size_t>(g.m * kp), static_cast<size_t>((mp - g.m) * kp));
  zero_bytes(qb + static_cast<size_t>(g.n * kp), static_cast<size_t>((np - g.n) * kp));
  if (p.n != np || p.m != mp)  // run() widened the outputs to [mp, np] whenever that differs from [m, n]
    throw std::logic_error("gemm: FP8 output shape [" + std::to_string(p.m) + ", " + std::to_string(p.n) +
                           "] is not the padded [" + std::to_string(mp) + ", " + std::to_string(np) + "]");
  p.a = qa;
  p.b = qb;
  p.k = kp;
  p.trans_a = false;
  p.trans_b = true;
  p.fp8 = true;
  p.fp8_a = g.fp8_a.format;
  p.fp8_b = g.fp8_b.format;
  p.descale_a = descale;
  p.descale_b = descale + kFp8DescaleStride;
  p.fast_accum = fp8.fast_accum;
}

}  // namespace mpb::cuda
