// Environment variables that change what a measurement measures without
// any change to the code or the experiment file: NVIDIA_TF32_OVERRIDE=0
// turns TF32 GEMMs into fp32 ones, CUDA_LAUNCH_BLOCKING=1 adds a
// synchronisation to every kernel, ONEDNN_MAX_CPU_ISA picks slower CPU
// kernels, OMP_NUM_THREADS changes the CPU thread count. The manifest records
// the ones set (always, on every build, so that an empty list says "none of
// these were set", not "not looked at"); `runner doctor` warns about them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mpb {

// A variable, or every variable starting with a prefix ending in '*', and what it does.
struct OverrideRule {
  std::string pattern;  // "NVIDIA_TF32_OVERRIDE" or "CUBLASLT_*"
  std::string effect;
};
const std::vector<OverrideRule>& override_rules();

struct EnvOverride {
  std::string name, value, effect;
};

// The entries ("NAME=value") of `environment` that match a rule, sorted by name.
std::vector<EnvOverride> find_overrides(const std::vector<std::string>& environment);
// This process's environment (environ), as "NAME=value" entries.
std::vector<std::string> process_environment();

// {"overrides": {NAME: value, ...}, "checked": [pattern, ...]}.
nlohmann::json overrides_json(const std::vector<EnvOverride>& found);

}  // namespace mpb
