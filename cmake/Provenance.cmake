# Build provenance for manifest.json (runner/io/build_info.cpp): the commit, whether
# the tree had uncommitted changes, the build type and the C++ flags, taken at
# *build* time (every build, not only when CMake configures: a commit or an edit
# after configuring would otherwise go unrecorded).
#
# Usage, in CMakeLists.txt after the mpb_runner target exists:
#   include(cmake/Provenance.cmake)
#   mpb_add_provenance(mpb_runner)
# Without it the runner still builds: the manifest then records the configure-time
# MPB_GIT_COMMIT, and "dirty" and the flags as null with the reason.
function(mpb_add_provenance target)
  set(dir ${CMAKE_BINARY_DIR}/provenance)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  add_custom_target(mpb_provenance
    COMMAND ${CMAKE_COMMAND}
            -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
            -DOUT=${dir}/mpb_provenance.h
            -DGIT=${GIT_EXECUTABLE}
            "-DBUILD_TYPE=${CMAKE_BUILD_TYPE}"
            "-DCXX_FLAGS=${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${config}}"
            "-DOPTIONS=MPB_WERROR=${MPB_WERROR} MPB_CUDA=${MPB_CUDA}"
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/WriteProvenance.cmake
    BYPRODUCTS ${dir}/mpb_provenance.h
    COMMENT "Recording the commit and build flags for manifest.json"
    VERBATIM)
  add_dependencies(${target} mpb_provenance)
  target_include_directories(${target} PRIVATE ${dir})
  target_compile_definitions(${target} PRIVATE MPB_HAVE_PROVENANCE=1)
endfunction()
