// cuDNN SDPA graphs through cudnn_frontend (see attention_cudnn.h). The one
// translation unit that includes cudnn_frontend: keep it that way, the
// frontend takes about a minute to compile.
#ifdef MPB_HAVE_CUDNN_FRONTEND

#include "backends/cuda/attention_cudnn.h"

// The frontend's JSON (serialisation, logging) is not used; skipping it keeps
// its bundled nlohmann::json out of a binary that links the system's.
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#include <cudnn_frontend.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/plan_key.h"

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
  size_t workspace = 0;
  std::string refusal;
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

struct CudnnSdpa::Impl {
  CudaDevice& dev;
  cudnnHandle_t handle = nullptr;
  std::unordered_map<SdpaKey, SdpaPlan, KeyHash> graphs;  // node-based: a plan's address never changes

  explicit Impl(CudaDevice& d) : dev(d) {}
  ~Impl() {
    graphs.clear();  // the plans before the handle they were built with
    if (handle) {
      const cudnnStatus_t st = cudnnDestroy(handle);
      if (st != CUDNN_STATUS_SUCCESS)
        std::fprintf(stderr, "mpbench cuda: cudnnDestroy failed: %s\n", cudnnGetErrorString(st));
    }
  }

  // The graph of `key`, without building it (validate() does that).
  std::shared_ptr<fe::graph::Graph> describe_graph(const SdpaKey& k) const {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe_type(k.dtype))
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto Q = g->tensor(bhtd("Q", kQ, k.B, k.H, k.Tq, k.D, k.q_at));
    auto K = g->tensor(bhtd("K", kK, k.B, k.H, k.Tk, k.D, k.k_at));
    auto V = g->tensor(bhtd("V", kV, k.B, k.H, k.Tk, k.D, k.v_at));
    // The padding mask as an additive bias, broadcast over heads and queries
    // (ops/attention.h attention_bias: 0, the rounded mask value, or NaN).
    auto bias = g->tensor(fe::graph::Tensor_attributes()
                              .set_name("bias")
                              .set_uid(kBias)
                              .set_dim({k.B, 1, 1, k.Tk})
                              .set_stride({k.Tk, k.Tk, k.Tk, 1}));
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

  // Builds and caches the key's graph. "Not supported" answers (validate's
  // support surface, the heuristics finding no engine, check_support finding
  // no plan that runs the graph) are cached refusals; any other failure
  // throws.
  SdpaPlan& entry(const SdpaKey& key) {
    if (auto it = graphs.find(key); it != graphs.end()) return it->second;
    dev.note_plan_created();
    SdpaPlan e;
    e.key = key;
    auto refuse = [&](const char* step, fe::error_t& err) -> SdpaPlan& {
      e.graph.reset();
      e.refusal = message(key, step, err);
      // Once per shape (the refusal is cached); every call it affects is
      // counted as "cuda_kernel" in the cell's attention_impl.
      std::fprintf(stderr, "mpbench cuda: %s; fused attention at this shape runs the hand-written kernel\n",
                   e.refusal.c_str());
      return graphs.emplace(key, std::move(e)).first->second;
    };
    std::shared_ptr<fe::graph::Graph> g = describe_graph(key);
    if (fe::error_t err = g->validate(); err.is_bad()) {
      if (err.get_code() == fe::error_code_t::GRAPH_NOT_SUPPORTED) return refuse("validate", err);
      throw_fe(key, "validate", err);
    }
    if (fe::error_t err = g->build_operation_graph(handle); err.is_bad()) {
      if (err.get_code() == fe::error_code_t::GRAPH_NOT_SUPPORTED) return refuse("build_operation_graph", err);
      throw_fe(key, "build_operation_graph", err);
    }
    if (fe::error_t err = g->create_execution_plans({fe::HeurMode_t::A}); err.is_bad()) {
      if (err.get_code() == fe::error_code_t::GRAPH_NOT_SUPPORTED ||
          err.get_code() == fe::error_code_t::HEURISTIC_QUERY_FAILED)
        return refuse("create_execution_plans", err);
      throw_fe(key, "create_execution_plans", err);
    }
    // The graph's own verdict on this GPU and cuDNN version: any failure
    // here is "no engine runs this graph".
    if (fe::error_t err = g->check_support(); err.is_bad()) return refuse("check_support", err);
    if (fe::error_t err = g->build_plans(); err.is_bad()) throw_fe(key, "build_plans", err);
    int64_t ws = 0;
    if (fe::error_t err = g->get_workspace_size(ws); err.is_bad()) throw_fe(key, "get_workspace_size", err);
    if (ws < 0) throw DeviceError("cuDNN SDPA: " + key.describe() + ": negative workspace size " + std::to_string(ws));
    e.graph = std::move(g);
    e.workspace = static_cast<size_t>(ws);
    static const std::vector<int64_t> forward_uids{kQ, kK, kV, kBias, kO, kStats};
    static const std::vector<int64_t> backward_uids{kQ, kK, kV, kBias, kO, kDO, kStats, kDQ, kDK, kDV};
    for (int64_t uid : key.backward ? backward_uids : forward_uids) e.pack.emplace(uid, nullptr);
    if (key.dropout > 0.0f) e.pack.emplace(kSeed, nullptr), e.pack.emplace(kOffset, nullptr);
    return graphs.emplace(key, std::move(e)).first->second;
  }

  void execute(SdpaPlan& p, void* workspace) {
    if (!p.graph)
      throw std::logic_error("cuDNN SDPA: " + p.key.describe() + " executed although cuDNN refused it");
    if (p.workspace > 0 && workspace == nullptr)
      throw std::logic_error("cuDNN SDPA: " + p.key.describe() + " needs " + std::to_string(p.workspace) +
                             " bytes of workspace, got none");
    if (fe::error_t err = p.graph->execute(handle, p.pack, workspace); err.is_bad()) throw_fe(p.key, "execute", err);
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

CudnnSdpa::CudnnSdpa(CudaDevice& dev) : impl_(std::make_unique<Impl>(dev)) {
  MPB_CUDNN_CHECK(cudnnCreate(&impl_->handle));
  MPB_CUDNN_CHECK(cudnnSetStream(impl_->handle, dev.stream()));
}

CudnnSdpa::~CudnnSdpa() = default;

SdpaPlan* CudnnSdpa::prepare(const SdpaKey& key, std::string* reason) {
  SdpaPlan& p = impl_->entry(key);
  if (!p.graph) {
    if (reason) *reason = p.refusal;
    return nullptr;
  }
  return &p;
}

size_t CudnnSdpa::workspace_bytes(const SdpaPlan& plan) { return plan.workspace; }

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

size_t CudnnSdpa::cached_graphs() const { return impl_->graphs.size(); }

}  // namespace mpb::cuda

#endif  // MPB_HAVE_CUDNN_FRONTEND
