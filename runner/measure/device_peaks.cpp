#include "runner/measure/device_peaks.h"

#include <cctype>
#include <vector>

namespace mpb {

std::optional<double> DevicePeaks::tflops(GemmCompute mode) const {
  switch (mode) {
    case GemmCompute::F32: return fp32;
    case GemmCompute::TF32: return tf32;
    case GemmCompute::F16: return fp16;
    case GemmCompute::BF16: return bf16;
  }
  return std::nullopt;
}

namespace {

struct Row {
  std::string key;                   // --assume-gpu's name for the row
  std::vector<std::string> all_of;   // every one must be in the name
  std::vector<std::string> none_of;  // none may be
  DevicePeaks peaks;
};

// Each row: fp32, tf32, fp16, bf16 dense TFLOP/s, then memory bandwidth in TB/s
// (A100: the 80 GB part's 2.0; the 40 GB part has 1.56).
// Order matters: the first row whose words match wins ("L40S" before "L4",
// "A100" before "A10", "H100 PCIe" before "H100").
const std::vector<Row>& rows() {
  static const std::string hopper = "NVIDIA H100/H200 datasheets (dense, boost clock)";
  static const std::string ampere = "NVIDIA A100/A10 datasheets, GA102 whitepaper (dense, fp32 accumulate)";
  static const std::string ada = "NVIDIA L4/L40S datasheets, AD102 whitepaper (dense, fp32 accumulate)";
  static const std::string older = "NVIDIA V100/T4 datasheets (dense)";
  static const std::vector<Row> table = {
      {"h100-pcie", {"H100", "PCIe"}, {}, {"H100 PCIe", hopper, 51.2, 378.0, 756.0, 756.0, 2.0}},
      {"h100", {"H100"}, {"NVL"}, {"H100 SXM", hopper, 66.9, 494.7, 989.4, 989.4, 3.35}},
      {"h200", {"H200"}, {"NVL"}, {"H200 SXM", hopper, 66.9, 494.7, 989.4, 989.4, 4.8}},
      {"a100", {"A100"}, {}, {"A100", ampere, 19.5, 156.0, 312.0, 312.0, 2.0}},
      {"a10", {"A10"}, {"A100", "A10G"}, {"A10", ampere, 31.2, 62.5, 125.0, 125.0, 0.6}},
      {"rtx3090", {"RTX 3090"}, {"Ti"}, {"GeForce RTX 3090", ampere, 35.6, 35.6, 71.0, 71.0, 0.936}},
      {"l40s", {"L40S"}, {}, {"L40S", ada, 91.6, 183.0, 362.0, 362.0, 0.864}},
      {"l4", {"L4"}, {"L40"}, {"L4", ada, 30.3, 60.0, 121.0, 121.0, 0.3}},
      {"rtx4090", {"RTX 4090"}, {}, {"GeForce RTX 4090", ada, 82.6, 82.6, 165.2, 165.2, 1.008}},
      {"v100", {"V100"}, {}, {"V100", older, 15.7, std::nullopt, 125.0, std::nullopt, 0.9}},
      {"t4", {"T4"}, {}, {"T4", older, 8.1, std::nullopt, 65.0, std::nullopt, 0.32}},
  };
  return table;
}

bool has_word(const std::string& name, const std::string& word) {
  // "T4" must not match inside "RTX 4090" or "GTX 1080 Ti 4": a match is
  // bounded by the start/end of the name, a space, '-' or '_'.
  for (size_t at = name.find(word); at != std::string::npos; at = name.find(word, at + 1)) {
    const bool left = at == 0 || name[at - 1] == ' ' || name[at - 1] == '-' || name[at - 1] == '_';
    const size_t end = at + word.size();
    const bool right = end == name.size() || name[end] == ' ' || name[end] == '-' || name[end] == '_';
    if (left && right) return true;
  }
  return false;
}

// A name without case, blanks, '-' or '_': "RTX 3090" -> "rtx3090".
std::string squeeze(const std::string& name) {
  std::string out;
  for (const char c : name)
    if (c != ' ' && c != '-' && c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<DevicePeaks> gpu_peaks_by_name(const std::string& name) {
  for (const Row& r : rows())
    if (squeeze(r.key) == squeeze(name)) return r.peaks;
  return std::nullopt;
}

std::vector<std::string> known_gpu_names() {
  std::vector<std::string> out;
  for (const Row& r : rows()) out.push_back(r.key);
  return out;
}

std::optional<DevicePeaks> known_gpu_peaks(const std::string& device_name) {
  for (const Row& r : rows()) {
    bool ok = true;
    for (const std::string& w : r.all_of) ok = ok && has_word(device_name, w);
    for (const std::string& w : r.none_of) ok = ok && !has_word(device_name, w);
    if (ok) return r.peaks;
  }
  return std::nullopt;
}

}  // namespace mpb
