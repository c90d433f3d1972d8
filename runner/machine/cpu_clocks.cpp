#include "runner/machine/cpu_clocks.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "runner/io/text_file.h"

namespace fs = std::filesystem;

namespace mpb {

namespace {

std::string trim_ws(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// cpu0, cpu1, ... under <root>/sys/devices/system/cpu, in numeric order
// (not cpufreq, cpuidle: those are not CPUs).
std::vector<fs::path> cpu_dirs(const std::string& root) {
  std::vector<std::pair<long, fs::path>> found;
  std::error_code ec;
  for (fs::directory_iterator it(root + "/sys/devices/system/cpu", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0) continue;
    if (!std::all_of(name.begin() + 3, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    found.emplace_back(std::strtol(name.c_str() + 3, nullptr, 10), it->path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

void set_mhz(CpuClocks& c, const std::vector<double>& mhz, const std::string& source) {
  c.mhz = std::accumulate(mhz.begin(), mhz.end(), 0.0) / double(mhz.size());
  c.mhz_min = *std::min_element(mhz.begin(), mhz.end());
  c.mhz_max = *std::max_element(mhz.begin(), mhz.end());
  c.mhz_cpus = int(mhz.size());
  c.mhz_source = source;
}

nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

std::vector<double> parse_cpuinfo_mhz(const std::string& cpuinfo) {
  std::vector<double> out;
  std::istringstream in(cpuinfo);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string v = trim_ws(line.substr(colon + 1));
    char* end = nullptr;
    const double mhz = std::strtod(v.c_str(), &end);
    if (end != v.c_str() && mhz > 0) out.push_back(mhz);
  }
  return out;
}

std::optional<double> parse_cpufreq_khz(const std::string& text) {
  const std::string v = trim_ws(text);
  if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  const double khz = std::strtod(v.c_str(), nullptr);
  if (!(khz > 0)) return std::nullopt;
  return khz / 1000.0;
}

bool cpuinfo_has_hypervisor_flag(const std::string& cpuinfo) {
  std::istringstream in(cpuinfo);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream flags(line.substr(colon + 1));
    for (std::string f; flags >> f;)
      if (f == "hypervisor") return true;
    return false;  // the first CPU's flags stand for all
  }
  return false;
}

CpuClocks read_cpu_clocks(const std::string& root) {
  CpuClocks c;
  const std::optional<std::string> cpuinfo = read_text_file(root + "/proc/cpuinfo");
  c.hypervisor = cpuinfo && cpuinfo_has_hypervisor_flag(*cpuinfo);
  const std::vector<fs::path> cpus = cpu_dirs(root);
  c.cpus = int(cpus.size());

  std::vector<double> cur_mhz;
  int with_cpufreq = 0;
  std::string first_error;
  for (const fs::path& cpu : cpus) {
    std::error_code ec;
    if (!fs::is_directory(cpu / "cpufreq", ec)) continue;  // offline CPU, or no cpufreq driver
    ++with_cpufreq;
    std::string err;
    if (auto g = read_text_file((cpu / "cpufreq" / "scaling_governor").string(), &err)) {
      const std::string name = trim_ws(*g);
      if (!name.empty()) ++c.governors[name];
    } else if (first_error.empty()) {
      first_error = err;
    }
    if (auto f = read_text_file((cpu / "cpufreq" / "scaling_cur_freq").string()))
      if (auto mhz = parse_cpufreq_khz(*f)) cur_mhz.push_back(*mhz);
  }

  if (c.governors.size() == 1) {
    c.governor = c.governors.begin()->first;
  } else if (c.governors.size() > 1) {
    std::string list;
    for (const auto& [g, n] : c.governors) list += (list.empty() ? "" : ", ") + g + " on " + std::to_string(n);
    c.governor_why = "the CPUs use different governors (" + list + ")";
  } else if (with_cpufreq == 0) {
    c.governor_why = c.cpus == 0 ? "no CPUs listed under /sys/devices/system/cpu (no sysfs here?)"
                     : c.hypervisor
                         ? "no cpufreq in this VM (the hypervisor flag is set): the host sets the clocks"
                         : "no cpufreq under /sys/devices/system/cpu/cpu*/ (no frequency-scaling driver, or a "
                           "container that hides it)";
  } else {
    c.governor_why = "cpufreq present but no governor readable (" + (first_error.empty() ? "empty files" : first_error) + ")";
  }

  if (!cur_mhz.empty()) {
    set_mhz(c, cur_mhz, "cpufreq scaling_cur_freq");
  } else if (cpuinfo) {
    const std::vector<double> mhz = parse_cpuinfo_mhz(*cpuinfo);
    if (!mhz.empty()) set_mhz(c, mhz, "/proc/cpuinfo cpu MHz");
    else c.mhz_why = "neither cpufreq scaling_cur_freq nor a \"cpu MHz\" line in /proc/cpuinfo (this architecture "
                     "does not report it)";
  } else {
    c.mhz_why = "no cpufreq scaling_cur_freq and /proc/cpuinfo not readable";
  }
  return c;
}

nlohmann::json CpuClocks::to_json() const {
  nlohmann::json j;
  j["governor"] = governor ? nlohmann::json(*governor) : nlohmann::json(nullptr);
  j["governors"] = governors;
  j["mhz"] = opt(mhz);
  j["mhz_min"] = opt(mhz_min);
  j["mhz_max"] = opt(mhz_max);
  j["mhz_source"] = mhz_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(mhz_source);
  std::string why = governor_why;
  if (!mhz_why.empty()) why += (why.empty() ? "" : "; ") + mhz_why;
  j["why"] = why.empty() ? nlohmann::json(nullptr) : nlohmann::json(why);
  return j;
}

}  // namespace mpb
