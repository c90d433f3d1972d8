#include "runner/machine/gpu_environment.h"

#include <cstdio>
#include <stdexcept>

namespace mpb {

namespace {

// The readings: null when the entry point is missing or the call fails.
template <class Fn, class... Args>
nlohmann::json unsigned_or_null(Fn fn, NvmlLibrary::Device d, Args... args) {
  unsigned v = 0;
  if (!fn || fn(d, args..., &v) != 0) return nullptr;
  return v;
}

nlohmann::json text_or_null(int (*fn)(NvmlLibrary::Device, char*, unsigned), NvmlLibrary::Device d) {
  char buf[96] = {};  // NVML_DEVICE_UUID_V2_BUFFER_SIZE is 96; the VBIOS string is 32
  if (!fn || fn(d, buf, sizeof buf - 1) != 0) return nullptr;
  return std::string(buf);
}

nlohmann::json enabled_name(int state) { return state ? "enabled" : "disabled"; }

}  // namespace

nlohmann::json gpu_environment_json(const NvmlLibrary& n) {
  const NvmlLibrary::Device d = n.device;
  nlohmann::json j;
  j["uuid"] = text_or_null(n.uuid, d);
  j["vbios"] = text_or_null(n.vbios, d);
  int cur = 0, pend = 0;
  j["ecc"] = n.ecc_mode && n.ecc_mode(d, &cur, &pend) == 0
                 ? nlohmann::json{{"current", enabled_name(cur)}, {"pending", enabled_name(pend)}}
                 : nlohmann::json(nullptr);
  unsigned mig = 0, mig_pending = 0;
  j["mig"] = n.mig_mode && n.mig_mode(d, &mig, &mig_pending) == 0
                 ? nlohmann::json{{"current", enabled_name(int(mig))}, {"pending", enabled_name(int(mig_pending))}}
                 : nlohmann::json(nullptr);
  int persistence = 0;
  j["persistence_mode"] = n.persistence && n.persistence(d, &persistence) == 0 ? enabled_name(persistence)
                                                                                : nlohmann::json(nullptr);
  j["applications_clocks_mhz"] = {{"sm", unsigned_or_null(n.applications_clock, d, NvmlLibrary::kClockSm)},
                                  {"mem", unsigned_or_null(n.applications_clock, d, NvmlLibrary::kClockMem)}};
  j["max_clocks_mhz"] = {{"sm", unsigned_or_null(n.max_clock, d, NvmlLibrary::kClockSm)},
                         {"mem", unsigned_or_null(n.max_clock, d, NvmlLibrary::kClockMem)}};
  j["pcie"] = {{"generation", unsigned_or_null(n.pcie_gen, d)},
               {"width", unsigned_or_null(n.pcie_width, d)},
               {"max_generation", unsigned_or_null(n.pcie_max_gen, d)},
               {"max_width", unsigned_or_null(n.pcie_max_width, d)}};
  // NVML_NVLINK_MAX_LINKS is 18 (Hopper); a link the GPU lacks is an error, not inactive.
  nlohmann::json links = nullptr;
  if (n.nvlink_state) {
    int active = 0, answered = 0;
    for (unsigned link = 0; link < 18; ++link) {
      int is_active = 0;
      if (n.nvlink_state(d, link, &is_active) != 0) continue;
      ++answered;
      active += is_active != 0;
    }
    if (answered > 0) links = active;
  }
  j["nvlink_active_links"] = links;
  return j;
}

std::string ClockLockRequest::text() const { return base ? "base" : std::to_string(mhz) + " MHz"; }

std::optional<ClockLockRequest> parse_clock_lock(const std::string& value, std::string* error) {
  ClockLockRequest r;
  if (value == "base") {
    r.base = true;
    return r;
  }
  size_t used = 0;
  unsigned long mhz = 0;
  try {
    mhz = std::stoul(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // No GPU clocks below 100 MHz or above 10 GHz: anything else is a typo.
  if (used != value.size() || value.empty() || value[0] == '-' || mhz < 100 || mhz > 10000) {
    *error = "--lock-clocks: expected 'base' or an SM clock in MHz (100-10000), got '" + value + "'";
    return std::nullopt;
  }
  r.mhz = static_cast<unsigned>(mhz);
  return r;
}

GpuClockLock::GpuClockLock(NvmlLibrary& nvml, const ClockLockRequest& request) : nvml_(nvml), request_(request) {
  if (!nvml_.lock_gpu_clocks || !nvml_.reset_gpu_clocks)
    throw std::runtime_error("--lock-clocks: this driver's NVML has no nvmlDeviceSetGpuLockedClocks (Volta and "
                             "newer GPUs, driver 440 and newer)");
  const unsigned clock = request_.base ? NvmlLibrary::kClockLimitTdp : request_.mhz;
  if (const int rc = nvml_.lock_gpu_clocks(nvml_.device, clock, clock); rc != 0)
    throw std::runtime_error("--lock-clocks " + request_.text() + ": NVML refused to lock the SM clock (" +
                             nvml_error_text(rc) +
                             "); it needs root, or run without --lock-clocks (the clocks are then recorded, "
                             "not held)");
  unsigned v = 0;
  if (nvml_.clock && nvml_.clock(nvml_.device, NvmlLibrary::kClockSm, &v) == 0) sm_mhz_after_ = v;
}

GpuClockLock::~GpuClockLock() {
  // A destructor can't throw; a failed reset is said, with the manual fix.
  if (const int rc = nvml_.reset_gpu_clocks(nvml_.device); rc != 0)
    std::fprintf(stderr, "runner: warning: could not release the locked SM clock (%s); run `nvidia-smi -rgc`\n",
                 nvml_error_text(rc).c_str());
}

nlohmann::json GpuClockLock::to_json() const {
  return {{"requested", request_.text()},
          {"applied", true},
          {"sm_clock_mhz_after_lock", sm_mhz_after_ >= 0 ? nlohmann::json(sm_mhz_after_) : nlohmann::json(nullptr)}};
}

}  // namespace mpb
