#include "runner/machine/gpu_telemetry.h"

#include <algorithm>
#include <chrono>

namespace mpb {

// ---- the summary ------------------------------------------------------------------------

std::vector<std::string> nvml_reason_names(unsigned long long reasons) {
  using namespace nvml_reason;
  static const std::pair<unsigned long long, const char*> names[] = {
      {kGpuIdle, "gpu_idle"},         {kApplicationsClocks, "applications_clocks_setting"},
      {kSwPowerCap, "sw_power_cap"},  {kHwSlowdown, "hw_slowdown"},
      {kSyncBoost, "sync_boost"},     {kSwThermal, "sw_thermal_slowdown"},
      {kHwThermal, "hw_thermal_slowdown"}, {kHwPowerBrake, "hw_power_brake_slowdown"},
      {kDisplayClock, "display_clock_setting"}};
  std::vector<std::string> out;
  for (const auto& [bit, name] : names)
    if (reasons & bit) out.push_back(name);
  return out;
}

namespace {

// {min, median, max} (or the subset in `keys`) of the readable (>= 0) values.
nlohmann::json stats(std::vector<double> v, bool with_min = true) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return x < 0; }), v.end());
  if (v.empty()) return nullptr;
  std::sort(v.begin(), v.end());
  nlohmann::json j = {{"median", v[v.size() / 2]}, {"max", v.back()}};
  if (with_min) j["min"] = v.front();
  return j;
}

}  // namespace

nlohmann::json summarize_gpu_samples(const std::vector<GpuSample>& samples, double interval_ms) {
  std::vector<double> sm, mem, temp, power, limit, used;
  unsigned long long seen = 0;
  size_t slowed = 0;
  for (const GpuSample& s : samples) {
    sm.push_back(s.sm_mhz);
    mem.push_back(s.mem_mhz);
    temp.push_back(s.temperature_c);
    power.push_back(s.power_w);
    limit.push_back(s.power_limit_w);
    used.push_back(s.memory_used_bytes);
    seen |= s.reasons;
    slowed += (s.reasons & nvml_reason::kSlowing) != 0;
  }
  nlohmann::json j;
  j["samples"] = samples.size();
  j["interval_ms"] = interval_ms;
  j["sm_clock_mhz"] = stats(sm);
  j["mem_clock_mhz"] = stats(mem);
  j["temperature_c"] = stats(temp, false);
  j["power_w"] = stats(power, false);
  const nlohmann::json lim = stats(limit);
  j["power_limit_w"] = lim.is_null() ? nlohmann::json(nullptr) : lim.at("min");
  const nlohmann::json u = stats(used);
  j["memory_used_peak_bytes"] = u.is_null() ? nlohmann::json(nullptr) : u.at("max");
  j["throttled_fraction"] = samples.empty() ? 0.0 : double(slowed) / double(samples.size());
  j["throttle_reasons"] = nvml_reason_names(seen);
  // Any slowing reason in any sample: flagged, never dropped. One 100 ms
  // sample can be a blip, but a reader decides that, not the runner.
  j["throttled"] = slowed > 0;
  return j;
}

// ---- sampling -----------------------------------------------------------------------------

std::unique_ptr<GpuTelemetry> GpuTelemetry::open(const std::string& pci_bus_id, std::string* why) {
  std::unique_ptr<NvmlLibrary> api = NvmlLibrary::open(pci_bus_id, why);
  if (!api) return nullptr;
  return std::unique_ptr<GpuTelemetry>(new GpuTelemetry(std::move(api)));
}

GpuTelemetry::GpuTelemetry(std::unique_ptr<NvmlLibrary> api) : api_(std::move(api)) {}

GpuTelemetry::~GpuTelemetry() {
  if (thread_.joinable()) end();
}

GpuSample GpuTelemetry::sample() const {
  GpuSample s;
  const NvmlLibrary& a = *api_;
  unsigned v = 0;
  if (a.clock && a.clock(a.device, NvmlLibrary::kClockSm, &v) == 0) s.sm_mhz = v;
  if (a.clock && a.clock(a.device, NvmlLibrary::kClockMem, &v) == 0) s.mem_mhz = v;
  if (a.temperature && a.temperature(a.device, 0, &v) == 0) s.temperature_c = v;
  if (a.power && a.power(a.device, &v) == 0) s.power_w = v / 1000.0;
  if (a.power_limit && a.power_limit(a.device, &v) == 0) s.power_limit_w = v / 1000.0;
  NvmlLibrary::Memory m{};
  if (a.memory && a.memory(a.device, &m) == 0) s.memory_used_bytes = double(m.used);
  unsigned long long r = 0;
  if (a.reasons && a.reasons(a.device, &r) == 0) s.reasons = r;
  return s;
}

void GpuTelemetry::begin(double interval_ms) {
  if (thread_.joinable()) end();
  interval_ms_ = interval_ms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    samples_.clear();
  }
  running_ = true;
  thread_ = std::thread([this] {
    const auto period = std::chrono::duration<double, std::milli>(interval_ms_);
    auto next = std::chrono::steady_clock::now();
    while (running_) {
      const GpuSample s = sample();
      {
        std::lock_guard<std::mutex> lock(mu_);
        samples_.push_back(s);
      }
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
      while (running_ && std::chrono::steady_clock::now() < next)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
}

nlohmann::json GpuTelemetry::end() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  samples_.push_back(sample());  // the window's end, so even a short window has a sample
  return summarize_gpu_samples(samples_, interval_ms_);
}

}  // namespace mpb
