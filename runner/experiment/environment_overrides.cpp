#include "runner/experiment/environment_overrides.h"

#include <algorithm>

extern char** environ;  // POSIX; unistd.h declares it only with _GNU_SOURCE

namespace mpb {

const std::vector<OverrideRule>& override_rules() {
  // Exact names before the prefixes that would also match them, so a known
  // variable gets its specific effect.
  static const std::vector<OverrideRule> rules = {
      {"NVIDIA_TF32_OVERRIDE", "0 disables TF32 in cuBLAS and cuDNN whatever the code asks: tf32 cells run fp32 math"},
      {"CUBLAS_WORKSPACE_CONFIG", "cuBLAS's workspace size: changes which GEMM kernels (and summation orders) it picks"},
      {"CUBLAS_*", "cuBLAS behaviour (emulation strategy, logging, ...): GEMM math or speed"},
      {"CUBLASLT_*", "cuBLASLt heuristics or logging (CUBLASLT_LOG_LEVEL slows every call)"},
      {"CUDNN_*", "cuDNN behaviour or logging"},
      {"CUDA_VISIBLE_DEVICES", "which GPU is device 0"},
      {"CUDA_LAUNCH_BLOCKING", "1 synchronises after every kernel launch: step times include the waits"},
      {"CUDA_MODULE_LOADING", "lazy or eager kernel loading: the first calls' times"},
      {"CUDA_DEVICE_MAX_CONNECTIONS", "how many hardware queues streams use: overlap of kernels"},
      {"CUDA_FORCE_PTX_JIT", "kernels compiled from PTX at start instead of the built binaries"},
      {"CUDA_DISABLE_PTX_JIT", "no PTX fallback for GPUs without a built binary"},
      {"CUDA_CACHE_DISABLE", "no JIT cache: PTX recompiled every run"},
      {"MPB_CUDA_DEBUG_SYNC", "mpbench synchronises after every kernel launch: step times include the waits"},
      {"MPB_GEMM_PLAN_LOG", "mpbench prints each cuBLASLt GEMM plan it builds (algorithm, split-K, reduction scheme) to stderr"},
      {"MPB_CPU_ISA", "which build of mpbench's CPU kernels runs (scalar, avx2, avx512, avx512_bf16): CPU speed"},
      {"ONEDNN_*", "oneDNN's CPU kernels (ONEDNN_MAX_CPU_ISA can rule out AVX-512/AMX) or verbose logging"},
      {"DNNL_*", "oneDNN's CPU kernels (the older names of the ONEDNN_ variables)"},
      {"OMP_NUM_THREADS", "the CPU backend's thread count"},
      {"OMP_PROC_BIND", "OpenMP thread pinning: CPU speed and its run-to-run spread"},
      {"OMP_PLACES", "OpenMP thread placement"},
      {"OMP_DYNAMIC", "OpenMP may change the thread count between loops"},
      {"OMP_WAIT_POLICY", "OpenMP threads spin or sleep between loops: CPU speed and load on other cores"},
      {"GOMP_CPU_AFFINITY", "GNU OpenMP thread pinning"},
      {"GOMP_SPINCOUNT", "how long GNU OpenMP threads spin before sleeping"},
  };
  return rules;
}

namespace {
bool matches(const std::string& pattern, const std::string& name) {
  if (!pattern.empty() && pattern.back() == '*')
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return name == pattern;
}
}  // namespace

std::vector<EnvOverride> find_overrides(const std::vector<std::string>& environment) {
  std::vector<EnvOverride> found;
  for (const std::string& entry : environment) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = entry.substr(0, eq);
    for (const OverrideRule& r : override_rules())
      if (matches(r.pattern, name)) {
        found.push_back({name, entry.substr(eq + 1), r.effect});
        break;
      }
  }
  std::sort(found.begin(), found.end(), [](const EnvOverride& a, const EnvOverride& b) { return a.name < b.name; });
  return found;
}

std::vector<std::string> process_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

nlohmann::json overrides_json(const std::vector<EnvOverride>& found) {
  nlohmann::json o = nlohmann::json::object();
  for (const EnvOverride& e : found) o[e.name] = e.value;
  nlohmann::json checked = nlohmann::json::array();
  for (const OverrideRule& r : override_rules()) checked.push_back(r.pattern);
  return {{"overrides", o}, {"checked", checked}};
}

}  // namespace mpb
