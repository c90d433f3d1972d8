#include "runner/results/manifest.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "runner/io/atomic_file.h"
#include "runner/io/build_info.h"
#include "runner/machine/cpu_clocks.h"
#include "runner/experiment/describe.h"
#include "runner/experiment/environment_overrides.h"
#include "runner/machine/library_check.h"
#include "runner/machine/loaded_libraries.h"
#ifdef MPB_HAVE_CUDA
#include "backends/cuda/cuda_device.h"
#endif

namespace mpb {

namespace {

std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  return "";
}

std::string os_pretty_name() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  return "unknown";
}

}  // namespace

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json machine_json() {
  nlohmann::json m;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  m["hostname"] = host;
  m["cpu_model"] = cpuinfo_field("model name");
  m["cores"] = std::thread::hardware_concurrency();
  // The flags that decide which precisions run natively.
  std::set<std::string> wanted{"avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile"};
  std::istringstream flags(cpuinfo_field("flags"));
  nlohmann::json have = nlohmann::json::array();
  for (std::string f; flags >> f;)
    if (wanted.count(f)) have.push_back(f);
  m["cpu_flags"] = have;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  m["memory_bytes"] = pages > 0 && page > 0 ? static_cast<long long>(pages) * page : 0;
  m["os"] = os_pretty_name();
  utsname u{};
  m["kernel"] = uname(&u) == 0 ? std::string(u.release) : "unknown";
  // A snapshot when the run starts (the clock under load is another matter;
  // a governor other than "performance" lets it ramp during the run).
  m["cpu_clocks"] = read_cpu_clocks().to_json();
  return m;
}

nlohmann::json libraries_json(const DeviceInfo& dev) {
  nlohmann::json l;
  l["yaml-cpp"] = yaml_cpp_version();
  l["nlohmann_json"] = std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." + std::to_string(NLOHMANN_JSON_VERSION_MINOR) +
                       "." + std::to_string(NLOHMANN_JSON_VERSION_PATCH);
  for (const char* k : {"cuda_runtime", "cuda_driver", "cublas", "cudnn"}) l[k] = nullptr;
#ifdef MPB_HAVE_CUDA
  // The CUDA libraries this runner was built with, even when it runs on the CPU.
  for (const auto& [k, v] : cuda_library_versions()) l[k] = v;
#endif
  for (const auto& [k, v] : dev.versions) l[k] = v;
  // The headers built against beside the libraries this process loaded, and
  // what a mismatch means (runner/machine/library_check.h; docs/RESULTS.md).
  const CudaLibraryCheck check = cuda_library_check();
  l["header_vs_runtime"] = check.versions;
  nlohmann::json warnings = nlohmann::json::array();
  for (const std::string& e : check.errors) warnings.push_back("error: " + e);
  for (const std::string& w : check.warnings) warnings.push_back(w);
  l["warnings"] = warnings;
  // Which copies were mapped (a version does not say whose library it is).
  l["loaded"] = loaded_cuda_libraries();
  return l;
}

nlohmann::json cpu_kernels_json(const DeviceInfo& dev) {
  if (dev.kind != DeviceKind::Cpu) return nullptr;
  return {{"isa", dev.kernel_isa},
          {"source", dev.kernel_isa_source},
          {"runnable", dev.kernel_isas_runnable},
          {"gemm", dev.gemm_isa}};
}

nlohmann::json build_manifest(const ExperimentConfig& exp, const DeviceInfo& dev,
                              const std::map<std::string, double>& ceiling_gflops) {
  nlohmann::json m;
  m["schema"] = "mpbench.manifest/1";
  m["experiment"] = exp.name;
  m["config_path"] = exp.path;
  nlohmann::json cells = nlohmann::json::array();
  nlohmann::json all = nlohmann::json::array();
  nlohmann::json hashes = nlohmann::json::object();  // what report.py checks each cell file against
  for (const Cell& c : exp.cells) {
    cells.push_back(c.id);
    const nlohmann::json config = cell_config_to_json(c.config);
    all.push_back({{"id", c.id}, {"config", config}});
    hashes[c.id] = config_hash(config);
  }
  m["config_hash"] = config_hash(all);
  m["started"] = utc_now_iso8601();
  m["finished"] = nullptr;
  m["mpbench_version"] = mpbench_version();
  m["git_commit"] = git_commit();
  m["git"] = git_json();
  m["machine"] = machine_json();
  m["compiler"] = compiler_name();
  m["build"] = build_json();
  m["environment"] = overrides_json(find_overrides(process_environment()));
  m["libraries"] = libraries_json(dev);
  nlohmann::json d;
  d["kind"] = device_kind_name(dev.kind);
  d["name"] = dev.name;
  d["gpu"] = nullptr;
  if (dev.kind == DeviceKind::Cuda)
    d["gpu"] = {{"name", dev.name}, {"compute_capability", dev.compute_capability.value_or("")},
                {"memory_bytes", dev.memory_bytes}, {"multiprocessors", dev.cores}};
  d["cpu_kernels"] = cpu_kernels_json(dev);
  d["ceiling_gflops"] = ceiling_gflops;
  m["device"] = d;
  m["cells"] = cells;
  m["cell_config_hashes"] = hashes;
  m["vocabulary"] = vocabulary_json();  // what the scripts sort and label by (runner/experiment/describe.h)
  return m;
}

}  // namespace mpb
