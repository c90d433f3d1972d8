// runner/experiment/environment_overrides.h: which environment variables count as
// overrides of GEMM math or timing, and how the manifest records them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "runner/experiment/environment_overrides.h"

namespace mpb {
namespace {

TEST(EnvironmentOverrides, FindsExactNamesAndPrefixes) {
  const std::vector<std::string> env = {
      "PATH=/usr/bin",       "CUBLASLT_LOG_LEVEL=5", "NVIDIA_TF32_OVERRIDE=0", "CUDA_HOME=/usr/local/cuda",
      "CUBLAS_WORKSPACE_CONFIG=:4096:8", "MALFORMED", "=nameless", "OMP_NUM_THREADS=1", "ONEDNN_MAX_CPU_ISA=AVX2",
      "CUDA_LAUNCH_BLOCKING=1"};
  const auto found = find_overrides(env);
  std::vector<std::string> names;
  for (const auto& e : found) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"CUBLASLT_LOG_LEVEL", "CUBLAS_WORKSPACE_CONFIG", "CUDA_LAUNCH_BLOCKING",
                                             "NVIDIA_TF32_OVERRIDE", "OMP_NUM_THREADS", "ONEDNN_MAX_CPU_ISA"}));
  // The exact rule wins over the CUBLAS_* prefix.
  EXPECT_NE(found[1].effect.find("workspace"), std::string::npos) << found[1].effect;
  EXPECT_EQ(found[3].value, "0");
  EXPECT_NE(found[3].effect.find("TF32"), std::string::npos);
}

TEST(EnvironmentOverrides, NoneSetIsAnEmptyObjectWithWhatWasChecked) {
  const nlohmann::json j = overrides_json(find_overrides({"PATH=/usr/bin", "HOME=/root"}));
  EXPECT_TRUE(j["overrides"].is_object());
  EXPECT_TRUE(j["overrides"].empty());
  ASSERT_TRUE(j["checked"].is_array());
  EXPECT_EQ(j["checked"].size(), override_rules().size());
  EXPECT_NE(std::find(j["checked"].begin(), j["checked"].end(), "NVIDIA_TF32_OVERRIDE"), j["checked"].end());
}

TEST(EnvironmentOverrides, RecordsValuesByName) {
  const nlohmann::json j = overrides_json(find_overrides({"NVIDIA_TF32_OVERRIDE=0", "CUDNN_LOGINFO_DBG=1"}));
  EXPECT_EQ(j["overrides"], (nlohmann::json{{"CUDNN_LOGINFO_DBG", "1"}, {"NVIDIA_TF32_OVERRIDE", "0"}}));
}

TEST(EnvironmentOverrides, ReadsThisProcessEnvironment) {
  ASSERT_EQ(setenv("MPB_CUDA_DEBUG_SYNC", "1", 1), 0);
  const auto found = find_overrides(process_environment());
  unsetenv("MPB_CUDA_DEBUG_SYNC");
  EXPECT_TRUE(std::any_of(found.begin(), found.end(), [](const EnvOverride& e) {
    return e.name == "MPB_CUDA_DEBUG_SYNC" && e.value == "1";
  }));
}

}  // namespace
}  // namespace mpb
