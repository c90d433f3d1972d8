// The Device interface: memory, copies, timing and every numeric op the models
// use. Models and the trainer only ever call these; the CPU and CUDA backends
// implement them over the same scalar cores (ops/*.h), which is what lets the
// CPU tests prove the math the GPU runs.
//
// Conventions
// - Row-major everywhere. A linear layer's weight is [out, in] (as in PyTorch).
// - Element-wise ops read any float dtype, compute in fp32, and write the
//   destination's dtype (rounding to nearest even).
// - GradMode::Overwrite writes a gradient, GradMode::Accumulate adds to it
//   (gradient accumulation across micro-batches).
// - Ops are asynchronous on asynchronous backends; functions returning host
//   values (sums, counts) synchronise, and count one host sync each
//   (counters()).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/attention_layout.h"
#include "core/device_capabilities.h"
#include "core/device_counters.h"
#include "core/fp8.h"
#include "core/memory_tracker.h"
#include "core/tensor.h"

namespace mpb {

class Device;

// Owning device allocation (RAII, move-only). Frees through its device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device* device, Tensor view, MemCategory category, size_t bytes)
      : device_(device), view_(view), category_(category), bytes_(bytes) {}
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  const Tensor& tensor() const { return view_; }
  operator const Tensor&() const { return view_; }  // NOLINT: a buffer is usable as its view
  MemCategory category() const { return category_; }
  size_t bytes() const { return bytes_; }
  bool empty() const { return view_.data == nullptr; }
  void release();

 private:
  Device* device_ = nullptr;
  Tensor view_;
  MemCategory category_ = MemCategory::Workspace;
  size_t bytes_ = 0;
};

// Measures elapsed device time between start() and stop() (CUDA events on the
// GPU, a steady clock after the work completes on the CPU).
class DeviceTimer {
 public:
  virtual ~DeviceTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double elapsed_ms() = 0;  // waits for stop() to complete
};

class Device;
// A profiler range for one scope (Device::range_push / range_pop).
class DeviceRange {
 public:
  DeviceRange(Device& dev, const char* name);
  DeviceRange(Device& dev, const std::string& name) : DeviceRange(dev, name.c_str()) {}
  ~DeviceRange();
  DeviceRange(const DeviceRange&) = delete;
  DeviceRange& operator=(const DeviceRange&) = delete;

 private:
  Device& dev_;
};

enum class GradMode { Overwrite, Accumulate };
enum class Activation { Relu, Gelu };  // Gelu: tanh approximation everywhere (matches cuBLASLt's epilogue)

// How a GEMM computes. Operand dtypes must match: F32/TF32 take fp32 operands,
// F16/BF16 take 2-byte operands; accumulation is always fp32.
enum class GemmCompute { F32, TF32, F16, BF16 };
const char* gemm_compute_name(GemmCompute c);  // "fp32", "tf32", "fp16", "bf16"
Feature gemm_feature(GemmCompute c);           // what Device::supports is asked for mode c

// Forward epilogues (Bias, BiasRelu, BiasGelu) add GemmArgs::bias [n] and
// apply the activation; they require alpha == 1 and beta == 0.
//
// Backward epilogues (the twins of cuBLASLt's CUBLASLT_EPILOGUE_DGELU and
// CUBLASLT_EPILOGUE_DGELU_BGRAD), for dX = (dY . W) * gelu'(pre) in the
// backward pass of a GELU layer. They require beta == 0 and batch == 1 (alpha
// is allowed: it scales the product before the GELU derivative), take no
// GemmArgs::bias, and read GemmArgs::pre_act [m,n] (any float dtype; the
// forward pre-activation, "aux" in cuBLASLt's terms; must not alias C):
//   DGelu:      C[i,j] = (alpha * op(A) op(B))[i,j] * gelu'(pre_act[i,j])
//               (scalar::gelu_grad, the tanh approximation).
//   DGeluBGrad: DGelu, plus GemmArgs::bias_grad_out [n] (any float dtype) =
//               sum over the m rows of the final C (Overwrite semantics, as
//               Device::bias_grad(bias_grad_out, C, GradMode::Overwrite);
//               a caller accumulating micro-batches must not use it).
// Both are, by contract, exactly the composition gemm(C); activation_backward
// (Gelu, C, C, pre_act); [bias_grad(bias_grad_out, C, Overwrite)]; the CPU
// backend computes that composition (bit for bit, C rounded to its dtype
// before the multiply); cuBLASLt fuses it (fp32 product times gelu' rounded
// once, cuBLASLt's own tanh): the GPU agrees within rounding, not bitwise.
//
// Not provided: a BGRADB twin for the weight-gradient GEMM. With mpbench's
// row-major -> column-major swap (cuBLASLt's B is our A), CUBLASLT_EPILOGUE_
// BGRADB would give out[i] = sum_p op(A)[i,p] (length m; for dW = dY^T X with
// trans_a that is the column sums of dY, i.e. db). It is left out: the weight
// gradient accumulates across micro-batches (beta == 1) while BGRAD writes, so
// the models could not use it in the common case.
enum class Epilogue { None, Bias, BiasRelu, BiasGelu, DGelu, DGeluBGrad };
inline bool is_backward_epilogue(Epilogue e) { return e == Epilogue::DGelu || e == Epilogue::DGeluBGrad; }

// An FP8 GEMM operand (Transformer Engine's recipe; scales from
// core/fp8_scaling.h). The operand stays in its dtype (the compute mode's) and
// is quantized on its way into the product: q = fp8(x * scale), saturating;
// the product is computed from q / scale (power-of-two scales make that exact,
// as cuBLASLt's descaling of the fp32 accumulator is), fp32 accumulation.
//   scale:     [1] float32 on the device, read.
//   amax:      empty, or [1] float32 on the device: max(amax, max |x|) is
//              written (NaN when x holds a NaN), so a caller zeroes it once
//              per step and micro-batches and several GEMMs reading one
//              tensor fold into it.
//   saturated: empty, or [1] float32: the count of elements with |x * scale|
//              above the format's max (clamped to it) is added.
// Only for batch == 1; the device must run Feature::GemmFp8 (supports()).
struct GemmFp8Operand {
  bool enabled = false;
  Fp8Format format = Fp8Format::E4M3;
  Tensor scale, amax, saturated;
};

struct GemmArgs {
  // C[m,n] = alpha * op(A)[m,k] . op(B)[k,n] + beta * C, then the epilogue.
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;  // A stored [k,m] / B stored [n,k] when transposed
  Tensor a, b, c;
  float alpha = 1.0f;
  float beta = 0.0f;  // 0: overwrite C; 1: accumulate into C
  GemmCompute compute = GemmCompute::F32;
  Epilogue epilogue = Epilogue::None;  // see Epilogue for alpha/beta rules
  Tensor bias;     // [n] any float dtype (the parameter's), for Bias* epilogues
  // Forward epilogues: optional [m,n], receives C before the activation (for
  // backward). DGelu/DGeluBGrad: required [m,n] input, the forward pre-activation.
  Tensor pre_act;
  Tensor bias_grad_out;  // DGeluBGrad only: [n] any float dtype, written (Overwrite)
  // Strided batch (attention): `batch` independent products, matrix i at
  // element offset i*stride_x of each operand. batch > 1 allows no epilogue.
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  // FP8 operands (both or neither): see GemmFp8Operand.
  GemmFp8Operand fp8_a, fp8_b;
};

// The betas stay double, as configured: the step constants form 1 - beta and
// 1 - beta^t from them in double and round once (ops/optimizer.h), as PyTorch does.
struct AdamWHyper {
  float lr;
  double beta1, beta2;
  float eps, weight_decay;
  int64_t step;  // 1-based, for bias correction
};
struct LambHyper {
  float lr;
  double beta1, beta2;
  float eps, weight_decay;
  int64_t step;  // 1-based, for bias correction
  bool bias_correction;
};
// One parameter tensor of a flat LAMB buffer: its elements [begin, end), and
// whether it takes weight decay.
struct LambTensor {
  int64_t begin, end;
  bool decayed;
};
// The scratch Device::lamb_step needs: two fp32 partial sums (||w||^2,
// ||u||^2) per partial per tensor. CUDA sums kLambPartials partials per tensor
// (one per block of pass 1) in a fixed order in pass 2: deterministic.
constexpr int kLambPartials = 32;
inline int64_t lamb_scratch_floats(size_t tensors) { return int64_t{2} * kLambPartials * static_cast<int64_t>(tensors); }
struct SgdHyper {
  float lr, momentum, weight_decay;
};
// Elements [begin, end) of a flat tensor.
struct ElementRange {
  int64_t begin, end;
};

// Per-tensor statistics for the numerics-health probes and gradient norms.
struct TensorStats {
  double sum_squares = 0.0;
  int64_t nonfinite = 0;  // inf or NaN elements
};

// What Device::read_step_results returns: the deferred loss sum and the last
// decide_step's statistics and decision (scalar::decide_step, ops/optimizer.h).
struct StepResults {
  double loss_sum = 0.0;
  TensorStats grad_stats;  // of the gradients decide_step looked at
  bool skip = false;       // a gradient was non-finite: the decided optimizer ops did nothing
  double grad_norm = 0.0;  // of the unscaled gradient; 0 when skipped
  float grad_scale = 0.0f; // the factor the decided optimizer ops multiplied gradients by; 0 when skipped
};

// An optimizer op's gradient multiplier: a host value (implicitly, from a
// float), or GradScale::decided(): the factor of the device's last
// decide_step, which also skips the update when that step was decided a skip.
// The decided form needs no host wait between the gradients and the update.
class GradScale {
 public:
  GradScale(float value) : value_(value) {}  // NOLINT(google-explicit-constructor): a host value reads as one
  static GradScale decided() {
    GradScale g(0.0f);
    g.decided_ = true;
    return g;
  }
  bool is_decided() const { return decided_; }
  float value() const { return value_; }  // the host value (0 when decided)

 private:
  float value_;
  bool decided_ = false;
};

// Magnitude exponents: bins[i] counts finite non-zero x with
// floor(log2|x|) == lo + i (values below lo land in bin 0, above in the last).
struct ExponentHistogram {
  int lo = 0;
  std::vector<int64_t> bins;
  int64_t zeros = 0, nonfinite = 0, total = 0;
};

struct DeviceInfo {
  DeviceKind kind = DeviceKind::Cpu;  // written out as device_kind_name(kind): "cpu" | "cuda"
  std::string name;  // CPU model or GPU name
  int cores = 0;     // CPU threads used / GPU SMs
  // For CUDA: compute capability, memory, runtime/driver/library versions.
  std::optional<std::string> compute_capability;
  size_t memory_bytes = 0;
  std::vector<std::pair<std::string, std::string>> versions;  // library -> version
  std::string pci_bus_id;  // CUDA: "00000000:3B:00.0", how NVML names the same GPU; empty on the CPU
  // CPU: the build of the hand-written kernels that runs (scalar | avx2 | avx512 |
  // avx512_bf16), why ("cpuid": the widest this CPU runs; "MPB_CPU_ISA": asked
  // for), the builds this CPU could run, and the ISA oneDNN's own dispatch chose
  // for the GEMMs. Empty on CUDA.
  std::string kernel_isa, kernel_isa_source, gemm_isa;
  std::vector<std::string> kernel_isas_runnable;
};

// The Device. Every public op is non-virtual: it checks its arguments
// against the rules written next to it (in core/device_checks.cpp, the only
// place they are checked) and then calls the backend's protected *_impl, which
// never sees a call that breaks them. A broken rule throws
// std::invalid_argument "<op>: <argument> ..." before anything has run.
// Backends check only their own limits (each is marked "backend limit" in the
// backend's files), and errors in data only the device reads (labels, ids) as
// the op says.
//
// Rules of every op (not repeated below):
// - "float" is fp32, fp16 or bf16 (is_float); ids, labels and key_valid are int32.
// - A tensor with elements has non-null data.
// - "[rows]"/"[cols]" compare an element count with Tensor::rows()/cols() of
//   the named tensor (its matrix view); "x's shape" is an equal Shape.
// - Aliasing (an output on an input's memory) is promised or forbidden per
//   op where it is said; the forbidden cases are checked, others are not.
class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;

  // --- memory -------------------------------------------------------------
  DeviceBuffer alloc(Shape shape, DType dtype, MemCategory category);
  MemoryTracker& memory() { return tracker_; }
  // Host waits, plan creations and epilogue fallbacks so far (core/device_counters.h).
  const DeviceCounters& counters() const { return counters_; }
  // For the backends (and their timers and GEMM libraries) to report what
  // they did; the public ops that return host values count their own wait.
  void note_host_sync() { ++counters_.host_syncs; }
  void note_plan_created() { ++counters_.plans_created; }
  void note_pinned_alloc() { ++counters_.pinned_allocs; }
  void note_gemm_fallback(const std::string& epilogue) { ++counters_.gemm_fallbacks[epilogue]; }
  // A backend whose attention_*_impl ran a library implementation names it
  // here (once per call); a call it does not name is counted as
  // "<device_kind_name(info().kind)>_kernel", the backend's own kernel (counters().attention_impls).
  void note_attention_impl(const std::string& impl) {
    ++counters_.attention_impls[impl];
    ++attention_impl_notes_;
  }
  // Bytes that can still be allocated now (CPU: the host's MemAvailable; CUDA:
  // cudaMemGetInfo's free memory), for refusing a cell whose memory estimate
  // does not fit before it runs. nullopt: this device can't say.
  virtual std::optional<size_t> free_memory_bytes() const;
  // The most bytes this device held from its memory at once since it was
  // made, whoever asked (CUDA: cudaMalloc'd bytes; tensors, scratch and
  // workspaces alike), for the memory triple of docs/RESULTS.md. nullopt: the
  // device's memory is the process's (the CPU), whose RSS high-water mark is
  // that figure.
  virtual std::optional<size_t> reserved_peak_bytes() const;
  // dst.bytes() bytes; host pointers must not be null when there are bytes.
  // upload may return before the copy has run (CUDA stages batches in pinned
  // memory); host_src may be reused as soon as it returns either way.
  void upload(const Tensor& dst, const void* host_src);
  void download(void* host_dst, const Tensor& src);
  void copy(const Tensor& dst, const Tensor& src);  // same dtype and numel

  // --- timing ---------------------------------------------------------------
  virtual void synchronize() = 0;
  virtual std::unique_ptr<DeviceTimer> make_timer() = 0;
  // Named ranges for a profiler's timeline (NVTX on CUDA, so nsys and ncu
  // show "encoder.layer.3 forward"; nothing on the CPU): pushed and popped in
  // LIFO order on the host thread; asynchronous, never a sync. `name` must
  // live until the push returns. Use DeviceRange, which pops on every exit.
  // The defaults (nothing) are out of line (core/device.cpp), as every
  // default here is: a backend built once per ISA (the CPU's kernels) would
  // otherwise emit its own copy of each, and the linker keeps one for all.
  virtual void range_push(const char* name);
  virtual void range_pop();

  // --- GEMM -----------------------------------------------------------------
  // Rules (GemmArgs, Epilogue): m, n, k > 0 and batch >= 1.
  // - batch == 1: a, b, c hold m*k, k*n, m*n elements (strides are ignored).
  //   batch > 1: every stride >= its matrix's size (gaps allowed; no overlap
  //   or broadcast), every operand holds (batch-1)*stride + size elements,
  //   no epilogue and no pre_act.
  // - a and b share a dtype: fp32 for F32/TF32, fp16 for F16, bf16 for BF16;
  //   c is fp32 or (F16/BF16) the operands' dtype.
  // - Forward epilogues: bias float [n], alpha == 1, beta == 0.
  //   Backward epilogues: beta == 0, no bias, pre_act given and not C's memory.
  // - pre_act, when given, is float [m,n]; sharing C's memory, it has C's dtype.
  // - bias_grad_out only with DGeluBGrad, and then float [n].
  // - Every tensor's data is aligned to its element size.
  // A compute mode this device reports "unsupported" throws DeviceError.
  void gemm(const GemmArgs& args);
  // The one capability question (core/device_capabilities.h): native,
  // emulated or unsupported with a reason, for a GEMM mode
  // (gemm_feature(c)) or FP8 operands.
  virtual Support supports(Feature f) const = 0;
  // supports(gemm_feature(c)) as the word result files record
  // (support_level_name): for the callers that write or print it.
  std::string gemm_support(GemmCompute c) const { return support_level_name(supports(gemm_feature(c)).level); }
  // What this device asks its GEMM library for in mode `c`: the library, its
  // compute type and the operand types ("cublasLt CUBLAS_COMPUTE_32F_FAST_TF32,
  // A/B/C CUDA_R_32F"), recorded in every cell (gemm_math.requested): the
  // evidence beside which a process-wide override that turns "fp32" into TF32
  // (NVIDIA_TF32_OVERRIDE, ONEDNN_DEFAULT_FPMATH_MODE) shows.
  virtual std::string gemm_math(GemmCompute c) const = 0;
  // supports(Feature::GemmFp8) as text: "native", "emulated" or
  // "unsupported: WHY" (Support::describe), for the callers that print it.
  std::string fp8_gemm_support() const { return supports(Feature::GemmFp8).describe(); }

  // --- element-wise ----------------------------------------------------------
  // Float tensors; inputs and outputs have the same element count.
  void fill(const Tensor& t, float value);
  void cast(const Tensor& dst, const Tensor& src);  // any float dtypes, same numel
  void scale(const Tensor& t, float factor);        // in place
  // y[r,:] += bias for every row r (bias [cols of y], any float dtype).
  void add_bias(const Tensor& y, const Tensor& bias);
  void activation_forward(Activation act, const Tensor& out, const Tensor& in);
  // din = dout * act'(pre_act)
  void activation_backward(Activation act, const Tensor& din, const Tensor& dout, const Tensor& pre_act);
  // db[c] (+)= sum over rows of dy[r,c], summed in fp32; db [cols of dy], any float dtype.
  void bias_grad(const Tensor& db, const Tensor& dy, GradMode mode);

  // --- losses ----------------------------------------------------------------
  // Softmax cross-entropy over rows of float logits [B,C] with int32 labels
  // [B]; the output (probs / dlogits) has the logits' element count.
  // A label < 0 marks an ignored row (no loss, zero gradient, not counted); a
  // label >= C is an error in the data: the CPU throws std::out_of_range
  // before writing, the CUDA backend raises DeviceError at the next
  // synchronising call.
  // Unfused: forward writes probs [B,C] fp32 (in place over the logits only
  // when they are fp32) and returns the summed loss; backward reads fp32 probs
  // and writes float dlogits = (probs - onehot) * grad_scale.
  double softmax_xent_forward(const Tensor& probs, const Tensor& logits, const Tensor& labels);
  void softmax_xent_backward(const Tensor& dlogits, const Tensor& probs, const Tensor& labels, float grad_scale);
  // Fused: one pass per row computes the loss and float dlogits; no probs
  // buffer. dlogits may overwrite the logits if it has their dtype.
  double softmax_xent_fused(const Tensor& dlogits, const Tensor& logits, const Tensor& labels, float grad_scale);
  // Deferred: the same two ops, but the summed loss stays on the device. It is
  // added to the device's loss sum (a double), which read_loss_sum() returns
  // and zeroes: one host sync for N micro-batches instead of N, read after
  // the step's timer. The sum is added to in call order, so it has the bits
  // of the returning ops' values added in that order on the host. The
  // returning ops neither read nor change it.
  void softmax_xent_forward_deferred(const Tensor& probs, const Tensor& logits, const Tensor& labels);
  void softmax_xent_fused_deferred(const Tensor& dlogits, const Tensor& logits, const Tensor& labels,
                                   float grad_scale);
  double read_loss_sum();

  // --- the optimizer step's decision, made on the device -----------------------
  // decide_step computes stats(grads) and, from them, scalar::decide_step
  // (ops/optimizer.h): skip on a non-finite gradient, else unscale x clip
  // (grad_clip <= 0: no clipping) by the host's double formula. The decision
  // stays on the device for the optimizer ops given GradScale::decided(), so a
  // step needs no host wait between its backward pass and its update (PyTorch's
  // GradScaler waits there: found_inf.item()). read_step_results returns the
  // deferred loss sum (which it zeroes, as read_loss_sum does) and the last
  // decision with its statistics: one host sync, after the step's timer.
  // Reading, or a decided optimizer op, before any decide_step throws
  // std::logic_error. loss_scale finite and >= 0.
  void decide_step(const Tensor& grads, double loss_scale, double grad_clip);
  StepResults read_step_results();
  // Number of rows whose argmax equals the label.
  int64_t count_correct(const Tensor& logits, const Tensor& labels);
  // The sparse MLM head's gather list: a stable partition of the positions of
  // labels int32 [N], labelled ones (label >= 0) first, then the others, each
  // in increasing order; its first M entries go to pos int32 [M] and their
  // labels to pos_labels int32 [M] (1 <= M <= N; three distinct buffers).
  // pos never repeats a position, so embedding_forward/backward with pos as
  // ids gather those rows and scatter their gradients exactly. More than M
  // labelled positions is an error in the data (their loss would be lost):
  // the CPU throws std::out_of_range before writing, the CUDA backend raises
  // DeviceError at the next synchronising call. Scalar core:
  // ops/label_partition.h.
  void label_positions(const Tensor& pos, const Tensor& pos_labels, const Tensor& labels);

  // --- reductions ------------------------------------------------------------
  // sum_squares of the finite elements, within 2^-19 relative (fp32 partial
  // sums are allowed: it feeds gradient norms and clipping), nonfinite exact.
  TensorStats stats(const Tensor& t);
  ExponentHistogram exponent_histogram(const Tensor& t, int lo, int nbins);  // nbins >= 1

  // --- transformer ops (BERT) ---------------------------------------------------
  // Shapes: B batch, T tokens, H heads, D head dim, C = H*D hidden, V
  // vocabulary. Activations in any float dtype, statistics (mean, rstd, lse)
  // fp32, ids/labels/key_valid int32.
  //
  // out = a + b, any float dtypes, same element count.
  void add(const Tensor& out, const Tensor& a, const Tensor& b);
  // LayerNorm over the last dimension of a non-empty x; out has x's shape;
  // mean and rstd fp32 [rows of x] are saved for the backward pass; gamma and
  // beta [cols of x] in the parameter dtype.
  void layernorm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                         const Tensor& gamma, const Tensor& beta, float eps);
  // Fused: sum = a + b (stored: it is the next residual and the backward's
  // input), out = LayerNorm(sum), in one pass. a and b have sum's element
  // count; out must not share sum's memory (both are outputs).
  void residual_layernorm_forward(const Tensor& out, const Tensor& sum, const Tensor& mean, const Tensor& rstd,
                                  const Tensor& a, const Tensor& b, const Tensor& gamma, const Tensor& beta,
                                  float eps);
  // dx and dout have x's shape, dgamma and dbeta [cols of x]. dx is written
  // (Overwrite) or added to (Accumulate: a residual branch's gradient);
  // dgamma/dbeta follow param_mode.
  void layernorm_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& dout,
                          const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& gamma,
                          GradMode dx_mode, GradMode param_mode);
  // [B,T,3,H,D] (one QKV projection) <-> three [B,H,T,D] tensors of one shape
  // and dtype. The packed tensor is [B*T, 3C], [B,T,3C] or [B,T,3,C].
  void split_heads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& qkv);
  void merge_qkv_grads(const Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv);
  // [B,H,T,D] <-> [B,T,H,D] (= [B*T, C] or [B,T,C] for the output
  // projection). A permutation: the two tensors must not share memory.
  void merge_heads(const Tensor& out, const Tensor& in);
  void split_heads_grad(const Tensor& din, const Tensor& dout);
  // Unfused attention's softmax over the last dim of scores [B,H,T,T]:
  // probs = softmax(scale * scores + mask), where mask[b, j] = 0 for a real
  // key and mask_value (finite, safe in the compute dtype: see
  // core/precision.h) for padding; key_valid int32 [B,T] is 1 or 0. probs has
  // the scores' shape.
  void masked_softmax_forward(const Tensor& probs, const Tensor& scores, const Tensor& key_valid, float scale,
                              float mask_value);
  // dscores = scale * probs * (dprobs - sum_j probs * dprobs); three
  // non-empty tensors of one shape.
  void softmax_backward(const Tensor& dscores, const Tensor& probs, const Tensor& dprobs, float scale);
  // Fused attention (flash-style: tiled, online softmax, no [T,T] matrix
  // stored): q [B,H,Tq,D], k and v [B,H,Tk,D] (one dtype, no dimension 0),
  // key_valid int32 [B,Tk], out [B,H,Tq,D], lse [B,H,Tq] fp32 (log-sum-exp per
  // query, saved for the backward pass, which recomputes the probabilities).
  // Backward: dout and dq have q's shape, dk and dv k's.
  // dropout (core/attention_layout.h): on the probabilities, p in [0, 1),
  // the dropout op's mask; the backward must be given the forward's.
  void attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& key_valid, float scale, float mask_value, AttnDropout dropout = {});
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                          const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                          const Tensor& key_valid, float scale, float mask_value, AttnDropout dropout = {});
  // The same fused self-attention (Tq = Tk = T) read straight from the packed
  // QKV projection and written straight into merged heads, so no head shuffle
  // runs (core/attention_layout.h): qkv [B*T, 3C] (or [B,T,3C], [B,T,3,C])
  // holds [B,T,3,H,D]; out [B*T, C] (or [B,T,C], [B,T,H,D]) is [B,T,H,D];
  // lse fp32 [B,H,T] gives B, H and T (C = H*D); key_valid int32 [B,T].
  // Backward: dqkv like qkv, dout like out; dqkv must not share memory with
  // an input, nor out with qkv. The results are attention_forward/backward's
  // on the split heads, merged; bit for bit where the backend runs its own
  // kernel (the same code, other addresses).
  void attention_forward_packed(const Tensor& out, const Tensor& lse, const Tensor& qkv, const Tensor& key_valid,
                                float scale, float mask_value, AttnDropout dropout = {});
  void attention_backward_packed(const Tensor& dqkv, const Tensor& dout, const Tensor& out, const Tensor& lse,
                                 const Tensor& qkv, const Tensor& key_valid, float scale, float mask_value,
                                 AttnDropout dropout = {});
  // out[i,:] = table[ids[i], :]; backward adds rows of dout into dtable
  // (deterministically: the same sum order on every run). The table is at
  // least 2-D with out's (dout's) columns; ids int32 [rows of out]; dout must
  // not share dtable's memory. An id outside [0, rows of the table) is found
  // in the data: the CPU throws std::out_of_range before writing, the CUDA
  // backend raises DeviceError at the next synchronising call.
  void embedding_forward(const Tensor& out, const Tensor& table, const Tensor& ids);
  void embedding_backward(const Tensor& dtable, const Tensor& dout, const Tensor& ids, GradMode mode);
  // Inverted dropout with a counter-based RNG: element i is kept iff
  // hash(seed, i) >= p * 2^32, and scaled by 1/(1-p); p in [0, 1). The
  // backward pass is the same call on the gradient (same seed): no mask is
  // stored.
  void dropout(const Tensor& out, const Tensor& in, float p, uint64_t seed);

  // --- FP8 delayed scaling ------------------------------------------------------
  // One optimizer step's update of n FP8 tensors' scales (core/fp8_scaling.h),
  // on the device, as Transformer Engine's amax-and-scale update runs: no
  // host wait. For each slot i with touched[i]: amax[i] goes into row i of
  // history [n, len] at entry steps[i] % len, steps[i] counts it, and scale[i]
  // becomes scalar::fp8_scale_from_amax(r, fp8_max[i], margin, scale[i])
  // (ops/fp8_scale.h), where r reduces the row's min(steps[i], len) filled
  // entries: their max, NaN if one is NaN (most_recent: amax[i] itself). An
  // untouched slot keeps its history, count and scale. Then every amax[i] is
  // zeroed, for the next step's GEMMs to take their max into. scale, amax,
  // fp8_max: f32 [n]; steps: i32 [n]; history: f32 [n, len], len >= 1;
  // touched.size() == n <= kFp8MaxSlots; margin >= 0.
  static constexpr int64_t kFp8MaxSlots = 3072;
  void fp8_update_scales(const Tensor& scale, const Tensor& amax, const Tensor& history, const Tensor& steps,
                         const Tensor& fp8_max, const std::vector<bool>& touched, int margin, bool most_recent);

  // --- optimizers (fp32 master weights and state) ------------------------------
  // Parameters are fp32 master weights, or half when a policy has none
  // (apex O3: each update is rounded to half); gradients any float dtype;
  // state always fp32; all with the parameters' element count. grads are
  // multiplied by grad_scale first (unscaling and clipping folded in; a
  // decided GradScale may also skip the whole update). fused:
  // one pass per element over (param, grad, m, v); unfused: one pass per
  // update equation, as a framework without a fused optimizer runs.
  // Both give bit-identical results (same per-element arithmetic).
  // param_copy (optional, may be empty): a float copy of the parameters in
  // another dtype (the compute copy, or O2's half model weights) that the
  // fused update also writes in the same pass, as a fused mixed-precision
  // optimizer does; empty: the caller refreshes copies itself.
  // AdamWHyper::step is 1-based (>= 1).
  // no_decay: element ranges of param that get no weight decay, as a PyTorch
  // parameter group with weight_decay 0 (biases and LayerNorm gains:
  // optimizer.decay_exclude); non-empty, sorted, disjoint, within param. The
  // update there is bit-identical to a call on that range with weight_decay 0.
  void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const AdamWHyper& h,
                  GradScale grad_scale, bool fused, const Tensor& param_copy,
                  const std::vector<ElementRange>& no_decay = {});
  void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h,
                GradScale grad_scale, const std::vector<ElementRange>& no_decay = {});
  // LAMB (ops/optimizer.h), always fused: the per-tensor trust ratio needs
  // every tensor's norms, so one call updates all `tensors` of the flat
  // param (non-empty, in order, tiling [0, numel) exactly) with no host wait.
  // scratch: fp32, at least scalar::lamb_scratch_floats(tensors.size())
  // elements the backend may overwrite (the caller allocates it once, so a
  // step allocates nothing). param_copy as adamw_step's.
  void lamb_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const LambHyper& h,
                 GradScale grad_scale, const Tensor& param_copy, const std::vector<LambTensor>& tensors,
                 const Tensor& scratch);

 protected:
  // The backends' implementations, one per op of core/device_ops.inc (the
  // one list of them; the public op above that calls it is its contract).
  // Each is called only by its public op, after that op's checks.
#define MPB_DEVICE_OP(group, ret, name, params, args) virtual ret name##_impl params = 0;
#include "core/device_ops.inc"
#undef MPB_DEVICE_OP

  friend class DeviceBuffer;
  friend class ForwardingDevice;  // core/forwarding_device.h: passes each *_impl to another device
  virtual void* raw_alloc(size_t bytes) = 0;
  virtual void raw_free(void* ptr) = 0;

 private:
  // After an attention_*_impl call: counts it as the backend's own kernel
  // unless the backend named an implementation (note_attention_impl).
  void count_attention_impl(int64_t notes_before);

  MemoryTracker tracker_;
  DeviceCounters counters_;
  int64_t attention_impl_notes_ = 0;
  bool decided_ = false;  // a decide_step has run (read_step_results and GradScale::decided() need one)
};

// Thrown when a device can't be created or an op fails (with the reason).
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline DeviceRange::DeviceRange(Device& dev, const char* name) : dev_(dev) { dev_.range_push(name); }
inline DeviceRange::~DeviceRange() { dev_.range_pop(); }

}  // namespace mpb
