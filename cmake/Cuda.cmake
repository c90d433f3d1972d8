# Decides MPB_HAVE_CUDA from MPB_CUDA (AUTO/ON/OFF) and finds cuBLASLt and cuDNN.
set(MPB_HAVE_CUDA OFF)

include(${CMAKE_CURRENT_LIST_DIR}/CudaArchitectures.cmake)  # MPB_CUDA_PTX_ARCHITECTURES, mpb_cuda_build_architectures

set(MPB_HAVE_CUDNN OFF)
if(NOT MPB_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    mpb_cuda_build_architectures()
    set(CMAKE_CUDA_ARCHITECTURES "${MPB_CUDA_BUILD_ARCHITECTURES}")
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # CMake 3.25.0 and 3.25.1 (Debian 12's) FindCUDAToolkit marks CUDA::nvToolsExt deprecated
    # without checking that the target exists, and so fails ("set_property could not find
    # TARGET CUDA::nvToolsExt") with a toolkit that has no libnvToolsExt (CUDA 13). It does
    # that only when the project requires CMake >= 3.25: not for this call.
    set(MPB_SAVED_MINIMUM_REQUIRED_VERSION ${CMAKE_MINIMUM_REQUIRED_VERSION})
    if(CMAKE_VERSION VERSION_LESS 3.26)
      set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_MINIMUM_REQUIRED_VERSION ${MPB_SAVED_MINIMUM_REQUIRED_VERSION})
    set(MPB_HAVE_CUDA ON)
    find_library(MPB_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(MPB_CUDNN_LIBRARY)
      set(MPB_HAVE_CUDNN ON)
    endif()
  elseif(MPB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MPB_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
endif()

# cuDNN's header-only C++ frontend (cudnn_frontend), for fused attention through
# cuDNN's scaled-dot-product-attention graphs (backends/cuda/attention_cudnn.cpp).
# Its headers come from the pinned PyPI wheel nvidia-cudnn-frontend, fetched once
# at configure time into the build tree (build/_deps), never at run time:
#   MPB_CUDNN_FRONTEND=AUTO  fetch it; when that fails (no network, no pip), build
#                            without it: the CUDA backend's fused attention then
#                            runs the hand-written kernel, and says so (a warning
#                            here, "cudnn_frontend: absent" in the device's
#                            versions, attention_impl "cuda_kernel" in every cell)
#   MPB_CUDNN_FRONTEND=ON    the same, but a failure stops the configure
#   MPB_CUDNN_FRONTEND=OFF   never use it
# Offline: MPB_CUDNN_FRONTEND_WHEEL names the wheel file (checked against the
# pinned SHA-256), or MPB_CUDNN_FRONTEND_INCLUDE_DIR a directory holding the
# headers of exactly this version (e.g. a cudnn-frontend 1.32.0 checkout's include/).
set(MPB_HAVE_CUDNN_FRONTEND OFF)
set(MPB_CUDNN_FRONTEND "AUTO" CACHE STRING "Use cuDNN's cudnn_frontend for fused attention: AUTO, ON, OFF")
set_property(CACHE MPB_CUDNN_FRONTEND PROPERTY STRINGS AUTO ON OFF)
set(MPB_CUDNN_FRONTEND_WHEEL "" CACHE FILEPATH "A downloaded nvidia-cudnn-frontend wheel (offline builds)")
set(MPB_CUDNN_FRONTEND_INCLUDE_DIR "" CACHE PATH "cudnn_frontend headers to use instead of the wheel's")
set(MPB_CUDNN_FRONTEND_VERSION "1.32.0")
set(MPB_CUDNN_FRONTEND_WHEEL_NAME
    "nvidia_cudnn_frontend-1.32.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl")
set(MPB_CUDNN_FRONTEND_WHEEL_SHA256 "c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0")

# Sets MPB_CUDNN_FRONTEND_INCLUDE (the directory with cudnn_frontend.h) or, on
# failure, MPB_CUDNN_FRONTEND_ERROR (why).
function(mpb_find_cudnn_frontend)
  set(MPB_CUDNN_FRONTEND_INCLUDE "" PARENT_SCOPE)
  set(deps "${CMAKE_BINARY_DIR}/_deps")
  set(dir "${deps}/cudnn_frontend-${MPB_CUDNN_FRONTEND_VERSION}")
  if(MPB_CUDNN_FRONTEND_INCLUDE_DIR)
    set(inc "${MPB_CUDNN_FRONTEND_INCLUDE_DIR}")
  else()
    set(inc "${dir}/include")
    if(NOT EXISTS "${inc}/cudnn_frontend.h")
      # The wheel is one file for every platform as far as the headers go: pin
      # the x86-64 CPython 3.11 build, so the SHA-256 below names one file.
      set(wheel "${MPB_CUDNN_FRONTEND_WHEEL}")
      if(NOT wheel)
        set(wheel "${deps}/wheels/${MPB_CUDNN_FRONTEND_WHEEL_NAME}")
        if(NOT EXISTS "${wheel}")
          find_program(MPB_PYTHON3 NAMES python3)
          if(NOT MPB_PYTHON3)
            set(MPB_CUDNN_FRONTEND_ERROR "no python3 to run pip download" PARENT_SCOPE)
            return()
          endif()
          message(STATUS "mpbench: downloading nvidia-cudnn-frontend==${MPB_CUDNN_FRONTEND_VERSION} (headers only)")
          execute_process(
            COMMAND "${MPB_PYTHON3}" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check
                    --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311
                    -d "${deps}/wheels" "nvidia-cudnn-frontend==${MPB_CUDNN_FRONTEND_VERSION}"
            RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 600)
          if(NOT rc EQUAL 0 OR NOT EXISTS "${wheel}")
            string(STRIP "${err}" err)
            set(MPB_CUDNN_FRONTEND_ERROR "pip download failed (${rc}): ${err}" PARENT_SCOPE)
            return()
          endif()
        endif()
      endif()
      file(SHA256 "${wheel}" sha)
      if(NOT sha STREQUAL MPB_CUDNN_FRONTEND_WHEEL_SHA256)
        set(MPB_CUDNN_FRONTEND_ERROR "${wheel} has SHA-256 ${sha}, expected ${MPB_CUDNN_FRONTEND_WHEEL_SHA256}"
            PARENT_SCOPE)
        return()
      endif()
      file(REMOVE_RECURSE "${dir}.tmp")
      file(ARCHIVE_EXTRACT INPUT "${wheel}" DESTINATION "${dir}.tmp" PATTERNS "include/*")
      if(NOT EXISTS "${dir}.tmp/include/cudnn_frontend.h")
        set(MPB_CUDNN_FRONTEND_ERROR "${wheel} has no include/cudnn_frontend.h" PARENT_SCOPE)
        return()
      endif()
      file(REMOVE_RECURSE "${dir}")
      file(RENAME "${dir}.tmp" "${dir}")
    endif()
  endif()
  if(NOT EXISTS "${inc}/cudnn_frontend.h" OR NOT EXISTS "${inc}/cudnn_frontend_version.h")
    set(MPB_CUDNN_FRONTEND_ERROR "${inc} has no cudnn_frontend.h / cudnn_frontend_version.h" PARENT_SCOPE)
    return()
  endif()
  file(STRINGS "${inc}/cudnn_frontend_version.h" defs REGEX "#define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION ")
  set(v "")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX MATCH "CUDNN_FRONTEND_${part}_VERSION ([0-9]+)" m "${defs}")
    list(APPEND v "${CMAKE_MATCH_1}")
  endforeach()
  list(JOIN v "." v)
  if(NOT v STREQUAL MPB_CUDNN_FRONTEND_VERSION)
    set(MPB_CUDNN_FRONTEND_ERROR "${inc} is cudnn_frontend ${v}, this build pins ${MPB_CUDNN_FRONTEND_VERSION}"
        PARENT_SCOPE)
    return()
  endif()
  set(MPB_CUDNN_FRONTEND_INCLUDE "${inc}" PARENT_SCOPE)
endfunction()

if(MPB_HAVE_CUDNN AND NOT MPB_CUDNN_FRONTEND STREQUAL "OFF")
  set(MPB_CUDNN_FRONTEND_ERROR "")
  mpb_find_cudnn_frontend()
  if(MPB_CUDNN_FRONTEND_INCLUDE)
    set(MPB_HAVE_CUDNN_FRONTEND ON)
    message(STATUS "mpbench: cudnn_frontend ${MPB_CUDNN_FRONTEND_VERSION} from ${MPB_CUDNN_FRONTEND_INCLUDE}: "
                   "fp16/bf16 fused attention through cuDNN SDPA")
  elseif(MPB_CUDNN_FRONTEND STREQUAL "ON")
    message(FATAL_ERROR "MPB_CUDNN_FRONTEND=ON but cudnn_frontend is unavailable: ${MPB_CUDNN_FRONTEND_ERROR}")
  else()
    message(WARNING "mpbench: cudnn_frontend unavailable (${MPB_CUDNN_FRONTEND_ERROR}); the CUDA backend's fused "
                    "attention will run the hand-written kernel in every dtype (recorded as attention_impl "
                    "cuda_kernel). Set MPB_CUDNN_FRONTEND_WHEEL for an offline build.")
  endif()
elseif(MPB_HAVE_CUDA AND NOT MPB_CUDNN_FRONTEND STREQUAL "OFF")
  if(MPB_CUDNN_FRONTEND STREQUAL "ON")
    message(FATAL_ERROR "MPB_CUDNN_FRONTEND=ON but libcudnn was not found")
  endif()
  message(WARNING "mpbench: no libcudnn: the CUDA backend's fused attention will run the hand-written kernel")
endif()
