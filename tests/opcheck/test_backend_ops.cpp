// One test per op case (opcheck/: every Device op against its float64
// reference) for the backend this executable is built for: test_ops runs the
// CPU backend (label unit), test_ops_cuda the CUDA backend (label gpu; each
// test also compares with the CPU backend, and skips, with the reason, where
// no usable GPU exists). The test names are the cases' op/variant/dtype.
#include <gtest/gtest.h>

#include <cctype>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "opcheck/opcheck.h"
#include "tests/opcheck/backend_under_test.h"


namespace mpb::opcheck {
namespace {

// One fixture for every case; the devices are made once per process.
class BackendOps : public ::testing::Test {
 public:
  explicit BackendOps(size_t index) : index_(index) {}
  static void SetUpTestSuite() {
    if (backend_unavailable(kBackend)) return;
    dev_ = make_backend(kBackend);
    if (kBackend != "cpu") cpu_ = make_backend("cpu");
  }
  static void TearDownTestSuite() {
    dev_.reset();
    cpu_.reset();
  }
  void TestBody() override;

 private:
  size_t index_;
  static std::unique_ptr<Device> dev_, cpu_;
};
std::unique_ptr<Device> BackendOps::dev_, BackendOps::cpu_;

void BackendOps::TestBody() {
  const OpCase& c = op_cases()[index_];
  if (auto why = backend_unavailable(kBackend)) GTEST_SKIP() << *why;
  const OpResult r = run_case(c, *dev_, cpu_.get());
  for (const std::string& n : r.notes) std::cout << "[ INFO     ] " << n << "\n";
  for (const std::string& f : r.failures) ADD_FAILURE() << f;
  std::ostringstream summary;
  summary << c.name() << " on " << r.backend << ": " << status_name(r.status) << ", max |error| vs float64 "
          << r.max_err << " (" << r.worst_ratio << " of the bound: " << r.tolerance << ")";
  if (r.vs_cpu)
    summary << "; vs the CPU: " << (r.bitwise ? "bit for bit" : "max |diff| " + std::to_string(r.cpu_max_diff))
            << (r.bitwise_promised ? " (promised bit for bit)" : "");
  EXPECT_EQ(r.status, Status::Pass) << r.failed << " failed checks; " << summary.str();
  EXPECT_GT(r.checked, 0) << "the case compared nothing with a reference";
  RecordProperty("max_err", std::to_string(r.max_err));
  RecordProperty("worst_ratio", std::to_string(r.worst_ratio));
}

// Test names: the case name with every non-alphanumeric run as one '_',
// numbered on a collision. (Registered as plain tests, not TEST_P, so the
// CTest names carry no "# GetParam()" comment.)
const bool kRegistered = [] {
  std::set<std::string> used;
  for (size_t i = 0; i < op_cases().size(); ++i) {
    std::string s;
    for (char ch : op_cases()[i].name()) {
      if (std::isalnum(static_cast<unsigned char>(ch))) s += ch;
      else if (!s.empty() && s.back() != '_') s += '_';
    }
    while (!s.empty() && s.back() == '_') s.pop_back();
    std::string name = s;
    for (int k = 2; used.count(name); ++k) name = s + "_" + std::to_string(k);
    used.insert(name);
    ::testing::RegisterTest("BackendOps", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [i]() -> BackendOps* { return new BackendOps(i); });
  }
  return true;
}();

}  // namespace
}  // namespace mpb::opcheck
