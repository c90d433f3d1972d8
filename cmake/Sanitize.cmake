# MPB_SANITIZE: AddressSanitizer + UndefinedBehaviorSanitizer on every target
# (scripts/sanitize_test.sh, CI). UB aborts at the first report
# (-fno-sanitize-recover) so that a test fails instead of printing and passing.
# Host code only: CUDA device code is not instrumented, so it requires MPB_CUDA=OFF.
# MPB_FUZZ: the libFuzzer target tests/fuzz/fuzz_config (clang only,
# scripts/fuzz_config.sh); everything else is built with coverage
# instrumentation (-fsanitize=fuzzer-no-link), and it implies MPB_SANITIZE.
if(MPB_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "MPB_FUZZ=ON needs clang (libFuzzer): configure with CMAKE_CXX_COMPILER=clang++")
  endif()
  set(MPB_SANITIZE ON)
endif()
if(MPB_SANITIZE)
  if(MPB_HAVE_CUDA)
    message(FATAL_ERROR "MPB_SANITIZE=ON instruments host code only: configure with MPB_CUDA=OFF")
  endif()
  # -Og (after the build type's -O3, so it wins): instrumented code compiles in a third
  # of -O3's time (GCC 12: -O1 half), and the sanitizer run is about finding bugs, not
  # speed. -g1: line tables only, so that reports name file:line without full debug
  # info's cost.
  set(MPB_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                         -fno-omit-frame-pointer -Og -g1)
  if(MPB_FUZZ)
    list(APPEND MPB_SANITIZE_FLAGS -fsanitize=fuzzer-no-link)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${MPB_SANITIZE_FLAGS}>")
  add_link_options(-fsanitize=address,undefined)
endif()
