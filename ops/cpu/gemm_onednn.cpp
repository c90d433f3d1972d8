#include "ops/cpu/gemm_onednn.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "core/numerics.h"
#include "ops/cpu/cpu_ops.h"

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
  std::string str() const {
    std::ostringstream s;
    s.precision(9);  // float round-trip digits: alphas/betas that differ must not share a primitive
    s << m << ',' << n << ',' << k << ',' << ta << tb << ',' << int(a) << int(b) << int(c) << ',' << bias << ','
      << act << ',' << alpha << ',' << beta;
    return s.str();
  }
};

}  // namespace

struct OnednnGemm::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  WorkspaceFn workspace;
  std::unordered_map<std::string, dnnl::matmul> cache;

  dnnl::matmul& primitive(const MatmulKey& key) {
    auto it = cache.find(key.str());
    if (it != cache.end()) return it->second;
    using dims = dnnl::memory::dims;
    dnnl::memory::desc a_md(dims{key.m, key.k}, key.a, key.ta ? dims{1, key.m} : dims{key.k, 1});
    dnnl::memory::desc b_md(dims{key.k, key.n}, key.b, key.tb ? dims{1, key.k} : dims{key.n, 1});
    dnnl::memory::desc c_md(dims{key.m, key.n}, key.c, dims{key.n, 1});
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
    dnnl::memory a_mem({dims{key.m, key.k}, key.a, key.ta ? dims{1, key.m} : dims{key.k, 1}}, engine, a);
    dnnl::memory b_mem({dims{key.k, key.n}, key.b, key.tb ? dims{1, key.k} : dims{key.n, 1}}, engine, b);
    dnnl::memory c_mem({dims{key.m, key.n}, key.c, dims{key.n, 1}}, engine, c);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
    if (key.bias)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory({dims{1, key.n}, dt::f32, dims{key.n, 1}}, engine, const_cast<void*>(bias)));
    mm.execute(stream, args);
    stream.wait();
  }
};

OnednnGemm::OnednnGemm(WorkspaceFn workspace) : impl_(std::make_unique<Impl>()) {
  impl_->workspace = std::move(workspace);
  auto isa = dnnl::get_effective_cpu_isa();
  native_bf16_ = isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

OnednnGemm::~OnednnGemm() = default;

std::string OnednnGemm::support(GemmCompute c) const {
  switch (c) {
    case GemmCompute::F32: return "native";
    case GemmCompute::BF16: return native_bf16_ ? "native" : "emulated";
    default: return "emulated";
  }
}

namespace {

// fp32 copy of an operand, rounded to what the compute mode feeds the multiplier.
void widen_operand(float* dst, const Tensor& src, GemmCompute compute) {
  const int64_t n = src.numel();
  if (compute == GemmCompute::TF32) {
    const float* s = static_cast<const float*>(src.data);
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) dst[i] = round_to_tf32(s[i]);
  } else {
    cast(Tensor(dst, DType::F32, src.shape), src);
  }
}

void check_args(const GemmArgs& g) {
  require(g.m > 0 && g.n > 0 && g.k > 0, "gemm", "m, n, k must be positive");
  require(g.a.numel() == g.m * g.k && g.b.numel() == g.k * g.n && g.c.numel() == g.m * g.n, "gemm",
          "operand sizes do not match m, n, k");
  require(g.a.dtype == g.b.dtype, "gemm", "A and B must have the same dtype");
  const bool wide = g.compute == GemmCompute::F32 || g.compute == GemmCompute::TF32;
  require(wide ? g.a.dtype == DType::F32
               : g.a.dtype == (g.compute == GemmCompute::F16 ? DType::F16 : DType::BF16),
          "gemm", "operand dtype does not match the compute mode");
  require(g.epilogue == Epilogue::None || g.bias.numel() == g.n, "gemm", "bias must be [n]");
  // oneDNN applies alpha before the bias in some kernels and after it in
  // others; an epilogue therefore requires alpha == 1 (and beta == 0) on
  // every backend, so the contract is the same everywhere.
  require(g.epilogue == Epilogue::None || (g.beta == 0.0f && g.alpha == 1.0f), "gemm",
          "epilogues need alpha == 1 and beta == 0");
  require(g.pre_act.empty() || g.pre_act.numel() == g.m * g.n, "gemm", "pre_act must be [m,n]");
}

}  // namespace

void OnednnGemm::run(const GemmArgs& g) {
  check_args(g);
  const bool direct = g.compute == GemmCompute::F32 || (g.compute == GemmCompute::BF16 && native_bf16_);
  void* a = g.a.data;
  void* b = g.b.data;
  dt op_type = to_dnnl(g.a.dtype);
  if (!direct) {  // emulate: fp32 operands holding the rounded values
    a = impl_->workspace(0, g.a.numel() * sizeof(float));
    b = impl_->workspace(1, g.b.numel() * sizeof(float));
    widen_operand(static_cast<float*>(a), g.a, g.compute);
    widen_operand(static_cast<float*>(b), g.b, g.compute);
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
    mm_dst = Tensor(impl_->workspace(2, dst.numel() * sizeof(float)), DType::F32, dst.shape);
    if (g.beta != 0.0f) cast(mm_dst, dst);
  }

  // oneDNN takes an fp32 bias; a half one (apex O2/O3 parameters) is widened.
  const void* bias = g.bias.data;
  if (g.epilogue != Epilogue::None && g.bias.dtype != DType::F32) {
    void* wide = impl_->workspace(3, g.n * sizeof(float));
    cast(Tensor(wide, DType::F32, Shape{g.n}), g.bias);
    bias = wide;
  }
  MatmulKey key{g.m, g.n, g.k, g.trans_a, g.trans_b, op_type, op_type, to_dnnl(mm_dst.dtype),
                g.epilogue != Epilogue::None, (act && !split_act) ? static_cast<int>(act_kind) : -1, g.alpha, g.beta};
  impl_->execute(key, a, b, mm_dst.data, bias);

  if (!dst_ok) cast(dst, mm_dst);
  if (split_act) activation_forward(act_kind, g.c, g.pre_act);
  // Without an activation, pre_act (if given) is simply C.
  if (!act && !g.pre_act.empty() && g.pre_act.data != g.c.data) cast(g.pre_act, g.c);
}

}  // namespace mpb::cpu
