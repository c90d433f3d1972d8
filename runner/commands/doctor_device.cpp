// The device checks of `runner doctor`: what CUDA sees, the device runs would
// use, its GEMM ceilings per compute mode, and a time-boxed subset of the op
// checks (opcheck/) on it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <utility>

#include "backends/cpu/cpu_device.h"
#include "opcheck/opcheck.h"
#include "runner/measure/ceiling.h"
#include "runner/machine/device_factory.h"
#include "runner/commands/doctor_checks.h"
#include "runner/machine/energy_meter.h"
#include "runner/machine/library_check.h"
#include "runner/machine/loaded_libraries.h"
#include "runner/results/manifest.h"
#include "runner/io/seconds_since.h"
#include "runner/results/terminal_table.h"
#ifdef MPB_HAVE_CUDA
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_inventory.h"
#endif

namespace mpb::doctor {

namespace {

// How much an unusable GPU matters: not at all for --device cpu, a fallback
// to the CPU for auto, a blocker for cuda.
void grade_no_gpu(DoctorCheck& c, const std::string& requested) {
  if (requested == "cuda") {
    c.status = CheckStatus::Fail;
    c.meaning = "--device cuda can't run here: every run would exit 1";
  } else if (requested == "auto") {
    c.status = CheckStatus::Warn;
    c.meaning = "--device auto runs on the CPU here: CPU numbers, not GPU ones";
  } else {
    c.status = CheckStatus::Ok;
    c.meaning = "not needed for --device cpu";
  }
}

#ifdef MPB_HAVE_CUDA
// Another process's memory on the GPU means it may be using the GPU's time
// too. Our own context takes some hundreds of MiB, hence the margin.
constexpr double kForeignGpuMemoryBytes = 1.5 * 1024 * 1024 * 1024;

nlohmann::json inventory_json(const CudaInventory& inv) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const CudaGpuInfo& g : inv.gpus)
    gpus.push_back({{"ordinal", g.ordinal}, {"name", g.name}, {"compute_capability", g.compute_capability},
                    {"memory_bytes", g.memory_bytes},
                    {"free_bytes", g.free_bytes ? nlohmann::json(*g.free_bytes) : nlohmann::json(nullptr)},
                    {"multiprocessors", g.multiprocessors},
                    {"peak_clock_mhz", g.peak_clock_mhz ? nlohmann::json(*g.peak_clock_mhz) : nlohmann::json(nullptr)},
                    {"ecc", g.ecc ? nlohmann::json(*g.ecc) : nlohmann::json(nullptr)},
                    {"problems", g.problems}});
  return {{"device_count", inv.device_count},
          {"error", inv.error ? nlohmann::json(*inv.error) : nlohmann::json(nullptr)},
          {"runtime", inv.runtime_version},
          {"driver", inv.driver_version},
          {"gpus", gpus},
          {"problems", inv.problems}};
}

std::string gpu_text(const CudaGpuInfo& g) {
  std::string s = "GPU " + std::to_string(g.ordinal) + ": " + (g.name.empty() ? "?" : g.name) + ", cc " +
                  g.compute_capability + ", " + std::to_string(g.multiprocessors) + " SMs, ";
  s += g.free_bytes ? human_bytes(double(*g.free_bytes)) + " free of " + human_bytes(double(g.memory_bytes))
                    : human_bytes(double(g.memory_bytes));
  if (g.peak_clock_mhz) s += ", peak clock " + std::to_string(*g.peak_clock_mhz) + " MHz";
  if (g.ecc) s += *g.ecc ? ", ECC on" : ", ECC off";
  return s;
}
#endif

// "headers 9.19.0, loaded 9.1.0" per library, for the finding: what the build
// compiled against beside what this process loaded (runner/machine/library_check.h).
std::string header_runtime_text(const nlohmann::json& versions) {
  std::string s;
  for (const auto& [name, label] : {std::pair<const char*, const char*>{"cuda_runtime", "CUDA runtime"},
                                    {"cublasLt", "cuBLASLt"}, {"cudnn", "cuDNN"}}) {
    const nlohmann::json& v = versions.at(name);
    s += (s.empty() ? "" : ", ") + std::string(label) + " headers " +
         (v.at("header").is_null() ? std::string("none") : v.at("header").get<std::string>()) + " / loaded " +
         v.at("runtime").get<std::string>();
  }
  return s;
}

// Adds the header-vs-runtime findings to `c`: the versions in its data, a note
// per mismatch. A mismatch matters only when a GPU run is asked for: an older
// runtime is a warning, another major (no ABI promise) fails --device cuda.
void add_library_check(DoctorCheck& c, const std::string& requested, bool grade) {
  const CudaLibraryCheck lib = cuda_library_check();
  c.data["header_vs_runtime"] = lib.versions;
  nlohmann::json warnings = nlohmann::json::array();
  for (const std::string& e : lib.errors) warnings.push_back("error: " + e);
  for (const std::string& w : lib.warnings) warnings.push_back(w);
  c.data["library_warnings"] = warnings;
  c.data["loaded_libraries"] = loaded_cuda_libraries();  // which copies: toolkit's, a wheel's (runner/machine/loaded_libraries.h)
  c.finding += "; " + header_runtime_text(lib.versions);
  for (const auto& w : warnings) c.meaning += (c.meaning.empty() ? "" : "; ") + w.get<std::string>();
  if (!grade || requested == "cpu") return;
  if (!lib.errors.empty() && requested == "cuda") c.status = CheckStatus::Fail;
  else if ((!lib.errors.empty() || !lib.warnings.empty()) && c.status == CheckStatus::Ok) c.status = CheckStatus::Warn;
}

// GEMM cases first (the op every measurement leans on), then one case of
// each op before the second case of any, so a short budget still covers
// many different ops.
std::vector<const opcheck::OpCase*> selftest_order(const std::vector<const opcheck::OpCase*>& cases) {
  std::vector<std::string> ops;
  std::map<std::string, std::vector<const opcheck::OpCase*>> by_op;
  for (const opcheck::OpCase* c : cases) {
    if (!by_op.count(c->op)) ops.push_back(c->op);
    by_op[c->op].push_back(c);
  }
  std::stable_partition(ops.begin(), ops.end(), [](const std::string& op) { return op == "gemm"; });
  std::vector<const opcheck::OpCase*> out;
  for (size_t round = 0; out.size() < cases.size(); ++round)
    for (const std::string& op : ops)
      if (round < by_op[op].size()) out.push_back(by_op[op][round]);
  return out;
}

}  // namespace

DoctorCheck check_cuda(const std::string& requested) {
  DoctorCheck c;
  c.name = "gpu";
#ifndef MPB_HAVE_CUDA
  c.finding = "this runner was built without the CUDA backend (MPB_CUDA=OFF, or no CUDA toolkit when configuring)";
  c.data = {{"built", false}};
  grade_no_gpu(c, requested);
  if (requested == "cuda") c.meaning += " (rebuild with MPB_CUDA=ON)";
  add_library_check(c, requested, false);
  return c;
#else
  const CudaInventory inv = cuda_inventory();
  std::string libs = "runtime " + inv.runtime_version + ", driver " + inv.driver_version;
  nlohmann::json versions = nlohmann::json::object();
  for (const auto& [k, v] : cuda_library_versions()) {
    versions[k] = v;
    if (k == "cublas" || k == "cublasLt" || k == "cudnn")
      libs += ", " + std::string(k == "cublas" ? "cuBLAS " : k == "cublasLt" ? "cuBLASLt " : "cuDNN ") + v;
  }
  c.data = inventory_json(inv);
  c.data["built"] = true;
  c.data["libraries"] = versions;
  const std::optional<std::string> unusable = cuda_unavailable_reason();
  if (inv.error || inv.device_count == 0 || unusable) {
    c.finding = (unusable ? *unusable : "no CUDA device: " + inv.error.value_or("none found")) + " (" + libs + ")";
    if (!inv.gpus.empty()) c.finding += "; " + gpu_text(inv.gpus[0]);
    grade_no_gpu(c, requested);
    add_library_check(c, requested, false);
    return c;
  }
  c.finding = std::to_string(inv.device_count) + " GPU" + (inv.device_count > 1 ? "s" : "") + " (" + libs + ")";
  for (const CudaGpuInfo& g : inv.gpus) c.finding += "; " + gpu_text(g);
  c.status = CheckStatus::Ok;
  std::vector<std::string> notes;
  const CudaGpuInfo& g0 = inv.gpus[0];
  if (requested != "cpu" && g0.free_bytes && *g0.free_bytes <= g0.memory_bytes &&
      double(g0.memory_bytes - *g0.free_bytes) > kForeignGpuMemoryBytes) {
    c.status = CheckStatus::Warn;
    notes.push_back(human_bytes(double(g0.memory_bytes - *g0.free_bytes)) +
                    " of GPU 0 is in use by other processes (nvidia-smi names them): they may be using its time too");
  }
  std::vector<std::string> problems = inv.problems;
  for (const CudaGpuInfo& g : inv.gpus)
    for (const std::string& p : g.problems) problems.push_back("GPU " + std::to_string(g.ordinal) + ": " + p);
  if (!problems.empty()) {
    c.status = CheckStatus::Warn;
    std::string all;
    for (const std::string& p : problems) all += (all.empty() ? "" : "; ") + p;
    notes.push_back("queries failed: " + all);
  }
  if (inv.device_count > 1) notes.push_back("runs use GPU 0 (CUDA_VISIBLE_DEVICES picks which one that is)");
  for (const std::string& n : notes) c.meaning += (c.meaning.empty() ? "" : "; ") + n;
  add_library_check(c, requested, true);
  return c;
#endif
}

std::unique_ptr<Device> open_device(const std::string& requested, DoctorCheck* check) {
  DoctorCheck& c = *check;
  c.name = "device";
  std::string notice;
  std::unique_ptr<Device> dev;
  try {
    dev = make_device(requested, &notice);
  } catch (const std::exception& e) {
    c.status = CheckStatus::Fail;
    c.finding = "--device " + requested + ": " + e.what();
    c.meaning = "runs with this device would exit 1 at once";
    c.data = {{"requested", requested}, {"error", e.what()}};
    return nullptr;
  }
  const DeviceInfo& info = dev->info();
  c.status = CheckStatus::Ok;
  c.finding = std::string(device_kind_name(info.kind)) + ": " + info.name +
              (info.kind == DeviceKind::Cuda
                   ? ", cc " + info.compute_capability.value_or("?") + ", " + std::to_string(info.cores) + " SMs"
                   : ", " + std::to_string(info.cores) + " threads, the " + info.kernel_isa +
                         " build of the CPU kernels (" + info.kernel_isa_source + "), GEMMs " + info.gemm_isa);
  nlohmann::json versions = nlohmann::json::object();
  for (const auto& [k, v] : info.versions) versions[k] = v;
  c.data = {{"requested", requested}, {"kind", device_kind_name(info.kind)}, {"name", info.name}, {"cores", info.cores},
            {"versions", versions}};
  c.data["cpu_kernels"] = cpu_kernels_json(info);
  if (!notice.empty()) {
    c.status = CheckStatus::Warn;
    c.finding += " (" + notice + ")";
    c.meaning = "--device auto measures the CPU here";
  }
  return dev;
}

std::vector<DoctorCheck> check_gemm_ceilings(Device& dev, int n, int reps) {
  if (n <= 0) n = ceiling_gemm_size(dev);
  std::vector<DoctorCheck> out;
  double fp32 = 0.0;
  for (GemmCompute mode : {GemmCompute::F32, GemmCompute::TF32, GemmCompute::F16, GemmCompute::BF16}) {
    const std::string name = gemm_compute_name(mode);
    DoctorCheck c;
    c.name = "gemm " + name;
    const Support support = dev.supports(gemm_feature(mode));
    c.data = {{"mode", name}, {"support", support_level_name(support.level)}, {"n", n}, {"reps", reps}};
    if (!support.runs()) {
      c.status = CheckStatus::Warn;
      c.finding = support.reason.empty() ? "unsupported on " + dev.info().name : support.describe();
      c.meaning = "cells with " + name + " GEMMs can't run on this device";
      out.push_back(c);
      continue;
    }
    double gflops = 0.0;
    try {
      gflops = measure_gemm_ceiling(dev, mode, n, reps);
    } catch (const std::exception& e) {
      c.status = CheckStatus::Fail;
      c.finding = std::string(support_level_name(support.level)) + ", but the GEMM failed: " + e.what();
      c.meaning = "cells with " + name + " GEMMs would fail on this device";
      out.push_back(c);
      continue;
    }
    c.data["gflops"] = gflops;
    const std::string size = std::to_string(n) + "^3, best of " + std::to_string(reps);
    c.finding = fmt("%.1f GFLOP/s, ", gflops) + support_level_name(support.level);
    if (mode == GemmCompute::F32) {
      fp32 = gflops;
      c.finding += " (" + size + ")";
    } else if (fp32 > 0) {
      const double ratio = gflops / fp32;
      c.data["vs_fp32"] = ratio;
      c.finding += fmt(", %.2fx fp32", ratio) + " (" + size + ")";
      if (support.level == SupportLevel::Native && ratio < 1.0) {
        c.status = CheckStatus::Warn;
        c.meaning = "native " + name + " is no faster than fp32 here: throttled clocks or a slow library kernel; " +
                    name + " cells' speed-ups will understate the hardware";
      }
    }
    if (support.level == SupportLevel::Emulated && c.meaning.empty())
      c.meaning = "emulated (operands rounded to " + name + ", fp32 math): cells record gemm_impl \"emulated\"; "
                  "their speed is not that of " + name + " hardware";
    out.push_back(c);
  }
  return out;
}

DoctorCheck check_energy(const Device& dev) {
  DoctorCheck c;
  c.name = "energy";
  const DeviceInfo& info = dev.info();
  std::string nvml_why, why;
  std::unique_ptr<NvmlLibrary> nvml =
      info.kind == DeviceKind::Cuda ? NvmlLibrary::open(info.pci_bus_id, &nvml_why) : nullptr;
  std::unique_ptr<EnergyMeter> meter = open_energy_meter(info.kind, nvml.get(), nvml_why, &why);
  const std::optional<double> joules = meter ? meter->joules(&why) : std::nullopt;
  if (!joules) {
    c.status = CheckStatus::Warn;
    c.finding = "no energy counter: " + why;
    c.meaning = "cells record energy null with this reason: no samples/J in the report or the generation table";
    c.data = {{"source", nullptr}, {"why", why}};
    return c;
  }
  c.finding = meter->source() + fmt(" readable (%.1f J since it started counting)", *joules);
  c.data = {{"source", meter->source()}, {"joules", *joules}};
  return c;
}

DoctorCheck check_selftest(Device& dev, double seconds) {
  DoctorCheck c;
  c.name = "selftest";
  const std::string kind = device_kind_name(dev.info().kind);  // for the finding and data
  if (!(seconds > 0)) {
    c.status = CheckStatus::Warn;
    c.finding = "skipped (--selftest-seconds 0)";
    c.meaning = "this device's ops were not checked against their float64 references";
    c.data = {{"budget_seconds", seconds}, {"ran", 0}};
    return c;
  }
  const std::vector<const opcheck::OpCase*> cases = selftest_order(opcheck::select_cases(/*quick=*/true));
  // On a GPU each case is also compared with the CPU backend, as tests/ops does.
  std::unique_ptr<Device> cpu = dev.info().kind == DeviceKind::Cpu ? nullptr : make_cpu_device();
  const auto t0 = std::chrono::steady_clock::now();
  int passed = 0, failed = 0, skipped = 0;
  size_t ran = 0;
  nlohmann::json results = nlohmann::json::array();
  std::string failed_names;
  // The budget is checked before each case, so it can be overrun by one case
  // (small cases take well under a second; see opcheck/opcheck.h).
  for (; ran < cases.size() && (ran == 0 || seconds_since(t0) < seconds); ++ran) {
    const opcheck::OpResult r = opcheck::run_case(*cases[ran], dev, cpu.get());
    if (r.status == opcheck::Status::Pass) ++passed;
    else if (r.status == opcheck::Status::Skip) ++skipped;
    else {
      ++failed;
      failed_names += (failed_names.empty() ? "" : ", ") + cases[ran]->name() +
                      (r.failures.empty() ? std::string() : " (" + r.failures.front() + ")");
    }
    results.push_back({{"case", cases[ran]->name()}, {"status", opcheck::status_name(r.status)},
                       {"seconds", r.seconds}, {"failures", r.failures}});
  }
  const double took = seconds_since(t0);
  const size_t not_run = cases.size() - ran;
  c.data = {{"device", kind}, {"budget_seconds", seconds}, {"seconds", took}, {"ran", ran},
            {"passed", passed}, {"failed", failed}, {"skipped", skipped}, {"not_run", not_run},
            {"cases", results}};
  c.finding = std::to_string(passed) + " of " + std::to_string(ran) + " op checks passed on " + kind +
              fmt(" in %.1f s", took);
  if (skipped) c.finding += ", " + std::to_string(skipped) + " skipped";
  if (not_run)
    c.finding += " (" + std::to_string(not_run) + " more small cases left for the time budget; the whole table "
                 "and training steps: runner selftest --device " + kind + ")";
  if (failed) {
    c.status = CheckStatus::Fail;
    c.finding += "; FAILED: " + failed_names;
    c.meaning = "this device computes these ops wrongly: measurements of cells that use them time broken code";
  }
  return c;
}

}  // namespace mpb::doctor
