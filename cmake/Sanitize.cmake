# MPB_SANITIZE: AddressSanitizer + UndefinedBehaviorSanitizer on every target
# (scripts/sanitize_test.sh, CI). UB aborts at the first report
# (-fno-sanitize-recover) so that a test fails instead of printing and passing.
# Host code only: CUDA device code is not instrumented, so it requires MPB_CUDA=OFF.
if(MPB_SANITIZE)
  if(MPB_HAVE_CUDA)
    message(FATAL_ERROR "MPB_SANITIZE=ON instruments host code only: configure with MPB_CUDA=OFF")
  endif()
  # -O1 (after the build type's -O3, so it wins): instrumented code at -O3 takes twice as
  # long to compile, and the sanitizer run is about finding bugs, not speed. -g1: line
  # tables only, so that reports name file:line without full debug info's cost.
  set(MPB_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
                         -fno-omit-frame-pointer -O1 -g1)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${MPB_SANITIZE_FLAGS}>")
  add_link_options(-fsanitize=address,undefined)
endif()
