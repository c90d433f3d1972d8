// cuDNN SDPA graphs through cudnn_frontend (see attention_cudnn.h). The one
// translation unit that includes cudnn_frontend: keep it that way, the
// frontend takes about a minute to compile.
#ifdef MPB_HAVE_CUDNN_FRONTEND

#include "backends/cuda/attention_cudnn.h"

// The frontend's JSON (serialisation, logging) is not used; skipping it keeps
// its bundled nlohmann::json out of a binary that links the system's.
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#include <cudnn_frontend.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/ordinal_plan_cache.h"
#include "backends/cuda/plan_key.h"
#include "backends/cuda/sdpa_policy.h"

namespace mpb::cuda {

namespace fe = cudnn_frontend;

namespace {

// Tensor uids of the variant packs.
enum : int64_t { kQ = 1, kK, kV, kBias, kO, kStats, kDO, kDQ, kDK, kDV, kSeed, kOffset };

const char* code_name(fe::error_code_t c) {
  switch (c) {
    case fe::error_code_t::OK: return "OK";
    case fe::error_code_t::ATTRIBUTE_NOT_SET: return "ATTRIBUTE_NOT_SET";
    case fe::error_code_t::SHAPE_DEDUCTION_FAILED: return "SHAPE_DEDUCTION_FAILED";
    case fe::error_code_t::INVALID_TENSOR_NAME: return "INVALID_TENSOR_NAME";
    case fe::error_code_t::INVALID_VARIANT_PACK: return "INVALID_VARIANT_PACK";
    case fe::error_code_t::GRAPH_NOT_SUPPORTED: return "GRAPH_NOT_SUPPORTED";
    case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED: return "GRAPH_EXECUTION_PLAN_CREATION_FAILED";
    case fe::error_code_t::GRAPH_EXECUTION_FAILED: return "GRAPH_EXECUTION_FAILED";
    case fe::error_code_t::HEURISTIC_QUERY_FAILED: return "HEURISTIC_QUERY_FAILED";
    case fe::error_code_t::UNSUPPORTED_GRAPH_FORMAT: return "UNSUPPORTED_GRAPH_FORMAT";
    case fe::error_code_t::CUDA_API_FAILED: return "CUDA_API_FAILED";
    case fe::error_code_t::CUDNN_BACKEND_API_FAILED: return "CUDNN_BACKEND_API_FAILED";
    case fe::error_code_t::INVALID_CUDA_DEVICE: return "INVALID_CUDA_DEVICE";
    case fe::error_code_t::HANDLE_ERROR: return "HANDLE_ERROR";
    case fe::error_code_t::INVALID_VALUE: return "INVALID_VALUE";
    case fe::error_code_t::NVRTC_COMPILATION_FAILED: return "NVRTC_COMPILATION_FAILED";
  }
  return "unknown error code";
}

std::string message(const SdpaKey& key, const char* step, fe::error_t& e) {
  return "cuDNN SDPA: " + key.describe() + ": " + step + ": " + code_name(e.get_code()) + ": " + e.get_message();
}

[[noreturn]] void throw_fe(const SdpaKey& key, const char* step, fe::error_t& e) {
  throw DeviceError(message(key, step, e));
}

// A cuDNN handle, owned: cudnnDestroy when released. `stream_user` is the
// CudnnSdpa (by its serial number; 0: none) whose stream the handle is set
// to: devices of one GPU share the handle, each with its own stream.
class CudnnHandle {
 public:
  CudnnHandle() = default;
  explicit CudnnHandle(cudnnHandle_t h) : h_(h) {}
  CudnnHandle(CudnnHandle&& o) noexcept : stream_user(o.stream_user), h_(o.h_) { o.h_ = nullptr; }
  CudnnHandle& operator=(CudnnHandle&& o) noexcept {
    if (this != &o) {
      release();
      h_ = o.h_, stream_user = o.stream_user;
      o.h_ = nullptr;
    }
    return *this;
  }
  ~CudnnHandle() { release(); }
  explicit operator bool() const { return h_ != nullptr; }
  cudnnHandle_t get() const { return h_; }
  uint64_t stream_user = 0;

 private:
  void release() {
    if (!h_) return;
    const cudnnStatus_t st = cudnnDestroy(h_);
    if (st != CUDNN_STATUS_SUCCESS)
      std::fprintf(stderr, "mpbench cuda: cudnnDestroy failed: %s\n", cudnnGetErrorString(st));
    h_ = nullptr;
  }
  cudnnHandle_t h_ = nullptr;
};

// The current CUDA device's cuDNN handle, or an empty one with the reason:
// cuDNN 9 loads its sub-libraries (libcudnn_graph, engines_*) on demand, so
// a missing one shows up here or in a graph build, not at link time.
CudnnHandle make_handle(std::string* failure) {
  cudnnHandle_t h = nullptr;
  const cudnnStatus_t st = cudnnCreate(&h);
  if (st == CUDNN_STATUS_SUCCESS) return CudnnHandle(h);
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  *failure = std::string("cudnnCreate: ") + cudnnGetErrorString(st) + (detail[0] ? std::string(": ") + detail : "");
  (void)cudaGetLastError();  // nothing of this may reach the next launch check
  return CudnnHandle();
}

fe::DataType_t fe_type(DType t) {
  switch (t) {
    case DType::F16: return fe::DataType_t::HALF;
    case DType::BF16: return fe::DataType_t::BFLOAT16;
    default: throw std::invalid_argument(std::string("cuDNN SDPA: no graph for dtype ") + dtype_name(t));
  }
}

// [b, h, t, d] with the layout's strides (d contiguous).
std::vector<int64_t> strides(const HeadLayout& l) { return {l.batch, l.head, l.row, 1}; }
fe::graph::Tensor_attributes bhtd(const char* name, int64_t uid, int64_t b, int64_t h, int64_t t, int64_t d,
                                  const HeadLayout& l) {
  return fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({b, h, t, d}).set_stride(strides(l));
}

// Everything a graph depends on, as plan-key words (backends/cuda/plan_key.h);
// the scale by its bits: the graph bakes in exactly this float.
PlanKeyWords<21> words(const SdpaKey& k) {
  uint32_t scale_bits = 0, dropout_bits = 0;
  std::memcpy(&scale_bits, &k.scale, sizeof scale_bits);
  std::memcpy(&dropout_bits, &k.dropout, sizeof dropout_bits);
  return {static_cast<int64_t>(k.dtype), k.B, k.H, k.Tq, k.Tk, k.D, static_cast<int64_t>(scale_bits),
          static_cast<int64_t>(k.backward), k.q_at.batch, k.q_at.head, k.q_at.row, k.k_at.batch, k.k_at.head, k.k_at.row,
          k.v_at.batch, k.v_at.head, k.v_at.row, k.o_at.batch, k.o_at.head, k.o_at.row,
          static_cast<int64_t>(dropout_bits)};
}

struct KeyHash {
  size_t operator()(const SdpaKey& k) const { return PlanKeyHash()(words(k)); }
};

}  // namespace

struct SdpaPlan {
  SdpaKey key;
  std::shared_ptr<fe::graph::Graph> graph;  // null when refused
  SdpaBiasForm bias_form = SdpaBiasForm::kBroadcast;  // the form the graph declares
  SdpaVerdict verdict = SdpaVerdict::kRuns;
  size_t workspace = 0;
  std::string refusal;  // every form's reason, when no graph was built
  // uid -> device pointer, every uid of the graph present from the start, so
  // a call assigns values and inserts nothing.
  std::unordered_map<int64_t, void*> pack;
};

bool SdpaKey::operator==(const SdpaKey& o) const { return words(*this) == words(o); }

std::string SdpaKey::describe() const {
  return std::string(backward ? "backward " : "forward ") + dtype_name(dtype) + " B" + std::to_string(B) + " H" +
         std::to_string(H) + " Tq" + std::to_string(Tq) + " Tk" + std::to_string(Tk) + " D" + std::to_string(D) +
         " scale " + std::to_string(scale) + (q_at == heads_layout(H, Tq, D) ? "" : " packed") +
         (dropout > 0.0f ? " dropout " + std::to_string(dropout) : "");
}

namespace {

using SdpaCache = OrdinalPlanCache<CudnnHandle, SdpaKey, SdpaPlan, KeyHash>;

// The process's one cache, made by the first fp16/bf16 attention call and
// released at exit: its graphs first, then the handles (the cache's order),
// while the CUDA runtime and the cuDNN libraries are still up. The runtime
// registered its own teardown when it started, before any device existed,
// so it runs after ours; cuDNN 9 dlopens its sub-libraries (graph, engines,
// NVRTC) inside cudnnCreate and the first graph builds, and their static
// destructors run in reverse order of loading, interleaved with atexit
// handlers. So the release is registered again after every library load
// (the handle made, each graph built) and the last registration, which
// runs first, precedes everything loaded so far. It runs once; later calls
// find nothing. A device still alive then (one held in a static) finds
// `g_sdpa_cache_released` and leaves the handle alone.
SdpaCache* g_sdpa_cache = nullptr;
bool g_sdpa_cache_released = false;

SdpaCache& process_cache() {
  if (!g_sdpa_cache) g_sdpa_cache = new SdpaCache;
  return *g_sdpa_cache;
}

void release_process_cache() {
  delete g_sdpa_cache;  // ~OrdinalPlanCache: each GPU's graphs, then its handle
  g_sdpa_cache = nullptr;
  g_sdpa_cache_released = true;
}

void release_after_these_libraries() {
  if (std::atexit(release_process_cache) != 0)
    std::fprintf(stderr, "mpbench cuda: cannot register the cuDNN graphs' release at exit; the process leaves "
                         "them to the driver\n");
}

// Each CudnnSdpa's number, for CudnnHandle::stream_user (an address could be
// reused by the next device).
std::atomic<uint64_t> g_next_serial{1};

// CudnnSdpa::set_first_bias_form's choice.
SdpaBiasForm g_first_bias_form = SdpaBiasForm::kPerQuery;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

struct CudnnSdpa::Impl {
  CudaDevice& dev;
  const uint64_t serial = g_next_serial.fetch_add(1);
  SdpaCache::Context* ctx = nullptr;  // this GPU's, from the first prepare()

  explicit Impl(CudaDevice& d) : dev(d) {}

  // The graph of `key`, without building it (validate() does that).
  static std::shared_ptr<fe::graph::Graph> describe_graph(const SdpaKey& k, SdpaBiasForm form) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe_type(k.dtype))
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto Q = g->tensor(bhtd("Q", kQ, k.B, k.H, k.Tq, k.D, k.q_at));
    auto K = g->tensor(bhtd("K", kK, k.B, k.H, k.Tk, k.D, k.k_at));
    auto V = g->tensor(bhtd("V", kV, k.B, k.H, k.Tk, k.D, k.v_at));
    // The padding mask as an additive bias over heads and queries
    // (ops/attention.h attention_bias: 0, the rounded mask value, or NaN),
    // in the form this attempt declares (sdpa_policy.h).
    const SdpaBiasDims bd = sdpa_bias_dims(form, k.B, k.Tq, k.Tk);
    auto bias = g->tensor(fe::graph::Tensor_attributes()
                              .set_name("bias")
                              .set_uid(kBias)
                              .set_dim(std::vector<int64_t>(bd.dim.begin(), bd.dim.end()))
                              .set_stride(std::vector<int64_t>(bd.stride.begin(), bd.stride.end())));
    // Dropout's Philox seed and offset: int64 scalars in device memory.
    std::shared_ptr<fe::graph::Tensor_attributes> seed, offset;
    if (k.dropout > 0.0f) {
      auto scalar = [&](const char* name, int64_t uid) {
        return g->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({1, 1, 1, 1})
                             .set_stride({1, 1, 1, 1})
                             .set_data_type(fe::DataType_t::INT64));
      };
      seed = scalar("Seed", kSeed), offset = scalar("Offset", kOffset);
    }
    if (!k.backward) {
      auto opts = fe::graph::SDPA_attributes()
                      .set_name("sdpa_forward")
                      .set_generate_stats(true)  // Stats = lse, what the backward needs
                      .set_attn_scale(k.scale)
                      .set_bias(bias);
      if (seed) opts.set_dropout(k.dropout, seed, offset);
      auto [O, Stats] = g->sdpa(Q, K, V, opts);
      O->set_output(true).set_uid(kO).set_dim({k.B, k.H, k.Tq, k.D}).set_stride(strides(k.o_at));
      Stats->set_output(true)
          .set_uid(kStats)
          .set_data_type(fe::DataType_t::FLOAT)
          .set_dim({k.B, k.H, k.Tq, 1})
          .set_stride({k.H * k.Tq, k.Tq, 1, 1});
    } else {
      auto O = g->tensor(bhtd("O", kO, k.B, k.H, k.Tq, k.D, k.o_at));
      auto dO = g->tensor(bhtd("dO", kDO, k.B, k.H, k.Tq, k.D, k.o_at));
      auto Stats = g->tensor(fe::graph::Tensor_attributes()
                                 .set_name("Stats")
                                 .set_uid(kStats)
                                 .set_dim({k.B, k.H, k.Tq, 1})
                                 .set_stride({k.H * k.Tq, k.Tq, 1, 1})
                                 .set_data_type(fe::DataType_t::FLOAT));
      // Deterministic: the same dQ/dK/dV bits on every run, as every other
      // backward op of the project (no atomics in the reductions).
      auto opts = fe::graph::SDPA_backward_attributes()
                      .set_name("sdpa_backward")
                      .set_attn_scale(k.scale)
                      .set_bias(bias)
                      .set_deterministic_algorithm(true);
      if (seed) opts.set_dropout(k.dropout, seed, offset);
      auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, opts);
      dQ->set_output(true).set_uid(kDQ).set_dim({k.B, k.H, k.Tq, k.D}).set_stride(strides(k.q_at));
      dK->set_output(true).set_uid(kDK).set_dim({k.B, k.H, k.Tk, k.D}).set_stride(strides(k.k_at));
      dV->set_output(true).set_uid(kDV).set_dim({k.B, k.H, k.Tk, k.D}).set_stride(strides(k.v_at));
    }
    return g;
  }

  // One build attempt of `key` with the bias in `form`: the graph, or null
  // with the failure's kind and message in *failure / *why. Errors that are
  // neither a refusal nor a plan failure (sdpa_policy.h) throw.
  std::shared_ptr<fe::graph::Graph> try_build(const SdpaKey& key, SdpaBiasForm form, SdpaFailure* failure,
                                              std::string* why, size_t* workspace) {
    std::shared_ptr<fe::graph::Graph> g = describe_graph(key, form);
    cudnnHandle_t handle = ctx->handle.get();
    const auto failed = [&](SdpaBuildStep step, fe::error_t& err) {
      const fe::error_code_t c = err.get_code();
      *failure = classify_sdpa_failure(step, c == fe::error_code_t::GRAPH_NOT_SUPPORTED,
                                       c == fe::error_code_t::HEURISTIC_QUERY_FAILED);
      if (*failure == SdpaFailure::kError) throw_fe(key, sdpa_step_name(step), err);
      *why = message(key, sdpa_step_name(step), err) + " (" + sdpa_bias_form_name(form) + ")";
      return nullptr;
    };
    if (fe::error_t err = g->validate(); err.is_bad()) return failed(SdpaBuildStep::kValidate, err);
    if (fe::error_t err = g->build_operation_graph(handle); err.is_bad())
      return failed(SdpaBuildStep::kBuildOperationGraph, err);
    if (fe::error_t err = g->create_execution_plans({fe::HeurMode_t::A}); err.is_bad())
      return failed(SdpaBuildStep::kCreateExecutionPlans, err);
    if (fe::error_t err = g->check_support(); err.is_bad()) return failed(SdpaBuildStep::kCheckSupport, err);
    if (fe::error_t err = g->build_plans(); err.is_bad()) return failed(SdpaBuildStep::kBuildPlans, err);
    int64_t ws = 0;
    if (fe::error_t err = g->get_workspace_size(ws); err.is_bad()) return failed(SdpaBuildStep::kWorkspaceSize, err);
    if (ws < 0) throw DeviceError("cuDNN SDPA: " + key.describe() + ": negative workspace size " + std::to_string(ws));
    *workspace = static_cast<size_t>(ws);
    return g;
  }

  // Builds the key's plan: each bias form in turn (SdpaBiasAttempts), each
  // attempt a plan creation on this device. One stderr line per key with
  // the time it took; a refusal's line is its only report (it is cached).
  SdpaPlan build(const SdpaKey& key) {
    SdpaPlan e;
    e.key = key;
    SdpaBiasAttempts attempts(key.backward, g_first_bias_form);
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      dev.note_plan_created();
      SdpaFailure failure = SdpaFailure::kRefused;
      std::string why;
      e.graph = try_build(key, attempts.form(), &failure, &why, &e.workspace);
      if (e.graph) {
        e.bias_form = attempts.form();
        std::fprintf(stderr, "mpbench cuda: cuDNN SDPA graph %s (%s) built in %.1f ms\n", key.describe().c_str(),
                     sdpa_bias_form_name(e.bias_form), ms_since(t0));
        break;
      }
      e.refusal += (e.refusal.empty() ? "" : "; then ") + why;
      if (!attempts.failed(failure)) {
        e.verdict = attempts.verdict();
        const char* label = sdpa_fallback_label(e.verdict);
        std::fprintf(stderr,
                     "mpbench cuda: %s; after %.1f ms of graph building, fused attention at this shape runs the "
                     "hand-written kernel (attention_impl %s)\n",
                     e.refusal.c_str(), ms_since(t0), label ? label : "cuda_kernel");
        return e;
      }
    }
    static const std::vector<int64_t> forward_uids{kQ, kK, kV, kBias, kO, kStats};
    static const std::vector<int64_t> backward_uids{kQ, kK, kV, kBias, kO, kDO, kStats, kDQ, kDK, kDV};
    for (int64_t uid : key.backward ? backward_uids : forward_uids) e.pack.emplace(uid, nullptr);
    if (key.dropout > 0.0f) e.pack.emplace(kSeed, nullptr), e.pack.emplace(kOffset, nullptr);
    return e;
  }

  void execute(SdpaPlan& p, void* workspace) {
    if (!p.graph)
      throw std::logic_error("cuDNN SDPA: " + p.key.describe() + " executed although cuDNN refused it");
    if (p.workspace > 0 && workspace == nullptr)
      throw std::logic_error("cuDNN SDPA: " + p.key.describe() + " needs " + std::to_string(p.workspace) +
                             " bytes of workspace, got none");
    CudnnHandle& h = ctx->handle;
    if (h.stream_user != serial) {  // another device of this GPU set it to its stream
      MPB_CUDNN_CHECK(cudnnSetStream(h.get(), dev.stream()));
      h.stream_user = serial;
    }
    if (fe::error_t err = p.graph->execute(h.get(), p.pack, workspace); err.is_bad()) throw_fe(p.key, "execute", err);
  }
};

namespace {
// Sets a uid's pointer in a plan's pack (present since the plan was built).
void bind_ptr(SdpaPlan& p, int64_t uid, const void* ptr) { p.pack.at(uid) = const_cast<void*>(ptr); }
// A dropout plan's seed and offset (consecutive int64s); none without dropout.
void bind_seed(SdpaPlan& p, const int64_t* seed_offset) {
  if (p.key.dropout <= 0.0f) return;
  if (!seed_offset) throw std::logic_error("cuDNN SDPA: " + p.key.describe() + " needs a dropout seed, got none");
  bind_ptr(p, kSeed, seed_offset);
  bind_ptr(p, kOffset, seed_offset + 1);
}
}  // namespace

CudnnSdpa::CudnnSdpa(CudaDevice& dev) : impl_(std::make_unique<Impl>(dev)) {}

CudnnSdpa::~CudnnSdpa() {
  // The handle outlives this device: it must not keep its destroyed stream.
  if (!impl_->ctx || g_sdpa_cache_released) return;
  CudnnHandle& h = impl_->ctx->handle;
  if (!h || h.stream_user != impl_->serial) return;
  const cudnnStatus_t st = cudnnSetStream(h.get(), nullptr);
  if (st != CUDNN_STATUS_SUCCESS)
    std::fprintf(stderr, "mpbench cuda: cudnnSetStream(handle, default stream) failed: %s\n",
                 cudnnGetErrorString(st));
  h.stream_user = 0;
}

SdpaChoice CudnnSdpa::prepare(const SdpaKey& key) {
  Impl& m = *impl_;
  if (!m.ctx) {
    bool first = false;
    MPB_CUDA_CHECK(cudaSetDevice(m.dev.ordinal()));  // cudnnCreate binds the current device
    m.ctx = &process_cache().context(m.dev.ordinal(), make_handle, &first);
    if (first && m.ctx->handle) release_after_these_libraries();
    if (first && !m.ctx->handle)
      std::fprintf(stderr,
                   "mpbench cuda: cuDNN is unavailable on GPU %d (%s); every fused attention call on it runs the "
                   "hand-written kernel (attention_impl %s)\n",
                   m.dev.ordinal(), m.ctx->failure.c_str(), sdpa_fallback_label(SdpaVerdict::kNoHandle));
  }
  if (!m.ctx->handle) return {nullptr, sdpa_fallback_label(SdpaVerdict::kNoHandle)};
  SdpaPlan* p = SdpaCache::find(*m.ctx, key);
  if (!p) {
    p = &SdpaCache::insert(*m.ctx, key, m.build(key));
    release_after_these_libraries();  // the build may have loaded engine libraries
  }
  if (!p->graph) return {nullptr, sdpa_fallback_label(p->verdict)};
  return {p, nullptr};
}

size_t CudnnSdpa::workspace_bytes(const SdpaPlan& plan) { return plan.workspace; }

const char* CudnnSdpa::impl_label(const SdpaPlan& plan) { return sdpa_impl_label(plan.bias_form); }

void CudnnSdpa::forward(SdpaPlan& p, const SdpaForwardArgs& a, void* workspace) {
  if (p.key.backward) throw std::logic_error("cuDNN SDPA: forward() with a backward plan");
  for (const auto& [uid, ptr] : {std::pair<int64_t, const void*>{kQ, a.q}, {kK, a.k}, {kV, a.v}, {kBias, a.bias},
                                 {kO, a.out}, {kStats, a.lse}})
    bind_ptr(p, uid, ptr);
  bind_seed(p, a.seed_offset);
  impl_->execute(p, workspace);
}

void CudnnSdpa::backward(SdpaPlan& p, const SdpaBackwardArgs& a, void* workspace) {
  if (!p.key.backward) throw std::logic_error("cuDNN SDPA: backward() with a forward plan");
  for (const auto& [uid, ptr] : {std::pair<int64_t, const void*>{kQ, a.q}, {kK, a.k}, {kV, a.v}, {kBias, a.bias},
                                 {kO, a.out}, {kDO, a.dout}, {kStats, a.lse}, {kDQ, a.dq}, {kDK, a.dk}, {kDV, a.dv}})
    bind_ptr(p, uid, ptr);
  bind_seed(p, a.seed_offset);
  impl_->execute(p, workspace);
}

size_t CudnnSdpa::cached_graphs() { return process_cache().plans(); }

void CudnnSdpa::set_first_bias_form(SdpaBiasForm form) { g_first_bias_form = form; }

}  // namespace mpb::cuda

#endif  // MPB_HAVE_CUDNN_FRONTEND
