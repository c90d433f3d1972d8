// The backend a tests/ops executable is built for: test_ops "cpu",
// test_ops_cuda "cuda" (tests/CMakeLists.txt defines MPB_OPCHECK_BACKEND).
#pragma once

#include <string>

#ifndef MPB_OPCHECK_BACKEND
#error "MPB_OPCHECK_BACKEND names the backend under test (tests/CMakeLists.txt)"
#endif

namespace mpb::opcheck {
inline const std::string kBackend = MPB_OPCHECK_BACKEND;
}  // namespace mpb::opcheck
