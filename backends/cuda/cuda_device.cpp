#include "backends/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include <nvtx3/nvToolsExt.h>

#include "backends/cuda/attention_cudnn.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/gemm_cublaslt.h"
#include "backends/cuda/pinned_staging.h"
#include "core/library_version.h"

namespace mpb {

namespace {

// The oldest compute capability the build targets (CMake MPB_CUDA_ARCHITECTURES
// 80;86;89;90): older GPUs have no kernel image to run.
constexpr int kMinCcMajor = 8;

// "13.0" from 13000 (core/library_version.h decodes it; the manifest has always
// said major.minor for CUDA, whose patch is 0); "none" for 0 (no driver).
std::string cuda_version_string(int v) {
  const std::optional<LibraryVersion> d = decode_cuda_version(v);
  return d ? std::to_string(d->major) + "." + std::to_string(d->minor) : std::string("none");
}

#ifdef MPB_HAVE_CUDNN
// "9.19.0" (cuDNN 8's older encoding decoded too); "not loaded" for 0.
std::string cudnn_version_string() {
  const std::optional<LibraryVersion> d = decode_cudnn_version(cudnnGetVersion());
  return d ? d->str() : std::string("not loaded");
}
#endif

// Said, not silent: without the frontend, fused attention runs the
// hand-written kernel in every dtype.
std::string cudnn_frontend_version() {
#ifdef MPB_HAVE_CUDNN_FRONTEND
  return MPB_CUDNN_FRONTEND_VERSION;
#else
  return "absent (fused attention: hand-written kernel)";
#endif
}

// cudaGetDeviceCount's failure in a user's words. Without a GPU the runtime says "CUDA driver
// version is insufficient" (no libcuda at all reads as driver version 0), which sends users to
// update a driver they do not have; the driver's version tells the two cases apart.
std::string no_device_reason(cudaError_t err) {
  int driver = 0, runtime = 0;
  const bool have_driver = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0;
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaGetLastError();
  if (!have_driver)
    return "no CUDA device: none found (no NVIDIA driver is loaded: no GPU here, or libcuda.so.1 is not installed)";
  if (err == cudaErrorInsufficientDriver)
    return "no CUDA device: none usable (driver " + cuda_version_string(driver) + " is older than this runner's CUDA " +
           cuda_version_string(runtime) + " runtime: update the driver, or build against an older CUDA)";
  return "no CUDA device: none found (driver " + cuda_version_string(driver) + ": " + cudaGetErrorString(err) + ")";
}

// Why device `ordinal` is unusable, or nullopt. Never throws.
std::optional<std::string> unavailable(int ordinal) {
  try {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return no_device_reason(err);
    }
    if (count == 0) return std::string("no CUDA device: none found (the driver sees none)");
    if (ordinal < 0 || ordinal >= count)
      return "no CUDA device: ordinal " + std::to_string(ordinal) + " requested, " + std::to_string(count) +
             " device(s) present";
    cudaDeviceProp prop{};
    const cudaError_t perr = cudaGetDeviceProperties(&prop, ordinal);
    if (perr != cudaSuccess) {
      (void)cudaGetLastError();
      return "no CUDA device: cannot query device " + std::to_string(ordinal) + ": " + cudaGetErrorString(perr);
    }
    if (prop.major < kMinCcMajor)
      return "no CUDA device: device " + std::to_string(ordinal) + " (" + prop.name + ") has compute capability " +
             std::to_string(prop.major) + "." + std::to_string(prop.minor) + "; this build targets 8.0 and newer";
    return std::nullopt;
  } catch (const std::exception& e) {  // std::bad_alloc from the strings, in theory
    return std::string("no CUDA device: ") + e.what();
  }
}

// CUDA events on the device's stream. Reading one waits for the stop event:
// a host sync, counted on the device.
class CudaTimer final : public DeviceTimer {
 public:
  CudaTimer(Device& dev, cudaStream_t stream) : dev_(dev), stream_(stream) {
    MPB_CUDA_CHECK(cudaEventCreate(&start_));
    const cudaError_t err = cudaEventCreate(&stop_);
    if (err != cudaSuccess) {
      MPB_CUDA_REPORT(cudaEventDestroy(start_));
      cuda::throw_cuda_error(err, "cudaEventCreate(&stop_)", __FILE__, __LINE__);
    }
  }
  ~CudaTimer() override {
    MPB_CUDA_REPORT(cudaEventDestroy(start_));
    MPB_CUDA_REPORT(cudaEventDestroy(stop_));
  }
  CudaTimer(const CudaTimer&) = delete;
  CudaTimer& operator=(const CudaTimer&) = delete;

  void start() override {
    MPB_CUDA_CHECK(cudaEventRecord(start_, stream_));
    started_ = true;
    stopped_ = false;
  }
  void stop() override {
    if (!started_) throw DeviceError("cuda timer: stop() called before start()");
    MPB_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    stopped_ = true;
  }
  double elapsed_ms() override {
    if (!stopped_) throw DeviceError("cuda timer: elapsed_ms() called before start() and stop()");
    dev_.note_host_sync();
    MPB_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    MPB_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms);
  }

 private:
  Device& dev_;
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  bool started_ = false, stopped_ = false;
};

}  // namespace

std::optional<std::string> cuda_unavailable_reason() { return unavailable(0); }

namespace cuda {
void CudaDevice::range_push(const char* name) { nvtxRangePushA(name); }
void CudaDevice::range_pop() { nvtxRangePop(); }
}  // namespace cuda

std::unique_ptr<Device> make_cuda_device(int ordinal) {
  if (auto reason = unavailable(ordinal)) throw DeviceError(*reason);
  return std::make_unique<cuda::CudaDevice>(ordinal);
}

std::vector<std::pair<std::string, std::string>> cuda_library_versions() {
  std::vector<std::pair<std::string, std::string>> v;
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) v.emplace_back("cuda_runtime", cuda_version_string(runtime));
  if (cudaDriverGetVersion(&driver) == cudaSuccess) v.emplace_back("cuda_driver", cuda_version_string(driver));
  v.emplace_back("cublasLt", cuda::cublaslt_version_string());
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    v.emplace_back("cublas", std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch));
#ifdef MPB_HAVE_CUDNN
  v.emplace_back("cudnn", cudnn_version_string());
#endif
  v.emplace_back("cudnn_frontend", cudnn_frontend_version());
  cudaGetLastError();  // a failed query must not linger as the sticky "last error"
  return v;
}

namespace cuda {

namespace {
// `count` value-initialised T of mapped pinned host memory (64-bit Linux:
// UVA, so it needs no cudaSetDeviceFlags(cudaDeviceMapHost)). The host
// pointer goes to *host before anything else can fail, so that the
// constructor's clean-up frees it; returns the device's view of it.
template <class T>
T* alloc_mapped(size_t count, T** host) {
  void* p = nullptr;
  MPB_CUDA_CHECK(cudaHostAlloc(&p, count * sizeof(T), cudaHostAllocMapped));
  *host = static_cast<T*>(p);
  for (size_t i = 0; i < count; ++i) (*host)[i] = T{};
  void* dev = nullptr;
  MPB_CUDA_CHECK(cudaHostGetDevicePointer(&dev, p, 0));
  return static_cast<T*>(dev);
}
}  // namespace

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  try {
    MPB_CUDA_CHECK(cudaSetDevice(ordinal));
    cudaDeviceProp prop{};
    MPB_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
    sm_count_ = prop.multiProcessorCount;
    cc_major_ = prop.major;
    cc_minor_ = prop.minor;
    if (sm_count_ <= 0) throw DeviceError("cuda: device reports no multiprocessors");

    MPB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // Error flags the kernels can write and the host can read after a
    // stream synchronisation, without a copy.
    flags_dev_ = alloc_mapped(kFlagCount, &flags_host_);
    // The loss ops' deferred sum, mapped as the flags are: the sum kernel
    // adds to it from the device; the host reads and zeroes it after a
    // stream synchronisation (one wait, no copy, no launch).
    loss_sum_dev_ = alloc_mapped(1, &loss_sum_host_);
    // decide_step's record for the host, likewise.
    decision_mapped_ = alloc_mapped(1, &decision_host_);

    info_.kind = DeviceKind::Cuda;
    info_.name = prop.name;
    info_.cores = sm_count_;
    info_.compute_capability = std::to_string(cc_major_) + "." + std::to_string(cc_minor_);
    info_.memory_bytes = prop.totalGlobalMem;
    char bus[32];
    std::snprintf(bus, sizeof bus, "%08X:%02X:%02X.0", unsigned(prop.pciDomainID), unsigned(prop.pciBusID),
                  unsigned(prop.pciDeviceID));
    info_.pci_bus_id = bus;  // NVML's format; CUDA_VISIBLE_DEVICES renumbers devices, bus ids stay
    // The list doctor prints (cuda_library_versions): CUDA runtime and driver,
    // cuBLASLt, libcublas (linked; GEMMs go through cuBLASLt), cuDNN, its frontend.
    info_.versions = cuda_library_versions();

    staging_ = std::make_unique<PinnedStaging>(*this, stream_);
#ifdef MPB_HAVE_CUDNN_FRONTEND
    sdpa_ = std::make_unique<CudnnSdpa>(*this);  // no cuDNN call: the handle comes with the first attention
#endif
    gemm_ = std::make_unique<CublasLtGemm>(*this);  // last: it allocates through this device
  } catch (...) {
    // The destructor does not run for a half-constructed object.
    gemm_.reset();
#ifdef MPB_HAVE_CUDNN_FRONTEND
    sdpa_.reset();
#endif
    staging_.reset();
    if (decision_host_) MPB_CUDA_REPORT(cudaFreeHost(decision_host_));
    if (loss_sum_host_) MPB_CUDA_REPORT(cudaFreeHost(loss_sum_host_));
    if (flags_host_) MPB_CUDA_REPORT(cudaFreeHost(flags_host_));
    decision_host_ = nullptr;
    loss_sum_host_ = nullptr;
    if (stream_) MPB_CUDA_REPORT(cudaStreamDestroy(stream_));
    flags_host_ = nullptr;
    stream_ = nullptr;
    throw;
  }
}

CudaDevice::~CudaDevice() {
  MPB_CUDA_REPORT(cudaStreamSynchronize(stream_));
  gemm_.reset();  // frees the cuBLASLt workspace through raw_free
#ifdef MPB_HAVE_CUDNN_FRONTEND
  sdpa_.reset();  // the shared cuDNN handle let go of stream_ (graphs and handle stay for the process)
#endif
  staging_.reset();
  for (DeviceBuffer& b : scratch_) b.release();
  MPB_CUDA_REPORT(cudaFreeHost(decision_host_));
  MPB_CUDA_REPORT(cudaFreeHost(loss_sum_host_));
  MPB_CUDA_REPORT(cudaFreeHost(flags_host_));
  MPB_CUDA_REPORT(cudaStreamDestroy(stream_));
  if (!deferred_error_.empty())
    std::fprintf(stderr, "mpbench cuda: device destroyed with an unreported error: %s\n", deferred_error_.c_str());
}

void CudaDevice::upload_impl(const Tensor& dst, const void* host_src) {
  const size_t bytes = dst.bytes();
  if (bytes == 0) return;
  // Batches: through pinned staging, asynchronous (no host sync in a step).
  if (bytes <= PinnedStaging::kMaxStagedBytes) {
    staging_->upload(dst.data, host_src, bytes);
    return;
  }
  // Set-up (weights, the ceiling's matrices): from the caller's memory, which
  // it may reuse as soon as we return, so wait.
  MPB_CUDA_CHECK(cudaMemcpyAsync(dst.data, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  note_host_sync();
  sync_and_check("upload");
}

void CudaDevice::download_impl(void* host_dst, const Tensor& src) {
  const size_t bytes = src.bytes();
  if (bytes == 0) return;
  read_back(host_dst, src.data, bytes, "download");
}

void CudaDevice::copy_impl(const Tensor& dst, const Tensor& src) {
  if (dst.bytes() == 0 || dst.data == src.data) return;
  MPB_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, dst.bytes(), cudaMemcpyDeviceToDevice, stream_));
}

void CudaDevice::synchronize() {
  note_host_sync();
  sync_and_check("synchronize");
}

std::unique_ptr<DeviceTimer> CudaDevice::make_timer() { return std::make_unique<CudaTimer>(*this, stream_); }

void CudaDevice::gemm_impl(const GemmArgs& args) { gemm_->run(args); }

std::string CudaDevice::gemm_math(GemmCompute c) const { return gemm_->math(c); }
// GEMM modes: what CublasLtGemm::runs says for this GPU (tensor-core modes
// from compute capability 8.0). FP8 tensor cores (CUDA_R_8F_E4M3 /
// CUDA_R_8F_E5M2 matmuls) exist from compute capability 8.9 (Ada) and 9.0
// (Hopper); gemm_cublaslt.cu drives them.
Support CudaDevice::supports(Feature f) const {
  const std::string cc = std::to_string(cc_major_) + "." + std::to_string(cc_minor_);
  switch (f) {
    case Feature::GemmF32: return Support::native();
    case Feature::GemmTf32:
    case Feature::GemmF16:
    case Feature::GemmBf16: {
      const GemmCompute c = f == Feature::GemmTf32  ? GemmCompute::TF32
                            : f == Feature::GemmF16 ? GemmCompute::F16
                                                    : GemmCompute::BF16;
      if (gemm_->runs(c)) return Support::native();
      return Support::unsupported(info_.name + " has compute capability " + cc + "; " + gemm_compute_name(c) +
                                  " GEMMs need 8.0 (Ampere) or newer");
    }
    case Feature::GemmFp8:
      if (cc_major_ * 10 + cc_minor_ < 89)
        return Support::unsupported(info_.name + " has compute capability " + cc +
                                    "; FP8 GEMMs need 8.9 (Ada) or 9.0 (Hopper) and newer");
      return Support::native();
  }
  return Support::unsupported(std::string("cuda: unknown feature ") + feature_name(f));
}

std::optional<size_t> CudaDevice::free_memory_bytes() const {
  // cudaMemGetInfo reports the current device: make it this one.
  size_t free = 0, total = 0;
  if (cudaSetDevice(ordinal_) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) {
    cudaGetLastError();  // clear it: the next launch check must not see it
    return std::nullopt;
  }
  return free;
}

void* CudaDevice::scratch(ScratchSlot slot, size_t bytes) {
  DeviceBuffer& buf = scratch_[static_cast<size_t>(slot)];
  if (buf.bytes() < bytes) {
    if (!buf.empty()) {
      // Earlier kernels on the stream may still use the old buffer.
      note_host_sync();
      MPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
      buf.release();
    }
    constexpr size_t kGranule = size_t{64} << 10;
    const size_t want = (bytes + kGranule - 1) / kGranule * kGranule;
    buf = alloc(Shape{static_cast<int64_t>(want / sizeof(float))}, DType::F32, MemCategory::Workspace);
  }
  return buf.tensor().data;
}

void CudaDevice::sync_and_check(const char* op) {
  MPB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  check_flags_and_deferred(op);
}

void CudaDevice::read_back(void* host_dst, const void* dev_src, size_t bytes, const char* op) {
  MPB_CUDA_CHECK(cudaMemcpyAsync(host_dst, dev_src, bytes, cudaMemcpyDeviceToHost, stream_));
  sync_and_check(op);
}

void CudaDevice::check_flags_and_deferred(const char* op) {
  if (!deferred_error_.empty()) {
    std::string e = std::move(deferred_error_);
    deferred_error_.clear();
    throw DeviceError(std::string(op) + ": earlier deferred CUDA error: " + e);
  }
  volatile int* flags = flags_host_;
  // Every flag is read (and cleared) before throwing, so one error does not
  // hide behind the other at the next call.
  const bool bad_label = flags[kFlagBadLabel] != 0;
  const bool bad_id = flags[kFlagBadId] != 0;
  const bool lost_label = flags[kFlagLostLabel] != 0;
  flags[kFlagBadLabel] = 0;
  flags[kFlagBadId] = 0;
  flags[kFlagLostLabel] = 0;
  std::string msg;
  if (bad_label) {
    msg += "a label >= the number of classes was found on the device (softmax_xent_* or count_correct since the "
           "last synchronising call; negative labels are ignored rows, not errors); their results are invalid";
    // A deferred loss sum it reached is NaN and has now been reported: drop
    // it, so that a caller who goes on reads only later losses (the CPU, which
    // throws at the op, adds nothing either). The stream is idle here.
    *static_cast<volatile double*>(loss_sum_host_) = 0.0;
  }
  if (bad_id)
    msg += std::string(msg.empty() ? "" : "; ") +
           "an id outside [0, table rows) was found on the device (embedding_forward/backward since the last "
           "synchronising call); their results are invalid";
  if (lost_label)
    msg += std::string(msg.empty() ? "" : "; ") +
           "more labelled positions than label_positions' pos holds were found on the device (the sparse MLM "
           "head's capacity); the loss of the others would be lost, so the results since the last synchronising "
           "call are invalid";
  if (!msg.empty()) throw DeviceError(std::string(op) + ": " + msg);
}

unsigned CudaDevice::elementwise_grid(int64_t n) const {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const int64_t cap = static_cast<int64_t>(sm_count_) * 16;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

void* CudaDevice::raw_alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure is not sticky; don't let check_launch see it
    size_t free_b = 0, total_b = 0;
    std::string mem;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      mem = "; device memory free " + std::to_string(free_b >> 20) + " MiB of " + std::to_string(total_b >> 20) +
            " MiB";
    else
      (void)cudaGetLastError();
    throw DeviceError("cuda: cudaMalloc of " + std::to_string(bytes) + " bytes failed: " + cudaGetErrorName(err) +
                      ": " + cudaGetErrorString(err) + mem);
  }
  reserved_sizes_[p] = bytes;
  reserved_now_ += bytes;
  reserved_peak_ = std::max(reserved_peak_, reserved_now_);
  return p;
}

void CudaDevice::raw_free(void* ptr) {
  // Called from DeviceBuffer::release(), i.e. from destructors: must not
  // throw. The error is printed now and raised by the next synchronising call.
  // (cudaFree waits for outstanding work on the device before freeing.)
  if (const auto it = reserved_sizes_.find(ptr); it != reserved_sizes_.end()) {
    reserved_now_ -= it->second;
    reserved_sizes_.erase(it);
  }
  const cudaError_t err = cudaFree(ptr);
  if (err == cudaSuccess) return;
  try {
    std::string msg = cuda::format_cuda_error(err, "cudaFree(ptr)", __FILE__, __LINE__);
    (void)cudaGetLastError();
    std::fprintf(stderr, "mpbench cuda error: %s\n", msg.c_str());
    if (deferred_error_.empty()) deferred_error_ = std::move(msg);
  } catch (...) {
    std::fprintf(stderr, "mpbench cuda error: cudaFree failed\n");
  }
}

}  // namespace cuda
}  // namespace mpb
