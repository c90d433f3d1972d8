#include "runner/machine/library_check.h"

namespace mpb {

namespace {

constexpr const char* kNotLoaded = "not loaded";

nlohmann::json pair_json(const std::string& library, const HeaderRuntimeVersion& p, CudaLibraryCheck& check) {
  const VersionMatch match = compare_header_runtime(p.header, p.runtime);
  nlohmann::json j = {{"header", p.header.str()},
                      {"runtime", p.runtime ? p.runtime->str() : kNotLoaded},
                      {"status", version_match_name(match)}};
  if (!p.runtime && !p.not_loaded_reason.empty()) j["why"] = p.not_loaded_reason;
  const std::string line = version_mismatch_warning(library, p.header, p.runtime);
  if (match == VersionMatch::RuntimeOlder) check.warnings.push_back(line);
  if (match == VersionMatch::MajorDiffers) check.errors.push_back(line);
  return j;
}

}  // namespace

CudaLibraryCheck check_library_versions(const CudaLibraryVersions& v) {
  CudaLibraryCheck c;
  c.versions["cuda_runtime"] = pair_json("CUDA runtime", v.cuda_runtime, c);
  c.versions["cuda_driver"] = {{"runtime", v.cuda_driver ? v.cuda_driver->str() : kNotLoaded}};
  if (!v.cuda_driver) c.versions["cuda_driver"]["why"] = v.cuda_driver_problem;
  c.versions["cublasLt"] = pair_json("cuBLASLt", v.cublaslt, c);
  if (v.cudnn)
    c.versions["cudnn"] = pair_json("cuDNN", *v.cudnn, c);
  else
    c.versions["cudnn"] = {{"header", nullptr}, {"runtime", kNotLoaded}, {"status", "not_loaded"},
                           {"why", "built without cuDNN"}};
  // The driver supports CUDA up to its version. A runtime of a newer major
  // cannot start a context (CUDA 13 binaries need driver 580+, docs/GPU.md); a
  // newer minor runs under minor-version compatibility, without PTX JIT.
  if (v.cuda_driver && v.cuda_runtime.runtime && *v.cuda_driver < *v.cuda_runtime.runtime) {
    const std::string line = "CUDA driver: supports CUDA " + v.cuda_driver->str() + ", older than the runtime " +
                             v.cuda_runtime.runtime->str();
    if (v.cuda_driver->major < v.cuda_runtime.runtime->major)
      c.errors.push_back(line + " (no GPU work can run: update the driver)");
    else
      c.warnings.push_back(line + " (minor-version compatibility: no PTX JIT, so GPUs without SASS in the build "
                                  "cannot run it)");
  }
  return c;
}

CudaLibraryCheck cuda_library_check() {
#ifdef MPB_HAVE_CUDA
  return check_library_versions(cuda_library_header_runtime_versions());
#else
  CudaLibraryCheck c;
  for (const char* k : {"cuda_runtime", "cublasLt", "cudnn"})
    c.versions[k] = {{"header", nullptr}, {"runtime", kNotLoaded}, {"status", "not_loaded"},
                     {"why", "built without CUDA"}};
  c.versions["cuda_driver"] = {{"runtime", kNotLoaded}, {"why", "built without CUDA"}};
  return c;
#endif
}

}  // namespace mpb
