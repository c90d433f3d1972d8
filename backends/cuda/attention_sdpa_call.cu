// Fused attention through cuDNN SDPA, one call at a time: the dispatch
// decision (which operands cuDNN may be given, the dropout pairing of forward
// and backward), the padding bias and dropout seed built on the device, and
// the graphs' execution (attention_cudnn.h builds and caches them). Only in
// builds with cudnn_frontend; attention.cu runs the hand-written kernels
// (attention_fused.cu) whenever this says no.
#include "backends/cuda/attention_sdpa_call.h"

#ifdef MPB_HAVE_CUDNN_FRONTEND

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"
#include "ops/attention.h"
#include "ops/dtype_io.h"

namespace mpb::cuda {

namespace {

using scalar::store_f32;

// ---- cuDNN SDPA's padding bias ----------------------------------------------------------------
// bias[b, j] = attention_bias(key_valid[b, j], mask): 0, the rounded mask or
// NaN (ops/attention.h, the CPU's rule), stored in q's dtype, where each of
// those values is exact. Grid-stride over the B*Tk elements.
__global__ void attention_bias_kernel(void* bias, DType bt, const int32_t* __restrict__ kv, int64_t n, float mask) {
  for (int64_t i = global_thread(); i < n; i += grid_threads()) store_f32(bias, bt, i, scalar::attention_bias(kv[i], mask));
}

// An operand's element (b, h, t) = (0, 0, 0): where cuDNN's pointer points.
const void* first_element(const AttnOperand& x) {
  return static_cast<const char*>(x.t.data) + static_cast<size_t>(x.at.offset) * dtype_size(x.t.dtype);
}
void* first_element_mut(const AttnOperand& x) { return const_cast<void*>(first_element(x)); }

// cuDNN SDPA dispatch: the plan when cuDNN runs the call, else null (with the
// kernel call's label where cuDNN's failure is the reason). fp16/bf16 only, every operand in q's
// dtype (the graph has one I/O dtype; fp32/TF32 attention stays on the
// hand-written kernel: cuDNN's SDPA has no fp32 path). Every operand's first
// element and its strides 16-byte aligned (cuDNN's vector loads; the device
// allocator's pointers are 256-byte aligned, so only an odd slice, an odd
// head dim or hidden size misses that). Then the shape is cuDNN's to accept or
// refuse (CudnnSdpa::prepare: the graph's validate, heuristics, check_support
// and build_plans in either bias form, cached per shape and GPU for the
// process, a refusal printed once with cuDNN's reasons; a GPU whose cuDNN
// handle cannot be made runs the kernel, said once). Every call cuDNN does not run is counted as a
// "cuda_kernel..." label in the device's attention_impls (core/device_counters.h), so none is silent.
SdpaChoice cudnn_plan(CudnnSdpa& sdpa, const SdpaKey& key, std::initializer_list<const AttnOperand*> operands) {
  if (key.dtype != DType::F16 && key.dtype != DType::BF16) return {};
  const auto aligned = [](int64_t bytes) { return bytes % 16 == 0; };
  for (const AttnOperand* x : operands) {
    const int64_t e = static_cast<int64_t>(dtype_size(x->t.dtype));
    if (x->t.dtype != key.dtype || reinterpret_cast<uintptr_t>(first_element(*x)) % 16 != 0 ||
        !aligned(x->at.batch * e) || !aligned(x->at.head * e) || !aligned(x->at.row * e))
      return {};
  }
  return sdpa.prepare(key);
}

// The plan's workspace in its scratch slot (null when it needs none).
void* cudnn_workspace(CudaDevice& dev, const SdpaPlan& plan) {
  const size_t ws = CudnnSdpa::workspace_bytes(plan);
  return ws > 0 ? dev.scratch(kScratchCudnnWorkspace, ws) : nullptr;
}

// A layout's strides (the key's; the offsets go into the pointers).
HeadLayout strides_of(const HeadLayout& l) { return HeadLayout{0, l.batch, l.head, l.row}; }

SdpaKey sdpa_key(const AttentionProblem& p, const HeadLayout& out, bool backward) {
  SdpaKey key;
  key.dtype = p.q.t.dtype;
  key.B = p.B, key.H = p.H, key.Tq = p.Tq, key.Tk = p.Tk, key.D = p.D;
  key.q_at = strides_of(p.q.at), key.k_at = strides_of(p.k.at), key.v_at = strides_of(p.v.at);
  key.o_at = strides_of(out);
  key.scale = p.scale;
  key.dropout = p.dropout.p;
  key.backward = backward;
  return key;
}

// With dropout, a forward and its backward must draw the same mask, so they
// must run the same implementation: cuDNN (its Philox stream) for both, or
// the hand-written kernels (ops/dropout.h's hash) for both. The forward's
// plan, or null where it runs the kernel: cuDNN runs a dropout forward only
// when it also accepts the backward's graph (else the backward's reason is
// the forward's label).
SdpaChoice forward_plan(CudnnSdpa& sdpa, const AttentionProblem& p, const AttnOperand& out) {
  const SdpaChoice choice = cudnn_plan(sdpa, sdpa_key(p, out.at, false), {&out, &p.q, &p.k, &p.v});
  if (choice.plan && p.dropout.p > 0.0f) {
    const SdpaChoice backward = sdpa.prepare(sdpa_key(p, out.at, true));
    if (!backward.plan) return backward;
  }
  return choice;
}

// A call the kernel runs because of cuDNN says why (null: the device's own
// "cuda_kernel" count).
void note_kernel_reason(CudaDevice& dev, const SdpaChoice& c) {
  if (!c.plan && c.kernel_label) dev.note_attention_impl(c.kernel_label);
}

// Dropout's Philox seed and offset for cuDNN, written on the device's stream
// (kernel arguments, so no host copy to wait for).
__global__ void attention_seed_kernel(int64_t* seed_offset, int64_t seed) {
  seed_offset[0] = seed;
  seed_offset[1] = 0;
}

const int64_t* upload_dropout_seed(CudaDevice& dev, const AttentionProblem& p) {
  if (p.dropout.p <= 0.0f) return nullptr;
  auto* so = static_cast<int64_t*>(dev.scratch(kScratchAttnSeed, 2 * sizeof(int64_t)));
  int64_t seed = 0;
  std::memcpy(&seed, &p.dropout.seed, sizeof seed);  // the same 64 bits, as cuDNN's int64
  attention_seed_kernel<<<1, 1, 0, dev.stream()>>>(so, seed);
  MPB_CHECK_LAUNCH("attention_seed_kernel");
  return so;
}

// The bias's B*Tk values in q's dtype from key_valid, into its scratch slot
// (the graph declares them [B,1,1,Tk] or [B,1,Tq,Tk] with stride 0 on Tq:
// the same memory either way, sdpa_policy.h).
void* build_attention_bias(CudaDevice& dev, const AttentionProblem& p) {
  const DType t = p.q.t.dtype;
  const int64_t n = p.key_valid.numel();
  void* bias = dev.scratch(kScratchAttnBias, static_cast<size_t>(n) * dtype_size(t));
  const float mask = scalar::attention_mask_rounded(t, p.mask_value);  // step 1 of the mask rule
  attention_bias_kernel<<<dev.elementwise_grid(n), kThreads, 0, dev.stream()>>>(
      bias, t, static_cast<const int32_t*>(p.key_valid.data), n, mask);
  MPB_CHECK_LAUNCH("attention_bias_kernel");
  return bias;
}

}  // namespace

bool cudnn_attention_forward(CudaDevice& dev, CudnnSdpa& sdpa, const AttentionProblem& p, const AttnOperand& out,
                             const Tensor& lse) {
  const SdpaChoice choice = forward_plan(sdpa, p, out);
  if (SdpaPlan* plan = choice.plan) {
    SdpaForwardArgs a;
    a.out = first_element_mut(out);
    a.lse = static_cast<float*>(lse.data);
    a.q = first_element(p.q), a.k = first_element(p.k), a.v = first_element(p.v);
    a.bias = build_attention_bias(dev, p);
    a.seed_offset = upload_dropout_seed(dev, p);
    sdpa.forward(*plan, a, cudnn_workspace(dev, *plan));
    dev.note_attention_impl(CudnnSdpa::impl_label(*plan));
    return true;
  }
  note_kernel_reason(dev, choice);
  return false;
}

bool cudnn_attention_backward(CudaDevice& dev, CudnnSdpa& sdpa, const AttentionProblem& p, const AttnOperand& dq,
                              const AttnOperand& dk, const AttnOperand& dv, const AttnOperand& dout,
                              const AttnOperand& out, const Tensor& lse) {
  const char* op = "attention_backward";
  // Independent of the forward's choice: lse means the same on both paths.
  // The graph gives each gradient its operand's strides (SdpaKey).
  const bool same_strides = strides_of(dq.at) == strides_of(p.q.at) && strides_of(dk.at) == strides_of(p.k.at) &&
                            strides_of(dv.at) == strides_of(p.v.at) && strides_of(dout.at) == strides_of(out.at);
  const SdpaChoice choice = same_strides ? cudnn_plan(sdpa, sdpa_key(p, out.at, true),
                                                      {&dq, &dk, &dv, &dout, &out, &p.q, &p.k, &p.v})
                                         : SdpaChoice{};
  SdpaPlan* plan = choice.plan;
  // With dropout the forward chose the implementation (forward_plan): a
  // backward that cannot follow it would apply another mask.
  if (p.dropout.p > 0.0f && (forward_plan(sdpa, p, out).plan != nullptr) != (plan != nullptr))
    throw DeviceError(std::string(op) + ": with dropout, the forward of this call ran " +
                      (plan ? "the hand-written kernel" : "cuDNN SDPA") + " but the backward's gradients (dtype, " +
                      "strides or alignment) take the other, whose dropout mask differs");
  if (plan) {
    SdpaBackwardArgs a;
    a.dq = first_element_mut(dq), a.dk = first_element_mut(dk), a.dv = first_element_mut(dv);
    a.dout = first_element(dout), a.out = first_element(out);
    a.q = first_element(p.q), a.k = first_element(p.k), a.v = first_element(p.v);
    a.lse = static_cast<const float*>(lse.data);
    a.bias = build_attention_bias(dev, p);
    a.seed_offset = upload_dropout_seed(dev, p);
    sdpa.backward(*plan, a, cudnn_workspace(dev, *plan));
    dev.note_attention_impl(CudnnSdpa::impl_label(*plan));
    return true;
  }
  note_kernel_reason(dev, choice);
  return false;
}

}  // namespace mpb::cuda

#endif  // MPB_HAVE_CUDNN_FRONTEND
