# Warnings for host and CUDA code; MPB_WERROR makes them errors (CI sets it).
# No fast-math anywhere: the numerics are bit-exact by design.
function(mpb_set_warnings target)
  set(host_warnings -Wall -Wextra -Wpedantic -Wshadow -Wno-unknown-pragmas)
  set(cuda_host_warnings -Wall,-Wextra,-Wno-unknown-pragmas)
  if(MPB_WERROR)
    list(APPEND host_warnings -Werror)
    set(cuda_host_warnings "${cuda_host_warnings},-Werror")
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${host_warnings}>)
  if(MPB_HAVE_CUDA)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${cuda_host_warnings}>
      $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>)
  endif()
  # errno from sqrtf/expf is never read; without this GCC can't vectorise
  # loops that call them. Results are unchanged (this is not fast-math).
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fno-math-errno>)
  # No implicit FMA contraction on either side (GCC contracts by default in
  # C++, nvcc with --fmad=true): the shared scalar cores then round the same
  # way on the CPU and the GPU, and write fmaf() where they want a fused op.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>)
  if(MPB_HAVE_CUDA)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>)
  endif()
endfunction()
