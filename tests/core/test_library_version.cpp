// core/library_version.h: the decode of cuDNN / cuBLAS / CUDA version integers
// (the encodings in cudnn_version.h, cublas_api.h, cuda_runtime_api.h) and the
// header-vs-runtime rule doctor and the manifest apply.
#include <gtest/gtest.h>

#include "core/library_version.h"

namespace mpb {
namespace {

LibraryVersion v(int major, int minor, int patch) { return LibraryVersion{major, minor, patch}; }

TEST(LibraryVersion, DecodesCudnn9AndCudnn8Forms) {
  // cudnn_version.h of the CUDA 13 toolkit here: 9 * 10000 + 19 * 100 + 0.
  EXPECT_EQ(decode_cudnn_version(91900).value().str(), "9.19.0");
  EXPECT_EQ(decode_cudnn_version(90100).value().str(), "9.1.0");   // the CUDA 12.4 cache's cudnn_version.h
  EXPECT_EQ(decode_cudnn_version(90000).value().str(), "9.0.0");   // the first value of the new form
  EXPECT_EQ(decode_cudnn_version(90501).value().str(), "9.5.1");
  EXPECT_EQ(decode_cudnn_version(100203).value().str(), "10.2.3");
  // cuDNN 8: major * 1000 + minor * 100 + patch.
  EXPECT_EQ(decode_cudnn_version(8907).value().str(), "8.9.7");
  EXPECT_EQ(decode_cudnn_version(8100).value().str(), "8.1.0");
  EXPECT_FALSE(decode_cudnn_version(0).has_value());
}

TEST(LibraryVersion, DecodesCublasAndCuda) {
  EXPECT_EQ(decode_cublas_version(130100).value().str(), "13.1.0");  // cublas_api.h, CUDA 13.0
  EXPECT_EQ(decode_cublas_version(120402).value().str(), "12.4.2");
  EXPECT_EQ(decode_cublas_version(11201).value().str(), "11.2.1");   // CUDA 11's major * 1000 form
  EXPECT_FALSE(decode_cublas_version(0).has_value());
  EXPECT_EQ(decode_cuda_version(13000).value().str(), "13.0.0");
  EXPECT_EQ(decode_cuda_version(12040).value().str(), "12.4.0");
  EXPECT_EQ(decode_cuda_version(12090).value().str(), "12.9.0");
  EXPECT_FALSE(decode_cuda_version(0).has_value());  // cudaDriverGetVersion without a driver
}

TEST(LibraryVersion, OrdersByMajorMinorPatch) {
  EXPECT_TRUE(v(9, 1, 0) < v(9, 19, 0));  // numeric, not "9.1" < "9.19" as text by accident
  EXPECT_TRUE(v(9, 2, 0) < v(9, 19, 0));  // as text "9.2" > "9.19"
  EXPECT_TRUE(v(9, 19, 0) < v(9, 19, 1));
  EXPECT_FALSE(v(9, 19, 0) < v(9, 19, 0));
  EXPECT_TRUE(v(8, 99, 99) < v(9, 0, 0));
}

TEST(LibraryVersion, RuntimeOlderThanHeadersWarnsAnotherMajorIsAnError) {
  const LibraryVersion header = v(9, 19, 0);
  EXPECT_EQ(compare_header_runtime(header, v(9, 19, 0)), VersionMatch::Same);
  EXPECT_EQ(compare_header_runtime(header, v(9, 20, 1)), VersionMatch::Same);   // newer minor: the ABI promise
  EXPECT_EQ(compare_header_runtime(header, v(9, 2, 0)), VersionMatch::RuntimeOlder);
  EXPECT_EQ(compare_header_runtime(v(9, 19, 1), v(9, 19, 0)), VersionMatch::RuntimeOlder);  // older patch
  EXPECT_EQ(compare_header_runtime(header, v(8, 9, 7)), VersionMatch::MajorDiffers);
  EXPECT_EQ(compare_header_runtime(header, v(10, 0, 0)), VersionMatch::MajorDiffers);  // newer major too
  EXPECT_EQ(compare_header_runtime(header, std::nullopt), VersionMatch::NotLoaded);
  EXPECT_STREQ(version_match_name(VersionMatch::RuntimeOlder), "runtime_older");
}

TEST(LibraryVersion, WarningNamesBothVersionsAndStaysEmptyWhenFine) {
  const LibraryVersion header = v(9, 19, 0);
  const std::string older = version_mismatch_warning("cuDNN", header, v(9, 1, 0));
  EXPECT_NE(older.find("cuDNN: runtime 9.1.0 is older than the headers 9.19.0"), std::string::npos) << older;
  const std::string major = version_mismatch_warning("cuDNN", header, v(8, 9, 7));
  EXPECT_NE(major.find("runtime 8.9.7 has another major version than the headers 9.19.0"), std::string::npos)
      << major;
  EXPECT_EQ(version_mismatch_warning("cuDNN", header, v(9, 19, 2)), "");
  EXPECT_EQ(version_mismatch_warning("cuDNN", header, std::nullopt), "");
}

}  // namespace
}  // namespace mpb
