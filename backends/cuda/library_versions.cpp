#include "backends/cuda/library_versions.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#ifdef MPB_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace mpb {

namespace {

// A header's version macro decoded at compile time's value; the decoders
// return nullopt only for 0, which no header defines.
LibraryVersion header_version(const std::optional<LibraryVersion>& v) { return v.value_or(LibraryVersion{}); }

}  // namespace

CudaLibraryVersions cuda_library_header_runtime_versions() {
  CudaLibraryVersions out;
  out.cuda_runtime.header = header_version(decode_cuda_version(CUDART_VERSION));
  int runtime = 0;
  const cudaError_t rt = cudaRuntimeGetVersion(&runtime);
  if (rt == cudaSuccess) {
    out.cuda_runtime.runtime = decode_cuda_version(runtime);
  } else {
    out.cuda_runtime.not_loaded_reason = std::string("cudaRuntimeGetVersion: ") + cudaGetErrorName(rt);
  }
  int driver = 0;
  const cudaError_t dr = cudaDriverGetVersion(&driver);
  if (dr != cudaSuccess)
    out.cuda_driver_problem = std::string("cudaDriverGetVersion: ") + cudaGetErrorName(dr);
  else if (driver == 0)
    out.cuda_driver_problem = "no driver installed";
  else
    out.cuda_driver = decode_cuda_version(driver);
  (void)cudaGetLastError();  // a failed query must not linger as the sticky "last error"

  out.cublaslt.header = header_version(decode_cublas_version(CUBLAS_VERSION));
  out.cublaslt.runtime = decode_cublas_version(cublasLtGetVersion());
  if (!out.cublaslt.runtime) out.cublaslt.not_loaded_reason = "cublasLtGetVersion returned 0";

#ifdef MPB_HAVE_CUDNN
  HeaderRuntimeVersion cudnn;
  cudnn.header = header_version(decode_cudnn_version(CUDNN_VERSION));
  // cudnnGetVersion needs no handle. cuDNN 9's libcudnn is a shim over
  // libcudnn_graph and the engine libraries; 0 from it means it loaded nothing.
  cudnn.runtime = decode_cudnn_version(cudnnGetVersion());
  if (!cudnn.runtime) cudnn.not_loaded_reason = "cudnnGetVersion returned 0 (a cuDNN sub-library did not load)";
  out.cudnn = cudnn;
#endif
  return out;
}

}  // namespace mpb
