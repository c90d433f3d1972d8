# The CUDA architectures a build compiles for (included by cmake/Cuda.cmake; its decision
# is tested without a GPU or a toolkit by tests/cmake/test_cuda_architectures.cmake).
# Blackwell (B200: sm_100; RTX 50xx/RTX PRO: sm_120) as PTX only, which the driver
# JIT-compiles on first load: SASS for both would add two more ptxas passes per kernel to
# every CUDA build (docs/TESTING.md has the cost), and no Blackwell GPU is there to prove
# SASS-specific code. nvcc has compute_100/compute_120 from CUDA 12.8 on; an older nvcc
# (CUDA 12.4-12.6) builds without them and says so once here.
set(MPB_CUDA_PTX_ARCHITECTURES "100;120" CACHE STRING
    "CUDA architectures embedded as PTX only (JIT-compiled by the driver); dropped with a message when nvcc predates them")
# MPB_CUDA_BUILD_ARCHITECTURES: MPB_CUDA_ARCHITECTURES (SASS + PTX each), then each
# MPB_CUDA_PTX_ARCHITECTURES entry as "NN-virtual" where this nvcc knows compute_NN.
function(mpb_cuda_build_architectures)
  set(archs "${MPB_CUDA_ARCHITECTURES}")
  if(MPB_CUDA_PTX_ARCHITECTURES)
    execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-arch
                    RESULT_VARIABLE rc OUTPUT_VARIABLE known ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${CMAKE_CUDA_COMPILER} --list-gpu-arch failed (${rc}): ${err}")
    endif()
    set(dropped "")
    foreach(a IN LISTS MPB_CUDA_PTX_ARCHITECTURES)
      if(known MATCHES "compute_${a}([^0-9]|$)")
        list(APPEND archs "${a}-virtual")
      else()
        list(APPEND dropped "compute_${a}")
      endif()
    endforeach()
    if(dropped)
      list(JOIN dropped ", " dropped)
      message(STATUS "mpbench: ${CMAKE_CUDA_COMPILER} has no ${dropped}: no PTX for them in this build "
                     "(CUDA 12.8+ has them; -DMPB_CUDA_PTX_ARCHITECTURES= says none are wanted)")
    endif()
  endif()
  set(MPB_CUDA_BUILD_ARCHITECTURES "${archs}" PARENT_SCOPE)
  message(STATUS "mpbench: CUDA architectures ${archs}")
endfunction()
