// Error checking for the CUDA backend: every CUDA runtime, cuBLAS(Lt) and
// cuDNN call goes through one of these macros, and every kernel launch is
// followed by MPB_CHECK_LAUNCH. Failures become mpb::DeviceError with
// "file:line: call: error name: description" on one line.
//
// Debugging asynchronous faults: set the environment variable
// MPB_CUDA_DEBUG_SYNC=1 (or compile with -DMPB_CUDA_DEBUG_SYNC) and every
// MPB_CHECK_LAUNCH also synchronises the device, so a faulting kernel is
// reported at its own launch site instead of at some later call.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#ifdef MPB_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "core/device.h"

namespace mpb::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);
#ifdef MPB_HAVE_CUDNN
[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);
#endif

// After a kernel launch: cudaGetLastError (bad configuration, missing kernel
// image for this GPU, ...); with debug sync on, also cudaDeviceSynchronize so
// execution faults surface here.
void check_launch(const char* kernel, const char* file, int line);
bool debug_sync_enabled();

// For destructors and other noexcept paths: prints the error to stderr
// instead of throwing. Returns true when `err` is cudaSuccess.
bool report_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept;
bool report_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) noexcept;

// "file:line: call failed: name: description" (the DeviceError text).
std::string format_cuda_error(cudaError_t err, const char* call, const char* file, int line);

}  // namespace mpb::cuda

// The body of the *_CHECK macros: evaluates `call` once and, unless it
// returned `ok`, throws through mpb::cuda::`thrower` with `text` (the call as
// written, stringised by the macro the caller used).
#define MPB_CHECK_STATUS_(Status, ok, thrower, call, text)                                \
  do {                                                                                    \
    const Status mpb_status_ = (call);                                                    \
    if (mpb_status_ != (ok)) ::mpb::cuda::thrower(mpb_status_, text, __FILE__, __LINE__); \
  } while (0)

#define MPB_CUDA_CHECK(call) MPB_CHECK_STATUS_(cudaError_t, cudaSuccess, throw_cuda_error, call, #call)
#define MPB_CUBLAS_CHECK(call) \
  MPB_CHECK_STATUS_(cublasStatus_t, CUBLAS_STATUS_SUCCESS, throw_cublas_error, call, #call)
#ifdef MPB_HAVE_CUDNN
#define MPB_CUDNN_CHECK(call) MPB_CHECK_STATUS_(cudnnStatus_t, CUDNN_STATUS_SUCCESS, throw_cudnn_error, call, #call)
#endif

#define MPB_CHECK_LAUNCH(kernel_name) ::mpb::cuda::check_launch(kernel_name, __FILE__, __LINE__)

#define MPB_CUDA_REPORT(call) ::mpb::cuda::report_cuda_error((call), #call, __FILE__, __LINE__)
#define MPB_CUBLAS_REPORT(call) ::mpb::cuda::report_cublas_error((call), #call, __FILE__, __LINE__)
