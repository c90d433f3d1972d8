#include "runner/machine/energy_meter.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "runner/io/text_file.h"

namespace mpb {

namespace {

// One number from a sysfs file; nullopt when it can't be read (or holds none).
std::optional<unsigned long long> read_counter(const std::string& path) {
  const std::optional<std::string> text = read_text_file(path);
  if (!text) return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text->c_str(), &end, 10);
  if (end == text->c_str()) return std::nullopt;
  return v;
}

// RAPL's package zones, each a microjoule counter that wraps at its range.
class RaplMeter : public EnergyMeter {
 public:
  struct Zone {
    std::string dir, name;
    unsigned long long range = 0, last = 0;
    double total_uj = 0;  // accumulated since open, wraps undone
  };
  explicit RaplMeter(std::vector<Zone> zones) : zones_(std::move(zones)) {}

  std::string source() const override {
    std::string s = "rapl (";
    for (size_t i = 0; i < zones_.size(); ++i) s += (i ? ", " : "") + zones_[i].name;
    return s + ")";
  }

  std::optional<double> joules(std::string* why) override {
    double total = 0;
    for (Zone& z : zones_) {
      const std::optional<unsigned long long> now = read_counter(z.dir + "/energy_uj");
      if (!now) {
        *why = z.dir + "/energy_uj can't be read any more";
        return std::nullopt;
      }
      // A counter below its last reading has wrapped (once: reads are far
      // more frequent than a wrap, which takes minutes at full power).
      z.total_uj += *now >= z.last ? double(*now - z.last) : double(z.range - z.last + *now);
      z.last = *now;
      total += z.total_uj;
    }
    return total * 1e-6;
  }

 private:
  std::vector<Zone> zones_;
};

class NvmlEnergyMeter : public EnergyMeter {
 public:
  explicit NvmlEnergyMeter(NvmlLibrary& nvml) : nvml_(nvml) {}
  std::string source() const override { return "nvml_total_energy"; }
  std::optional<double> joules(std::string* why) override {
    unsigned long long mj = 0;
    const int rc = nvml_.total_energy(nvml_.device, &mj);
    if (rc != 0) {
      *why = "nvmlDeviceGetTotalEnergyConsumption: " + nvml_error_text(rc);
      return std::nullopt;
    }
    return double(mj) * 1e-3;
  }

 private:
  NvmlLibrary& nvml_;
};

}  // namespace

std::unique_ptr<EnergyMeter> open_rapl_meter(const std::string& powercap_root, std::string* why) {
  std::error_code ec;
  std::filesystem::directory_iterator it(powercap_root, ec);
  if (ec) {
    *why = "no " + powercap_root + " (no RAPL driver, as in most VMs)";
    return nullptr;
  }
  // Top-level zones only (intel-rapl:0, not its sub-zones intel-rapl:0:0): packages.
  static const std::regex package(R"(intel-rapl:[0-9]+)");
  std::vector<std::string> dirs;
  for (const std::filesystem::directory_entry& e : it)
    if (std::regex_match(e.path().filename().string(), package)) dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) {
    *why = "no RAPL package zone (intel-rapl:N) in " + powercap_root;
    return nullptr;
  }
  std::vector<RaplMeter::Zone> zones;
  for (const std::string& dir : dirs) {
    RaplMeter::Zone z;
    z.dir = dir;
    const std::optional<std::string> name = read_text_file(dir + "/name");
    z.name = name ? name->substr(0, name->find('\n')) : "";
    if (z.name.empty()) z.name = dir.substr(dir.rfind('/') + 1);
    const std::optional<unsigned long long> now = read_counter(dir + "/energy_uj");
    const std::optional<unsigned long long> range = read_counter(dir + "/max_energy_range_uj");
    if (!now) {
      *why = dir + "/energy_uj is not readable (root only since Linux 5.10, CVE-2020-8694)";
      return nullptr;
    }
    if (!range || *range == 0) {
      *why = dir + "/max_energy_range_uj is not readable";
      return nullptr;
    }
    z.last = *now;
    z.range = *range;
    zones.push_back(z);
  }
  return std::make_unique<RaplMeter>(std::move(zones));
}

std::unique_ptr<EnergyMeter> open_nvml_energy_meter(NvmlLibrary& nvml, std::string* why) {
  if (!nvml.total_energy) {
    *why = "this NVML has no nvmlDeviceGetTotalEnergyConsumption";
    return nullptr;
  }
  unsigned long long mj = 0;
  if (const int rc = nvml.total_energy(nvml.device, &mj); rc != 0) {
    *why = "nvmlDeviceGetTotalEnergyConsumption: " + nvml_error_text(rc) + " (GPUs before Volta have no counter)";
    return nullptr;
  }
  return std::make_unique<NvmlEnergyMeter>(nvml);
}

std::unique_ptr<EnergyMeter> open_energy_meter(DeviceKind kind, NvmlLibrary* nvml, const std::string& nvml_why,
                                               std::string* why) {
  if (kind != DeviceKind::Cuda) return open_rapl_meter("/sys/class/powercap", why);
  if (!nvml) {
    *why = "no NVML: " + nvml_why;
    return nullptr;
  }
  return open_nvml_energy_meter(*nvml, why);
}

nlohmann::json energy_json(const std::string& source, const EnergyWindow& w, double median_step_ms, int batch_size) {
  const double joules = w.joules_end - w.joules_begin, seconds = w.seconds_end - w.seconds_begin;
  nlohmann::json j = {{"source", source}, {"steps", {w.first_step + 1, w.last_step}}, {"joules", joules},
                      {"seconds", seconds}};
  const bool usable = seconds > 0 && joules > 0 && median_step_ms > 0;
  const double power = usable ? joules / seconds : 0.0;
  const double per_step = power * median_step_ms * 1e-3;
  j["mean_power_w"] = usable ? nlohmann::json(power) : nlohmann::json(nullptr);
  j["j_per_step"] = usable ? nlohmann::json(per_step) : nlohmann::json(nullptr);
  j["samples_per_joule"] = usable ? nlohmann::json(batch_size / per_step) : nlohmann::json(nullptr);
  return j;
}

}  // namespace mpb
