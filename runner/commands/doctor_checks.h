// The checks `runner doctor` runs (runner/commands/doctor.h), one function each. The
// machine checks take what was read (not the files), so tests can feed them
// any machine; doctor_system.cpp holds those, doctor_device.cpp the GPU,
// device, GEMM and op checks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "runner/machine/cpu_clocks.h"
#include "runner/commands/doctor.h"
#include "runner/experiment/environment_overrides.h"
#include "runner/machine/machine_load.h"
#include "runner/machine/process_cpu.h"
#include "runner/machine/system_resources.h"
#include "runner/results/terminal_table.h"  // fmt

namespace mpb::doctor {

// ---- machine (doctor_system.cpp) ----
DoctorCheck check_build();
DoctorCheck check_cpu_governor(const CpuClocks& c);
DoctorCheck check_cpu_clock(const CpuClocks& c);
// `w`: the machine's load over the window; `top`: the busiest other processes in it.
DoctorCheck check_machine_load(const LoadWindow& w, const std::vector<ProcessCpu>& top);
// Samples `seconds` of load and the processes that caused it, then check_machine_load.
DoctorCheck sample_machine_load(double seconds);
DoctorCheck check_memory(const MemoryInfo& m);
DoctorCheck check_disk(const DiskSpace& d);
DoctorCheck check_environment(const std::vector<EnvOverride>& found);

// ---- devices (doctor_device.cpp) ----
// What CUDA sees (driver, runtime, libraries, GPUs); how much that matters
// depends on the device asked for: unusable with --device cuda is a blocker,
// with auto a warning, with cpu nothing.
DoctorCheck check_cuda(const std::string& requested);
// The device runs would use (make_device); null, with a FAIL check, when it can't be opened.
std::unique_ptr<Device> open_device(const std::string& requested, DoctorCheck* check);
// One check per GEMM compute mode: its ceiling (GFLOP/s) and native/emulated,
// compared with fp32. n = 0: the size runs use (ceiling_gemm_size).
std::vector<DoctorCheck> check_gemm_ceilings(Device& dev, int n, int reps);
// Op-check cases (opcheck/) on `dev` until `seconds` are spent (at least one
// case; GEMM cases first, then one case per op before the second of any).
DoctorCheck check_selftest(Device& dev, double seconds);
// Whether cells on `dev` will record energy per step (runner/machine/energy_meter.h).
DoctorCheck check_energy(const Device& dev);

}  // namespace mpb::doctor
