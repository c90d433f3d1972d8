// runner/experiment/matrix_checks.h: rules that would not do what their author meant are
// errors at file:line:col before any cell runs (issue 41's config footguns).
#include <gtest/gtest.h>

#include "tests/runner/config_test_helpers.h"

namespace mpb {
namespace {

using config_test::expect_error;
using config_test::load;

TEST(MatrixChecks, ABareHalfDtypeBesideAutocastIsASlip) {
  // The case: bf16 (pure bf16) where amp_bf16 was meant, beside amp_fp16.
  expect_error("name: x\nmatrix:\n  precision: [fp32, bf16, amp_fp16]\n", 3, 21, "matrix.precision[1]",
               "'bf16' is pure bf16");
  expect_error("name: x\nmatrix:\n  precision: [fp32, bf16, amp_fp16]\n", 3, 21, "matrix.precision[1]",
               "most likely meant as amp_bf16");
  expect_error("name: x\nmatrix:\n  precision: [amp_bf16, half]\n", 3, 25, "matrix.precision[1]",
               "meant as amp_fp16");
  expect_error("name: x\nmatrix:\n  precision: [fp8, float16]\n", 3, 20, "matrix.precision[1]", "autocast");
}

TEST(MatrixChecks, PureHalfAloneOrSpeltAsAPolicyIsFine) {
  EXPECT_EQ(load("name: x\nmatrix:\n  precision: [fp32, bf16, fp16]\n").cells.size(), 3u);  // no autocast beside
  EXPECT_EQ(load("name: x\nmatrix:\n  precision: [O2, O3, fp16]\n").cells.size(), 3u);    // apex: half params
  EXPECT_EQ(load("name: x\nmatrix:\n  precision: [amp_fp16, 'params=bfloat16,compute=bfloat16']\n").cells.size(),
            2u);  // the way to ask for pure bf16 next to autocast
}

TEST(MatrixChecks, AnExcludeThatMatchesNoCellIsAnError) {
  const std::string yaml =
      "name: x\nmatrix:\n  precision: [fp32, amp_fp16]\n  fusion: [off, on]\nexclude:\n"
      "  - {precision: fp32, fusion: on}\n  - {precision: amp_bf16, fusion: off}\n";
  expect_error(yaml, 7, 5, "exclude[1]", "matches none of the matrix's 4 cells");
  expect_error(yaml, 7, 5, "exclude[1]", "precision is never amp_bf16 (its values: amp_fp16, fp32)");
  // A key the matrix does not vary: its one value, from the base.
  expect_error("name: x\nbatch_size: 8\nmatrix:\n  precision: [fp32, amp_fp16]\nexclude:\n  - {batch_size: 16}\n", 6, 5,
               "exclude[0]", "batch_size is never 16 (its values: 8)");
}

TEST(MatrixChecks, ExcludesThatMatchStillWork) {
  const auto e = load("name: x\nmatrix:\n  precision: [fp32, amp_fp16]\n  fusion: [off, on]\n"
                      "exclude:\n  - {precision: fp32, fusion: on}\n  - {fusion: on, precision: amp_fp16}\n");
  EXPECT_EQ(e.cells.size(), 2u);
}

}  // namespace
}  // namespace mpb
