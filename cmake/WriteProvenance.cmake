# cmake -DSOURCE_DIR=... -DOUT=... [-DGIT=git] [-DBUILD_TYPE=...] [-DCXX_FLAGS=...] [-DOPTIONS=...]
#       -P WriteProvenance.cmake
# Writes OUT, a header of #defines (MPB_BUILD_GIT_COMMIT, MPB_BUILD_GIT_DIRTY: 1, 0 or -1 when
# unknown, MPB_BUILD_GIT_WHY, MPB_BUILD_TYPE, MPB_BUILD_CXX_FLAGS, MPB_BUILD_OPTIONS). The file is
# rewritten only when its text changes, so an unchanged tree recompiles nothing.
# "Dirty" means tracked files differ from HEAD (git status --porcelain --untracked-files=no):
# an untracked scratch file does not change the binary.
if(NOT SOURCE_DIR OR NOT OUT)
  message(FATAL_ERROR "WriteProvenance.cmake: give -DSOURCE_DIR=... and -DOUT=...")
endif()
if(NOT GIT)
  find_program(GIT git)
endif()

set(commit "unknown")
set(dirty -1)
set(why "")
if(NOT GIT)
  set(why "git not found when building")
else()
  execute_process(COMMAND ${GIT} rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    set(why "not a git checkout when building (${err})")
  else()
    set(commit "${out}")
    execute_process(COMMAND ${GIT} status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      set(why "git status failed when building (${err})")
    elseif(out STREQUAL "")
      set(dirty 0)
    else()
      set(dirty 1)
    endif()
  endif()
endif()

# C string literals: backslashes and quotes escaped.
function(mpb_c_string var value)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  string(STRIP "${value}" value)
  set(${var} "\"${value}\"" PARENT_SCOPE)
endfunction()
mpb_c_string(commit_s "${commit}")
mpb_c_string(why_s "${why}")
mpb_c_string(type_s "${BUILD_TYPE}")
mpb_c_string(flags_s "${CXX_FLAGS}")
mpb_c_string(options_s "${OPTIONS}")

set(text "// Written by cmake/WriteProvenance.cmake at build time; do not edit.
#pragma once
#define MPB_BUILD_GIT_COMMIT ${commit_s}
#define MPB_BUILD_GIT_DIRTY ${dirty}
#define MPB_BUILD_GIT_WHY ${why_s}
#define MPB_BUILD_TYPE ${type_s}
#define MPB_BUILD_CXX_FLAGS ${flags_s}
#define MPB_BUILD_OPTIONS ${options_s}
")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
