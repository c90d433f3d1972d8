// GEMM on the CPU through oneDNN's matmul primitive.
//  - fp32: oneDNN fp32 matmul.
//  - bf16: oneDNN bf16 matmul (fp32 accumulation) where the CPU has AVX512-BF16
//    or AMX ("native"); otherwise operands are widened to fp32 exactly and
//    multiplied in fp32 ("emulated": the same products and fp32 sums).
//  - fp16, tf32: "emulated": operands rounded to the format (fp16 is exact in
//    fp32; tf32 keeps 10 mantissa bits), then an fp32 matmul. That is what
//    tensor cores compute: exact products of the rounded operands, fp32 sums.
//  - FP8 operands (GemmArgs::fp8_a/b, any compute mode): "emulated": each
//    operand x becomes fp8(x * scale) / scale (core/fp8.h, saturating), with
//    its amax and saturation count recorded on the way, then an fp32 matmul:
//    exact products of FP8 values (4 + 4 significant bits), fp32 sums, as an
//    FP8 tensor core computes them.
// Strided batches (GemmArgs::batch > 1, attention's per-head products) are one
// oneDNN matmul over 3-D descriptors {batch, rows, cols} whose leading stride
// is the element stride between matrices (>= the matrix size: gaps allowed,
// overlap and broadcast not); emulated modes widen every batch's operands; a
// 16-bit C is written matrix by matrix so its gaps are never touched.
// Primitives are created once per shape/dtype/epilogue/batch/strides and cached.
// The argument rules (core/device.h) are checked by Device::gemm before this runs.
#include <oneapi/dnnl/dnnl.hpp>

#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "backends/cpu/cpu_device_impl.h"
#include "core/fp8.h"
#include "core/numerics.h"
#include "ops/dtype_io.h"

namespace mpb::cpu {

namespace {

using dt = dnnl::memory::data_type;

dt to_dnnl(DType t) {
  switch (t) {
    case DType::F32: return dt::f32;
    case DType::BF16: return dt::bf16;
    case DType::F16: return dt::f16;
    default: throw std::invalid_argument("gemm: integer tensors are not GEMM operands");
  }
}

// What one oneDNN matmul call computes: dst[m,n] = alpha*op(A).op(B) (+bias)
// (+beta*dst) (then act), with operands already in the primitive's dtypes.
struct MatmulKey {
  int64_t m, n, k;
  bool ta, tb;
  dt a, b, c;
  bool bias;
  int act;  // -1 none, else Activation
  float alpha, beta;
  // Strided batch: batch == 1 uses 2-D descriptors (strides unused).
  int64_t batch, sa, sb, sc;
  std::string str() const {
    std::ostringstream s;
    s.precision(9);  // float round-trip digits: alphas/betas that differ must not share a primitive
    s << m << ',' << n << ',' << k << ',' << ta << tb << ',' << int(a) << int(b) << int(c) << ',' << bias << ','
      << act << ',' << alpha << ',' << beta << ',' << batch << ',' << sa << ',' << sb << ',' << sc;
    return s.str();
  }
  // Operand descriptors: row-major, transposed operands as strides; with a
  // batch, a leading dimension with the element stride between matrices.
  dnnl::memory::desc a_md() const { return md(m, k, a, ta ? dims{1, m} : dims{k, 1}, sa); }
  dnnl::memory::desc b_md() const { return md(k, n, b, tb ? dims{1, k} : dims{n, 1}, sb); }
  dnnl::memory::desc c_md() const { return md(m, n, c, dims{n, 1}, sc); }

 private:
  using dims = dnnl::memory::dims;
  dnnl::memory::desc md(int64_t rows, int64_t cols, dt type, const dims& strides, int64_t batch_stride) const {
    if (batch == 1) return dnnl::memory::desc(dims{rows, cols}, type, strides);
    return dnnl::memory::desc(dims{batch, rows, cols}, type, dims{batch_stride, strides[0], strides[1]});
  }
};

}  // namespace

struct OnednnMatmul {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::unordered_map<std::string, dnnl::matmul> cache;
  bool native_bf16 = false;  // bf16 matmuls run natively (AVX512-BF16 or AMX)

  dnnl::matmul& primitive(const MatmulKey& key) {
    auto it = cache.find(key.str());
    if (it != cache.end()) return it->second;
    using dims = dnnl::memory::dims;
    const dnnl::memory::desc a_md = key.a_md(), b_md = key.b_md(), c_md = key.c_md();
    dnnl::primitive_attr attr;
    dnnl::post_ops po;
    if (key.beta != 0.0f) po.append_sum(key.beta);
    if (key.act == static_cast<int>(Activation::Gelu)) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
    if (key.act == static_cast<int>(Activation::Relu)) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(po);
    if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
    dnnl::matmul::desc desc = key.bias ? dnnl::matmul::desc(a_md, b_md, dnnl::memory::desc(dims{1, key.n}, dt::f32, dims{key.n, 1}), c_md)
                                       : dnnl::matmul::desc(a_md, b_md, c_md);
    dnnl::matmul::primitive_desc pd(desc, attr, engine);
    return cache.emplace(key.str(), dnnl::matmul(pd)).first->second;
  }

  void execute(const MatmulKey& key, void* a, void* b, void* c, const void* bias) {
    using dims = dnnl::memory::dims;
    dnnl::matmul& mm = primitive(key);
    dnnl::memory a_mem(key.a_md(), engine, a);
    dnnl::memory b_mem(key.b_md(), engine, b);
    dnnl::memory c_mem(key.c_md(), engine, c);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
    if (key.bias)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory({dims{1, key.n}, dt::f32, dims{key.n, 1}}, engine, const_cast<void*>(bias)));
    mm.execute(stream, args);
    stream.wait();
  }
};

void OnednnMatmulDeleter::operator()(OnednnMatmul* p) const { delete p; }

std::unique_ptr<OnednnMatmul, OnednnMatmulDeleter> make_onednn_matmul() {
  std::unique_ptr<OnednnMatmul, OnednnMatmulDeleter> m(new OnednnMatmul);
  const auto isa = dnnl::get_effective_cpu_isa();
  m->native_bf16 = isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  return m;
}

// fp32 and (AVX512-BF16/AMX) bf16 run natively; the rest are emulated the way
// tensor cores compute (operands rounded to the format, fp32 products), FP8
// included (core/fp8.h's rounding, then the fp32 GEMM).
Support CpuDevice::supports(Feature f) const {
  switch (f) {
    case Feature::GemmF32: return Support::native();
    case Feature::GemmBf16: return onednn_->native_bf16 ? Support::native() : Support::emulated();
    case Feature::GemmTf32:
    case Feature::GemmF16:
    case Feature::GemmFp8: return Support::emulated();
  }
  return Support::unsupported(std::string("cpu: unknown feature ") + feature_name(f));
}

std::string CpuDevice::gemm_math(GemmCompute c) const {
  // oneDNN's default fpmath mode is strict: an f32 matmul is f32 throughout
  // unless ONEDNN_DEFAULT_FPMATH_MODE says otherwise (an override the manifest checks).
  switch (c) {
    case GemmCompute::F32: return "oneDNN matmul f32, fpmath_mode strict";
    case GemmCompute::TF32: return "operands rounded to tf32 (10 mantissa bits), oneDNN matmul f32";
    case GemmCompute::F16: return "operands fp16 widened to f32 exactly, oneDNN matmul f32";
    case GemmCompute::BF16:
      return onednn_->native_bf16 ? "oneDNN matmul bf16, f32 accumulation"
                                  : "operands bf16 widened to f32 exactly, oneDNN matmul f32";
  }
  return "unknown";
}

namespace {

// Elements an operand of `batch` matrices of `size` elements, `stride` apart,
// spans from its first element.
int64_t span(int64_t batch, int64_t stride, int64_t size) { return (batch - 1) * stride + size; }

// fp32 copy of the first n elements of an operand, rounded to what the compute
// mode feeds the multiplier. A strided batch is widened over its whole span
// (gaps included: they are converted but never read), keeping the strides.
void widen_operand(CpuDevice& k, float* dst, const Tensor& src, int64_t n, GemmCompute compute) {
  if (compute == GemmCompute::TF32) {
    const float* s = static_cast<const float*>(src.data);
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) dst[i] = round_to_tf32(s[i]);
  } else {
    k.convert(Tensor(dst, DType::F32, Shape{n}), src.flat_slice(0, n));
  }
}

// fp32 copy of an FP8 operand as the product sees it: fp8(x * scale) / scale.
// The division is exact for the power-of-two scales of core/fp8_scaling.h (an
// FP8 value has 4 significant bits at most, and 2^-16 * 2^-127 is still above
// fp32's smallest subnormal). Folds max |x| into *amax (NaN wins, as a NaN in
// the tensor must reach the scale update) and adds the saturated count.
void quantize_operand_fp8(float* dst, const Tensor& src, int64_t n, const GemmFp8Operand& f) {
  const float scale = *static_cast<const float*>(f.scale.data);
  float amax = 0.0f;
  int64_t saturated = 0, nans = 0;
#pragma omp parallel for reduction(max : amax) reduction(+ : saturated, nans)
  for (int64_t i = 0; i < n; ++i) {
    const float x = scalar::load_f32(src.data, src.dtype, i);
    const float ax = x < 0.0f ? -x : x;
    if (x != x) ++nans;
    else amax = ax > amax ? ax : amax;
    const Fp8Quantized q = fp8_quantize(x, scale, f.format);
    saturated += q.saturated ? 1 : 0;
    dst[i] = fp8_bits_to_float(q.code, f.format) / scale;
  }
  if (!f.amax.empty()) {
    float& out = *static_cast<float*>(f.amax.data);
    if (nans > 0) out = std::numeric_limits<float>::quiet_NaN();
    else if (!(out >= amax) && out == out) out = amax;  // out == out: a NaN already recorded stays
  }
  if (!f.saturated.empty()) *static_cast<float*>(f.saturated.data) += static_cast<float>(saturated);
}

// dst[i*stride .. +size) = src[i*stride .. +size) for every matrix of a batch:
// only the matrices, so the gaps of a strided C keep their contents.
void cast_batch(CpuDevice& k, const Tensor& dst, const Tensor& src, int64_t batch, int64_t stride, int64_t size) {
  if (batch == 1 || stride == size) {  // contiguous: one (parallel) sweep
    k.convert(dst.flat_slice(0, span(batch, stride, size)), src.flat_slice(0, span(batch, stride, size)));
    return;
  }
  for (int64_t i = 0; i < batch; ++i) k.convert(dst.flat_slice(i * stride, size), src.flat_slice(i * stride, size));
}

}  // namespace

void CpuDevice::gemm_impl(const GemmArgs& g) {
  if (is_backward_epilogue(g.epilogue)) {
    // DGelu / DGeluBGrad (core/device.h): by contract exactly the unfused
    // composition, so it is computed as one: the plain GEMM into C (rounded
    // to C's dtype), then one vectorised pass of scalar::gelu_grad with the
    // aux (activation_backward in place on C), then the bias gradient's
    // column sums of the final C (Overwrite). Bit for bit the unfused path.
    GemmArgs plain = g;
    plain.epilogue = Epilogue::None;
    plain.pre_act = Tensor();
    plain.bias_grad_out = Tensor();
    gemm_impl(plain);
    activation_backward_impl(Activation::Gelu, g.c, g.c, g.pre_act);
    if (g.epilogue == Epilogue::DGeluBGrad) bias_grad_impl(g.bias_grad_out, g.c, GradMode::Overwrite);
    return;
  }
  const bool fp8 = g.fp8_a.enabled;
  const bool direct =
      !fp8 && (g.compute == GemmCompute::F32 || (g.compute == GemmCompute::BF16 && onednn_->native_bf16));
  void* a = g.a.data;
  void* b = g.b.data;
  dt op_type = to_dnnl(g.a.dtype);
  const int64_t span_a = span(g.batch, g.stride_a, g.m * g.k), span_b = span(g.batch, g.stride_b, g.k * g.n);
  const int64_t span_c = span(g.batch, g.stride_c, g.m * g.n);
  if (!direct) {  // emulate: fp32 operands holding the rounded values (every batch's)
    a = workspace(0, span_a * sizeof(float));
    b = workspace(1, span_b * sizeof(float));
    if (fp8) {
      quantize_operand_fp8(static_cast<float*>(a), g.a, span_a, g.fp8_a);
      quantize_operand_fp8(static_cast<float*>(b), g.b, span_b, g.fp8_b);
    } else {
      widen_operand(*this, static_cast<float*>(a), g.a, span_a, g.compute);
      widen_operand(*this, static_cast<float*>(b), g.b, span_b, g.compute);
    }
    op_type = dt::f32;
  }

  // Where the matmul writes: the pre-activation buffer when the backward pass
  // needs it (the activation then runs as a separate sweep), else C itself.
  const bool act = g.epilogue == Epilogue::BiasGelu || g.epilogue == Epilogue::BiasRelu;
  const Activation act_kind = g.epilogue == Epilogue::BiasGelu ? Activation::Gelu : Activation::Relu;
  const bool split_act = act && !g.pre_act.empty();
  Tensor dst = split_act ? g.pre_act : g.c;
  // oneDNN writes fp32 always, and bf16 from a native bf16 product; other
  // combinations go through an fp32 buffer and a rounding cast.
  const bool dst_ok = dst.dtype == DType::F32 || (dst.dtype == DType::BF16 && direct && op_type == dt::bf16);
  Tensor mm_dst = dst;
  if (!dst_ok) {
    mm_dst = Tensor(workspace(2, span_c * sizeof(float)), DType::F32, Shape{span_c});
    if (g.beta != 0.0f) cast_batch(*this, mm_dst, dst, g.batch, g.stride_c, g.m * g.n);
  }

  // oneDNN takes an fp32 bias; a half one (apex O2/O3 parameters) is widened.
  const void* bias = g.bias.data;
  if (g.epilogue != Epilogue::None && g.bias.dtype != DType::F32) {
    void* wide = workspace(3, g.n * sizeof(float));
    convert(Tensor(wide, DType::F32, Shape{g.n}), g.bias);
    bias = wide;
  }
  const bool batched = g.batch > 1;
  MatmulKey key{g.m, g.n, g.k, g.trans_a, g.trans_b, op_type, op_type, to_dnnl(mm_dst.dtype),
                g.epilogue != Epilogue::None, (act && !split_act) ? static_cast<int>(act_kind) : -1, g.alpha, g.beta,
                g.batch, batched ? g.stride_a : 0, batched ? g.stride_b : 0, batched ? g.stride_c : 0};
  const size_t primitives = onednn_->cache.size();
  onednn_->execute(key, a, b, mm_dst.data, bias);
  if (onednn_->cache.size() != primitives) note_plan_created();  // a cache miss built a primitive

  if (!dst_ok) cast_batch(*this, dst, mm_dst, g.batch, g.stride_c, g.m * g.n);
  if (split_act) activation_forward_impl(act_kind, g.c, g.pre_act);
  // Without an activation, pre_act (if given) is simply C.
  if (!act && !g.pre_act.empty() && g.pre_act.data != g.c.data) convert(g.pre_act, g.c);
}

}  // namespace mpb::cpu
