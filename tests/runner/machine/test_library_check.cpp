// runner/machine/library_check.h: the header-vs-runtime JSON and warnings the manifest
// and doctor record, from planted versions (a GPU machine's PyTorch-wheel
// cuDNN older than the headers, another major, nothing loaded), and this
// build's own answer, which must not fail on a machine without a GPU.
#include <gtest/gtest.h>

#include "runner/machine/library_check.h"

namespace mpb {
namespace {

CudaLibraryVersions planted(LibraryVersion cudnn_runtime) {
  CudaLibraryVersions v;
  v.cuda_runtime = {{13, 0, 0}, LibraryVersion{13, 0, 0}, ""};
  v.cuda_driver = LibraryVersion{13, 0, 0};
  v.cublaslt = {{13, 1, 0}, LibraryVersion{13, 1, 0}, ""};
  v.cudnn = HeaderRuntimeVersion{{9, 19, 0}, cudnn_runtime, ""};
  return v;
}

TEST(LibraryCheck, MatchingLibrariesAreQuiet) {
  const CudaLibraryCheck c = check_library_versions(planted({9, 19, 0}));
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_TRUE(c.errors.empty());
  EXPECT_EQ(c.versions["cudnn"]["header"], "9.19.0");
  EXPECT_EQ(c.versions["cudnn"]["runtime"], "9.19.0");
  EXPECT_EQ(c.versions["cudnn"]["status"], "ok");
  EXPECT_EQ(c.versions["cublasLt"]["header"], "13.1.0");
  EXPECT_EQ(c.versions["cuda_driver"]["runtime"], "13.0.0");
}

TEST(LibraryCheck, OlderCudnnRuntimeWarnsAnotherMajorIsAnError) {
  const CudaLibraryCheck older = check_library_versions(planted({9, 1, 0}));  // torch's wheel, say
  ASSERT_EQ(older.warnings.size(), 1u);
  EXPECT_NE(older.warnings[0].find("cuDNN: runtime 9.1.0 is older than the headers 9.19.0"), std::string::npos);
  EXPECT_TRUE(older.errors.empty());
  EXPECT_EQ(older.versions["cudnn"]["status"], "runtime_older");

  const CudaLibraryCheck major = check_library_versions(planted({8, 9, 7}));
  ASSERT_EQ(major.errors.size(), 1u);
  EXPECT_NE(major.errors[0].find("cuDNN: runtime 8.9.7 has another major version"), std::string::npos);
  EXPECT_EQ(major.versions["cudnn"]["status"], "major_differs");
}

TEST(LibraryCheck, NothingLoadedIsSaidNotFailed) {
  CudaLibraryVersions v = planted({9, 19, 0});
  v.cudnn->runtime.reset();
  v.cudnn->not_loaded_reason = "cudnnGetVersion returned 0";
  v.cuda_driver.reset();
  v.cuda_driver_problem = "no driver installed";
  const CudaLibraryCheck c = check_library_versions(v);
  EXPECT_EQ(c.versions["cudnn"]["runtime"], "not loaded");
  EXPECT_EQ(c.versions["cudnn"]["status"], "not_loaded");
  EXPECT_EQ(c.versions["cudnn"]["why"], "cudnnGetVersion returned 0");
  EXPECT_EQ(c.versions["cuda_driver"]["runtime"], "not loaded");
  EXPECT_EQ(c.versions["cuda_driver"]["why"], "no driver installed");
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_TRUE(c.errors.empty());

  v.cudnn.reset();  // a build without cuDNN
  EXPECT_EQ(check_library_versions(v).versions["cudnn"]["why"], "built without cuDNN");
}

TEST(LibraryCheck, DriverOlderThanRuntime) {
  CudaLibraryVersions v = planted({9, 19, 0});
  v.cuda_driver = LibraryVersion{12, 8, 0};  // a driver < 580 under CUDA 13 binaries
  const CudaLibraryCheck c = check_library_versions(v);
  ASSERT_EQ(c.errors.size(), 1u);
  EXPECT_NE(c.errors[0].find("CUDA driver: supports CUDA 12.8.0, older than the runtime 13.0.0"), std::string::npos);
  v.cuda_driver = LibraryVersion{13, 0, 0};
  v.cuda_runtime.runtime = LibraryVersion{13, 1, 0};  // minor-version compatibility
  const CudaLibraryCheck minor = check_library_versions(v);
  EXPECT_TRUE(minor.errors.empty());
  EXPECT_EQ(minor.warnings.size(), 1u);
}

TEST(LibraryCheck, ThisBuildAnswersWithoutAGpu) {
  // No GPU on the CI machine: every entry is either a version or "not loaded",
  // never a throw or an empty string.
  const CudaLibraryCheck c = cuda_library_check();
  for (const char* k : {"cuda_runtime", "cuda_driver", "cublasLt", "cudnn"}) {
    ASSERT_TRUE(c.versions.contains(k)) << k;
    const std::string runtime = c.versions[k]["runtime"].get<std::string>();
    EXPECT_FALSE(runtime.empty()) << k;
  }
#ifndef MPB_HAVE_CUDA
  EXPECT_EQ(c.versions["cudnn"]["why"], "built without CUDA");
#endif
}

}  // namespace
}  // namespace mpb
