# cmake -P tests/cmake/test_cuda_architectures.cmake: the architectures a CUDA build
# compiles for (cmake/CudaArchitectures.cmake), decided from what a fake nvcc's
# --list-gpu-arch prints, as CUDA 12.4, 12.8 and 13.0 print it. No GPU or toolkit needed.
cmake_minimum_required(VERSION 3.25)
# WORK_DIR: where the fake compilers go (CTest passes one in its build tree).
if(NOT DEFINED WORK_DIR)
  set(WORK_DIR "/tmp/mpb-cuda-arch-test")
endif()
set(tmp "${WORK_DIR}")
file(MAKE_DIRECTORY "${tmp}")

# fake_nvcc(NAME "compute_50 compute_52 ..."): a script that prints the list one per line.
function(fake_nvcc name archs)
  string(REPLACE " " "\\n" lines "${archs}")
  file(WRITE "${tmp}/${name}" "#!/bin/sh\n[ \"$1\" = --list-gpu-arch ] || exit 3\nprintf '${lines}\\n'\n")
  file(CHMOD "${tmp}/${name}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
endfunction()
fake_nvcc(nvcc-12.4 "compute_50 compute_52 compute_53 compute_60 compute_61 compute_62 compute_70 compute_72 compute_75 compute_80 compute_86 compute_87 compute_89 compute_90")
fake_nvcc(nvcc-12.8 "compute_50 compute_75 compute_80 compute_86 compute_89 compute_90 compute_100 compute_101 compute_120")
fake_nvcc(nvcc-13.0 "compute_75 compute_80 compute_86 compute_87 compute_88 compute_89 compute_90 compute_100 compute_110 compute_103 compute_120 compute_121")
# Knows compute_1000 and compute_101 but not compute_100: a prefix must not count.
fake_nvcc(nvcc-prefix "compute_90 compute_1000 compute_101 compute_1200")
file(WRITE "${tmp}/nvcc-broken" "#!/bin/sh\nexit 1\n")
file(CHMOD "${tmp}/nvcc-broken" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)

include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/CudaArchitectures.cmake)

function(expect nvcc sass ptx expected)
  set(CMAKE_CUDA_COMPILER "${tmp}/${nvcc}")
  set(MPB_CUDA_ARCHITECTURES "${sass}")
  set(MPB_CUDA_PTX_ARCHITECTURES "${ptx}")
  mpb_cuda_build_architectures()
  if(NOT MPB_CUDA_BUILD_ARCHITECTURES STREQUAL expected)
    message(SEND_ERROR "${nvcc}, SASS '${sass}', PTX '${ptx}': got '${MPB_CUDA_BUILD_ARCHITECTURES}', expected '${expected}'")
  endif()
endfunction()

# The default on CUDA 13 (and 12.8+): Blackwell as PTX only after the four SASS targets.
expect(nvcc-13.0 "80;86;89;90" "100;120" "80;86;89;90;100-virtual;120-virtual")
expect(nvcc-12.8 "80;86;89;90" "100;120" "80;86;89;90;100-virtual;120-virtual")
# CUDA 12.4 has neither: the build goes on without them (a message says so).
expect(nvcc-12.4 "80;86;89;90" "100;120" "80;86;89;90")
expect(nvcc-12.4 "80-real;86-real;90-real" "100;120" "80-real;86-real;90-real")
# compute_1000 / compute_101 are not compute_100.
expect(nvcc-prefix "90" "100;120" "90")
# None asked for: nvcc is not asked either (the broken one would stop the configure).
expect(nvcc-broken "80;86;89;90" "" "80;86;89;90")
message(STATUS "test_cuda_architectures: done")
