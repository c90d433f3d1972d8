// The decisions of the cuDNN SDPA path that need no GPU, kept apart so the
// CPU tests (tests/gpu/test_sdpa_policy.cpp) prove them: the shapes the
// padding bias can be declared with and which to try after cuDNN refuses
// one, what a failure at each graph-build step means, and the label each
// fused attention call is counted under (DeviceCounters::attention_impls,
// the cell JSON's attention_impl). Plain C++: no CUDA or cuDNN header, so
// it compiles and is tested in every build.
#pragma once

#include <array>
#include <cstdint>

namespace mpb::cuda {

// How the graph declares the padding bias. The memory is the same [B, Tk]
// values either way (attention_sdpa_call.cu's attention_bias_kernel), so a retry in
// the other form needs no other buffer.
enum class SdpaBiasForm {
  // dims {B,1,1,Tk}, strides {Tk,Tk,Tk,1}: broadcast over heads and queries.
  // Forward only (SdpaBiasAttempts).
  kBroadcast,
  // dims {B,1,Tq,Tk}, strides {Tk,Tk,0,1}: the query dimension spelt out
  // with stride 0, the (1|B, 1|H, S_q, S_kv) shape cudnn_frontend's
  // Attention docs list, and the form PyTorch hands cuDNN.
  kPerQuery,
};

struct SdpaBiasDims {
  std::array<int64_t, 4> dim, stride;
};

inline SdpaBiasDims sdpa_bias_dims(SdpaBiasForm form, int64_t B, int64_t Tq, int64_t Tk) {
  if (form == SdpaBiasForm::kPerQuery) return {{B, 1, Tq, Tk}, {Tk, Tk, 0, 1}};
  return {{B, 1, 1, Tk}, {Tk, Tk, Tk, 1}};
}

// For messages: "bias [B,1,1,Tk]".
inline const char* sdpa_bias_form_name(SdpaBiasForm form) {
  return form == SdpaBiasForm::kPerQuery ? "bias [B,1,Tq,Tk] stride 0 on Tq" : "bias [B,1,1,Tk]";
}

// The graph-build steps of one bias form, in order (cudnn_frontend's Graph).
enum class SdpaBuildStep {
  kValidate,
  kBuildOperationGraph,
  kCreateExecutionPlans,
  kCheckSupport,
  kBuildPlans,
  kWorkspaceSize,
};

inline const char* sdpa_step_name(SdpaBuildStep s) {
  switch (s) {
    case SdpaBuildStep::kValidate: return "validate";
    case SdpaBuildStep::kBuildOperationGraph: return "build_operation_graph";
    case SdpaBuildStep::kCreateExecutionPlans: return "create_execution_plans";
    case SdpaBuildStep::kCheckSupport: return "check_support";
    case SdpaBuildStep::kBuildPlans: return "build_plans";
    case SdpaBuildStep::kWorkspaceSize: return "get_workspace_size";
  }
  return "unknown step";
}

// What a failed build step means for the shape.
enum class SdpaFailure {
  kRefused,     // cuDNN does not run this graph on this GPU and version
  kPlanFailed,  // the plan could not be made (build_plans: NVRTC, plan creation)
  kError,       // anything else: a bug in the graph or the library; DeviceError
};

// not_supported: the frontend answered GRAPH_NOT_SUPPORTED; no_heuristic:
// HEURISTIC_QUERY_FAILED (no engine config for the graph).
inline SdpaFailure classify_sdpa_failure(SdpaBuildStep step, bool not_supported, bool no_heuristic) {
  switch (step) {
    case SdpaBuildStep::kValidate:
    case SdpaBuildStep::kBuildOperationGraph:
      return not_supported ? SdpaFailure::kRefused : SdpaFailure::kError;
    case SdpaBuildStep::kCreateExecutionPlans:
      return not_supported || no_heuristic ? SdpaFailure::kRefused : SdpaFailure::kError;
    // check_support is the graph's own verdict on this GPU and cuDNN: any
    // failure there is "no engine runs this graph".
    case SdpaBuildStep::kCheckSupport: return SdpaFailure::kRefused;
    // A plan that passed check_support and still cannot be built (the
    // runtime compile of an engine failed, a missing engine library) is a
    // refusal too: the hand-written kernel runs, labelled apart, rather than
    // every fp16/bf16 cell failing.
    case SdpaBuildStep::kBuildPlans: return SdpaFailure::kPlanFailed;
    case SdpaBuildStep::kWorkspaceSize: return SdpaFailure::kError;
  }
  return SdpaFailure::kError;
}

// Where one key's graph ended up.
enum class SdpaVerdict {
  kRuns,        // a graph was built: cuDNN runs the calls
  kRefused,     // every bias form refused: the hand-written kernel
  kPlanFailed,  // no form built, at least one at build_plans: the kernel
  kNoHandle,    // cuDNN's handle could not be made on this GPU: the kernel
};

// The bias forms one key tries, in order. A forward key: the per-query form
// first, then, after a refusal or a plan failure, the broadcast form; after
// that the key's verdict. A backward key: the per-query form only. On the
// first lease (H200, cuDNN 9.19.0, 2026-11-27) cuDNN built and ran a backward
// graph with the [B,1,1,Tk] bias without any error, but not as that bias:
// padded keys got nonzero dK and dV and dQ was off by up to 40x the value
// (results/gpu/20261127-0704-first-h200; TransformerEngine also lists a
// 1x1x1xS bias as forward-only in cuDNN). The per-query form matched the CPU
// in both directions (CudnnAttention.PerQueryBiasFormMatchesCpu), and the
// broadcast form's forward did too, so the broadcast form stays a forward
// fallback and a backward key cuDNN refuses runs the hand-written kernel.
class SdpaBiasAttempts {
 public:
  explicit SdpaBiasAttempts(bool backward, SdpaBiasForm first = SdpaBiasForm::kPerQuery)
      : form_(backward ? SdpaBiasForm::kPerQuery : first), forms_(backward ? 1 : 2) {}
  SdpaBiasForm form() const { return form_; }
  bool done() const { return done_; }
  // The attempt with form() failed as f (kRefused or kPlanFailed). True when
  // another form is to be tried: form() now names it.
  bool failed(SdpaFailure f) {
    if (f == SdpaFailure::kPlanFailed) plan_failed_ = true;
    if (++tried_ < forms_) {
      form_ = form_ == SdpaBiasForm::kBroadcast ? SdpaBiasForm::kPerQuery : SdpaBiasForm::kBroadcast;
      return true;
    }
    done_ = true;
    return false;
  }
  // After the last failure.
  SdpaVerdict verdict() const { return plan_failed_ ? SdpaVerdict::kPlanFailed : SdpaVerdict::kRefused; }

 private:
  SdpaBiasForm form_;
  int forms_;  // how many forms this key may try
  int tried_ = 0;
  bool plan_failed_ = false;
  bool done_ = false;
};

// attention_impls labels. A call cuDNN ran names the bias form its graph
// declared; a call the hand-written kernel ran because of cuDNN says why
// (the plain "cuda_kernel" is the device's own count: fp32, a refused or
// misaligned shape, a build without cudnn_frontend). Every label of the
// kernel begins with "cuda_kernel" and every cuDNN label with "cudnn_sdpa".
inline const char* sdpa_impl_label(SdpaBiasForm form) {
  return form == SdpaBiasForm::kPerQuery ? "cudnn_sdpa_bias_per_query" : "cudnn_sdpa";
}
// Null: no label of its own (kRefused: the device counts "cuda_kernel").
inline const char* sdpa_fallback_label(SdpaVerdict v) {
  switch (v) {
    case SdpaVerdict::kPlanFailed: return "cuda_kernel_cudnn_plan_failed";
    case SdpaVerdict::kNoHandle: return "cuda_kernel_cudnn_unavailable";
    case SdpaVerdict::kRuns:
    case SdpaVerdict::kRefused: return nullptr;
  }
  return nullptr;
}

}  // namespace mpb::cuda
