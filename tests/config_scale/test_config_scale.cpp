// Loading generated experiment files as large as the limits allow (issue 13,
// D7). These are not timed tests: a timing assertion fails on a busy machine.
// Instead the inputs are made big enough that a quadratic loop in the loader
// takes minutes on them, and CTest's TIMEOUT on this executable (60 s, in
// tests/CMakeLists.txt) is the guard; the linear loader takes about a second
// for all of them together on a busy 2-core machine.
//
// What the earlier, quadratic loader took (one 2-core machine, busy with
// other builds): 40,000 top-level keys 11-68 s and 60,000 keys 55-110 s
// (entries()' scan of the earlier keys); an inject_nonfinite list of 150,000
// steps 17 s. The key test below has ~160,000 keys: minutes for that loop.
#include <gtest/gtest.h>

#include <string>

#include "runner/experiment/config.h"
#include "runner/experiment/config_limits.h"
#include "tests/runner/config_test_helpers.h"

namespace mpb {
namespace {

using namespace config_test;

// A distinct short key per i (base 36), so that many fit in the 1 MiB limit.
std::string short_key(size_t i) {
  const char* digits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string out = "k";
  do {
    out += digits[i % 36];
    i /= 36;
  } while (i > 0);
  return out;
}

TEST(ConfigScale, DuplicateKeyAfterOneHundredSixtyThousandKeys) {
  // Keys without values ("k1a:"), then the first key again: the duplicate check
  // reads every key before any key is validated.
  std::string yaml = "name: x\n";
  size_t keys = 0;
  while (yaml.size() + 16 < kMaxFileBytes) yaml += short_key(keys++) + ":\n";
  ASSERT_GT(keys, 150000u);
  yaml += short_key(0) + ":\n";
  const int last_line = static_cast<int>(keys) + 2;
  expect_error(yaml, last_line, 1, short_key(0), "duplicate key (first given at line 2)");
}

TEST(ConfigScale, AxisOfFortyThousandValuesIsRefusedByTheCap) {
  std::string values;
  for (int i = 0; i < 40000; ++i) values += (i ? "," : "") + std::to_string(i);
  expect_error("name: x\nmatrix:\n  seed: [" + values + "]\n", 3, 9, "matrix.seed",
               "the axis has 40000 values; at most 10000");
}

TEST(ConfigScale, DuplicateValueAtTheEndOfAnAxisAtTheCap) {
  std::string values;
  for (size_t i = 0; i + 1 < kMaxAxisValues; ++i) values += std::to_string(i) + ",";
  values += "0";
  const ConfigError e = error_of("name: x\nmatrix:\n  seed: [" + values + "]\n");
  EXPECT_EQ(e.key(), "matrix.seed[9999]") << e.what();
  EXPECT_NE(e.message().find("duplicate value '0' (same as matrix.seed[0])"), std::string::npos) << e.what();
}

TEST(ConfigScale, TenThousandCellsLoad) {
  std::string values;
  for (size_t i = 0; i < kMaxAxisValues; ++i) values += (i ? "," : "") + std::to_string(i);
  EXPECT_EQ(load("name: x\nmatrix:\n  seed: [" + values + "]\n").cells.size(), kMaxCells);
}

TEST(ConfigScale, InjectNonfiniteListAsLongAsTheFileAllows) {
  // "1,2,3,...": ~140,000 distinct steps, then step 1 again.
  std::string list;
  int n = 0;
  while (list.size() + 64 < kMaxFileBytes) list += std::to_string(++n) + ",";
  list += "1";
  ASSERT_GT(n, 130000);
  const std::string yaml = "name: x\nsteps: 1000000\ninject_nonfinite: [" + list + "]\n";
  const ConfigError e = error_of(yaml);
  EXPECT_EQ(e.key(), "inject_nonfinite[" + std::to_string(n) + "]") << e.what();
  EXPECT_NE(e.message().find("step 1 is listed twice (same as inject_nonfinite[0])"), std::string::npos)
      << e.what();
}

TEST(ConfigScale, TenThousandExcludesOverTenThousandCells) {
  // A generated exclude list that drops all but one of 100 x 100 cells.
  std::string axis;
  for (int i = 0; i < 100; ++i) axis += (i ? "," : "") + std::to_string(i);
  std::string yaml = "name: x\nmatrix:\n  seed: [" + axis + "]\n  model.width: [" + axis.substr(2) + ",100]\nexclude:\n";
  int entries = 0;
  for (int s = 0; s < 100; ++s)
    for (int w = 1; w <= 100; ++w)
      if (!(s == 42 && w == 7)) {
        yaml += "  - {seed: " + std::to_string(s) + ", model.width: " + std::to_string(w) + "}\n";
        ++entries;
      }
  ASSERT_EQ(entries, 9999);
  const ExperimentConfig e = load(yaml);
  ASSERT_EQ(e.cells.size(), 1u);
  EXPECT_EQ(e.cells[0].id, "seed=42,model.width=7");
}

}  // namespace
}  // namespace mpb
