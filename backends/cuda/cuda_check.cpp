#include "backends/cuda/cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace mpb::cuda {

namespace {

std::string where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line) + ": "; }

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

std::string format_cublas_error(cublasStatus_t s, const char* call, const char* file, int line) {
  return where(file, line) + call + " failed: " + cublas_status_name(s) + " (" + std::to_string(static_cast<int>(s)) +
         "): " + cublasLtGetStatusString(s);
}

}  // namespace

std::string format_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  return where(file, line) + call + " failed: " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  // Clear the runtime's "last error" so a later cudaGetLastError (in
  // check_launch) does not report this failure a second time. Sticky errors
  // (a kernel fault) are not cleared by this and keep failing every call.
  (void)cudaGetLastError();
  throw DeviceError(format_cuda_error(err, call, file, line));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw DeviceError(format_cublas_error(status, call, file, line));
}

#ifdef MPB_HAVE_CUDNN
void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  throw DeviceError(where(file, line) + call + " failed: cudnnStatus " + std::to_string(static_cast<int>(status)) +
                    ": " + cudnnGetErrorString(status));
}
#endif

bool debug_sync_enabled() {
#ifdef MPB_CUDA_DEBUG_SYNC
  return true;
#else
  static const bool enabled = [] {
    const char* v = std::getenv("MPB_CUDA_DEBUG_SYNC");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
  }();
  return enabled;
#endif
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw DeviceError(where(file, line) + "launch of kernel " + kernel + " failed: " + cudaGetErrorName(err) + ": " +
                      cudaGetErrorString(err));
  if (debug_sync_enabled()) {
    const cudaError_t exec = cudaDeviceSynchronize();
    if (exec != cudaSuccess) {
      (void)cudaGetLastError();
      throw DeviceError(where(file, line) + "kernel " + kernel + " failed while executing (MPB_CUDA_DEBUG_SYNC): " +
                        cudaGetErrorName(exec) + ": " + cudaGetErrorString(exec));
    }
  }
}

bool report_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept {
  if (err == cudaSuccess) return true;
  (void)cudaGetLastError();
  std::fprintf(stderr, "mpbench cuda error: %s\n", format_cuda_error(err, call, file, line).c_str());
  return false;
}

bool report_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) noexcept {
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  std::fprintf(stderr, "mpbench cublas error: %s\n", format_cublas_error(status, call, file, line).c_str());
  return false;
}

}  // namespace mpb::cuda
