// Three memory figures per repeat, not one (issue 18; optimum-benchmark#31
// reported reserved memory as used):
//   allocator_peak_bytes    what tensors held at once: the MemoryTracker's
//                           peak (peak_memory_bytes has it by category);
//   process_peak_bytes      what the process took from the device's memory:
//                           CUDA: the most bytes cudaMalloc'd at once
//                           (Device::reserved_peak_bytes); CPU: the
//                           resident-set high-water mark (VmHWM), restarted
//                           for each repeat, so it counts the binary, the
//                           libraries, the data and the allocator's slack;
//   device_used_peak_bytes  GPU only: NVML's "used" at its highest sample
//                           during the repeat: every process on the GPU, the
//                           CUDA context and libraries' pools included.
// Each figure is null with a reason where it can't be had.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"

namespace mpb {

// Restarts the process's resident-set high-water mark at its current RSS
// (writes "5" to /proc/self/clear_refs). false, with *why, where it can't.
bool reset_resident_peak(std::string* why, const std::string& clear_refs = "/proc/self/clear_refs");

// VmHWM of /proc/self/status, in bytes; nullopt, with *why, where unreadable.
std::optional<uint64_t> resident_peak_bytes(std::string* why, const std::string& status = "/proc/self/status");

struct MemoryTripleInputs {
  uint64_t allocator_peak_bytes = 0;
  std::optional<uint64_t> process_peak_bytes;
  std::string process_source;  // "cudaMalloc" | "rss_high_water_mark"
  std::string process_why;     // when process_peak_bytes is missing, or a caveat (peak not restarted)
  std::optional<uint64_t> device_used_peak_bytes;
  std::string device_used_why;  // when device_used_peak_bytes is missing
};

// A repeat's "memory" object: {"allocator_peak_bytes", "process_peak_bytes",
// "process_peak_source", "process_peak_why", "device_used_peak_bytes",
// "device_used_why"} (the whys null when their figure is there).
nlohmann::json memory_triple_json(const MemoryTripleInputs& in);

// The triple of one repeat that ran on `dev` (made for this repeat alone):
// the tracker's peak (`tracked`: the RunRecord's snapshot), the device's reservations (CUDA) or the RSS peak read
// now (CPU; `rss_caveat` from reset_resident_peak when it failed), and
// NVML's peak from the repeat's gpu_telemetry summary (`telemetry_why` when
// there was none).
nlohmann::json repeat_memory_json(const Device& dev, const MemorySnapshot& tracked, const nlohmann::json& gpu_telemetry,
                                  const std::string& telemetry_why, const std::string& rss_caveat);

// summary.memory of a cell: each figure's largest value over the repeats
// (null when no repeat has it), the source, and the first reason given.
// Repeats written before the triple existed are skipped.
nlohmann::json summarize_memory_triples(const std::vector<nlohmann::json>& repeats);

}  // namespace mpb
