#include "runner/measure/memory_triple.h"

#include <fstream>
#include <sstream>

#include "runner/machine/system_resources.h"

namespace mpb {

bool reset_resident_peak(std::string* why, const std::string& clear_refs) {
  std::ofstream out(clear_refs);
  if (out) out << "5";  // Linux 4.0+: reset the peak RSS to the current RSS
  out.flush();
  if (out) return true;
  *why = "could not restart the resident-set peak (" + clear_refs +
         " not writable), so process_peak_bytes is the process's peak since it started";
  return false;
}

std::optional<uint64_t> resident_peak_bytes(std::string* why, const std::string& status) {
  std::ifstream in(status);
  std::stringstream text;
  text << in.rdbuf();
  // The same "Key:   123 kB" lines as /proc/meminfo.
  const std::optional<uint64_t> hwm = in ? parse_meminfo_bytes(text.str(), "VmHWM") : std::nullopt;
  if (!hwm) *why = "no VmHWM in " + status;
  return hwm;
}

namespace {

nlohmann::json bytes_or_null(const std::optional<uint64_t>& b) { return b ? nlohmann::json(*b) : nlohmann::json(); }
nlohmann::json text_or_null(const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }

}  // namespace

nlohmann::json memory_triple_json(const MemoryTripleInputs& in) {
  return {{"allocator_peak_bytes", in.allocator_peak_bytes},
          {"process_peak_bytes", bytes_or_null(in.process_peak_bytes)},
          {"process_peak_source", in.process_source},
          {"process_peak_why", text_or_null(in.process_why)},
          {"device_used_peak_bytes", bytes_or_null(in.device_used_peak_bytes)},
          {"device_used_why", text_or_null(in.device_used_why)}};
}

nlohmann::json repeat_memory_json(const Device& dev, const MemorySnapshot& tracked, const nlohmann::json& gpu_telemetry,
                                  const std::string& telemetry_why, const std::string& rss_caveat) {
  MemoryTripleInputs in;
  in.allocator_peak_bytes = tracked.peak_total;
  if (const std::optional<size_t> reserved = dev.reserved_peak_bytes()) {
    in.process_peak_bytes = *reserved;
    in.process_source = "cudaMalloc";
  } else {
    in.process_source = "rss_high_water_mark";
    std::string why;
    in.process_peak_bytes = resident_peak_bytes(&why);
    in.process_why = in.process_peak_bytes ? rss_caveat : why;
  }
  const nlohmann::json used = gpu_telemetry.is_object() ? gpu_telemetry.value("memory_used_peak_bytes", nlohmann::json())
                                                         : nlohmann::json();
  if (used.is_number()) {
    in.device_used_peak_bytes = used.get<uint64_t>();
  } else if (dev.info().kind == DeviceKind::Cpu) {
    in.device_used_why = "the CPU device's memory is the process's: process_peak_bytes is the figure";
  } else {
    in.device_used_why = gpu_telemetry.is_object() ? "NVML gave no memory reading" : telemetry_why;
  }
  return memory_triple_json(in);
}

nlohmann::json summarize_memory_triples(const std::vector<nlohmann::json>& repeats) {
  nlohmann::json s = {{"allocator_peak_bytes", nullptr}, {"process_peak_bytes", nullptr},
                      {"process_peak_source", nullptr},  {"process_peak_why", nullptr},
                      {"device_used_peak_bytes", nullptr}, {"device_used_why", nullptr}};
  for (const nlohmann::json& rep : repeats) {
    const nlohmann::json& m = rep.value("memory", nlohmann::json());
    if (!m.is_object()) continue;
    for (const char* k : {"allocator_peak_bytes", "process_peak_bytes", "device_used_peak_bytes"})
      if (m.at(k).is_number() && (s[k].is_null() || m.at(k).get<uint64_t>() > s[k].get<uint64_t>())) s[k] = m.at(k);
    for (const char* k : {"process_peak_source", "process_peak_why", "device_used_why"})
      if (s[k].is_null() && !m.at(k).is_null()) s[k] = m.at(k);
  }
  return s;
}

}  // namespace mpb
