// runner --find-max-batch (runner/commands/find_max_batch.h): the search finds the
// exact largest fitting batch in multiples of the accumulation, from above
// or below the configured batch, with logarithmically many trials; and the
// CPU mode answers from the estimate without writing anything.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "runner/commands/find_max_batch.h"
#include "tests/runner/config_test_helpers.h"

namespace mpb {
namespace {

using namespace config_test;

TEST(FindMaxBatch, FindsTheLargestFittingMultipleOfTheAccumulation) {
  for (const int limit : {1, 7, 32, 33, 1000, 4096, 70001}) {
    for (const int configured : {1, 32, 256, 100000}) {
      for (const int accumulation : {1, 4}) {
        std::set<int> asked;
        const MaxBatch m = search_max_batch(configured, accumulation, [&](int b) {
          EXPECT_EQ(b % accumulation, 0) << b;
          asked.insert(b);
          return b <= limit;
        });
        EXPECT_EQ(m.largest, limit / accumulation * accumulation)
            << "limit " << limit << " configured " << configured << " accumulation " << accumulation;
        EXPECT_FALSE(m.capped);
        EXPECT_LE(m.trials, 2 * 21) << "doubling then bisection: about 2 log2(limit) trials";
        EXPECT_EQ(size_t(m.trials), asked.size()) << "no batch is tried twice";
      }
    }
  }
}

TEST(FindMaxBatch, NothingFitsAndEverythingFits) {
  const MaxBatch none = search_max_batch(64, 1, [](int) { return false; });
  EXPECT_EQ(none.largest, 0);
  const MaxBatch all = search_max_batch(64, 1, [](int) { return true; });
  EXPECT_EQ(all.largest, kMaxBatchSearched);
  EXPECT_TRUE(all.capped);
}

TEST(FindMaxBatch, CpuModeAnswersFromTheEstimateAndWritesNothing) {
  const ExperimentConfig e = load("name: fmb\ndevice: cpu\nbatch_size: 64\nmodel: {kind: mlp, width: 64}\n");
  RunOptions opt;
  opt.quiet = true;
  opt.out_dir = ::testing::TempDir() + "mpb_find_max_batch";
  std::filesystem::remove_all(opt.out_dir);
  ::testing::internal::CaptureStdout();
  const int rc = run_find_max_batch(e, opt);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, kExitOk);
  EXPECT_NE(out.find("by the memory estimate alone"), std::string::npos) << out;
  EXPECT_NE(out.find("base"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(opt.out_dir));
  opt.filter = "precision=nope";
  EXPECT_EQ(run_find_max_batch(e, opt), kExitBadInput);
}

}  // namespace
}  // namespace mpb
