// The backend a tests/opcheck executable is built for: test_ops "cpu",
// test_ops_cuda "cuda" (tests/CMakeLists.txt defines MPB_OPCHECK_BACKEND),
// and the fixture of the tests that run on it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "opcheck/opcheck.h"

#ifndef MPB_OPCHECK_BACKEND
#error "MPB_OPCHECK_BACKEND names the backend under test (tests/CMakeLists.txt)"
#endif

namespace mpb::opcheck {
inline const std::string kBackend = MPB_OPCHECK_BACKEND;

// A fixture whose dev_ is a fresh device of the backend under test, or a
// skip that says why there is none here (test_ops_cuda without a GPU).
class BackendUnderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = backend_unavailable(kBackend)) GTEST_SKIP() << *why;
    dev_ = make_backend(kBackend);
  }
  std::unique_ptr<Device> dev_;
};
}  // namespace mpb::opcheck
