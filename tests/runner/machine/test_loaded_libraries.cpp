// runner/machine/loaded_libraries.h: the CUDA libraries' paths in /proc/<pid>/maps
// text (manifest.libraries.loaded), the same rules as
// bench/torch_library_env.py's mapped_libraries (tests/scripts/test_torch_library_env.py).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "runner/machine/loaded_libraries.h"

namespace mpb {
namespace {

// A runner that loaded PyTorch's wheel's cuDNN and the toolkit's cuBLASLt.
const char* kMaps =
    "55d0c0a00000-55d0c0a28000 r--p 00000000 08:01 131 /bundle/bin/runner\n"
    "7f1a00000000-7f1a00200000 r--p 00000000 08:01 901 /venv/site-packages/nvidia/cudnn/lib/libcudnn.so.9\n"
    "7f1a00200000-7f1a00400000 r-xp 00200000 08:01 901 /venv/site-packages/nvidia/cudnn/lib/libcudnn.so.9\n"
    "7f1a10000000-7f1a12000000 r-xp 00000000 08:01 902 /venv/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9\n"
    "7f1a20000000-7f1a30000000 r-xp 00000000 08:01 903 /usr/local/cuda-13.0/lib64/libcublasLt.so.13.1.0.3\n"
    "7f1a30000000-7f1a30100000 r-xp 00000000 08:01 904 /usr/local/cuda-13.0/lib64/libcublas.so.13 (deleted)\n"
    "7f1a40000000-7f1a40100000 r-xp 00000000 08:01 905 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7f1a50000000-7f1a50021000 rw-p 00000000 00:00 0 \n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
    "7f1a60000000-7f1a60100000 r-xp 00000000 08:01 906 /opt/my libs/libcudart.so.13\n"
    "7f1a70000000-7f1a70100000 r-xp 00000000 08:01 907 /opt/libcudnn_dir/libfoo.so\n";

TEST(LoadedLibraries, NamesEachCudaLibraryOnce) {
  const std::vector<std::string> want{
      "/opt/my libs/libcudart.so.13",
      "/usr/local/cuda-13.0/lib64/libcublas.so.13 (deleted)",
      "/usr/local/cuda-13.0/lib64/libcublasLt.so.13.1.0.3",
      "/venv/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
      "/venv/site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9",
  };
  EXPECT_EQ(mapped_library_paths(kMaps, cuda_library_prefixes()), want);
  EXPECT_TRUE(mapped_library_paths("", cuda_library_prefixes()).empty());
}

TEST(LoadedLibraries, ThisProcessMapsLibcNotCudnn) {
  // A live /proc/self/maps parses: this test binary maps the C library.
  std::ifstream in("/proc/self/maps");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(mapped_library_paths(text.str(), {"libc.so", "libc-"}).empty());
}

}  // namespace
}  // namespace mpb
