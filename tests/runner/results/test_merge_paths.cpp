// runner merge OUT DIR...: OUT may not be an input, lie inside one, or hold
// one, however the paths are spelled (issue 33: `runner merge sh/x.shard-0-of-3
// sh/x.shard-{0,1,2}-of-3` wrote the merged set into shard 0).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runner/results/merge_paths.h"

namespace mpb {
namespace {

namespace fs = std::filesystem;

TEST(MergePaths, WithinComparesWholeComponents) {
  EXPECT_TRUE(path_is_within("/a/b", "/a/b"));
  EXPECT_TRUE(path_is_within("/a/b/c", "/a/b"));
  EXPECT_TRUE(path_is_within("/a/b/c", "/a/b/"));
  EXPECT_FALSE(path_is_within("/a/bc", "/a/b"));  // a prefix of the text, not of the path
  EXPECT_FALSE(path_is_within("/a", "/a/b"));
}

TEST(MergePaths, OutInsideOrAroundAnInputIsRefused) {
  const fs::path root = fs::path(::testing::TempDir()) / ("mpb_merge_paths_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path s0 = root / "sh" / "x.shard-0-of-2", s1 = root / "sh" / "x.shard-1-of-2";
  fs::create_directories(s0);
  fs::create_directories(s1);
  const std::vector<fs::path> inputs{s0, s1};
  // Apart: the usual layout, and OUT as a sibling of the shards' directory.
  EXPECT_EQ(merge_path_conflict(root / "merged", inputs), "");
  EXPECT_EQ(merge_path_conflict(root / "sh2", inputs), "");
  // OUT is an input, lies inside one (even one level down, not yet made), or holds one.
  EXPECT_NE(merge_path_conflict(s0, inputs).find("is the input"), std::string::npos);
  EXPECT_NE(merge_path_conflict(s0 / "merged", inputs).find("lies inside the input"), std::string::npos);
  EXPECT_NE(merge_path_conflict(root / "sh", inputs).find("lies inside OUT"), std::string::npos);
  EXPECT_NE(merge_path_conflict(root, inputs).find("lies inside OUT"), std::string::npos);
  // Another spelling of the same place: "..", "." and a symlink.
  EXPECT_NE(merge_path_conflict(root / "sh" / "." / "x.shard-1-of-2" / ".." / "x.shard-0-of-2", inputs), "");
  fs::create_directory_symlink(s1, root / "link");
  EXPECT_NE(merge_path_conflict(root / "link" / "out", inputs).find("lies inside the input"), std::string::npos);
  fs::remove_all(root);
}

}  // namespace
}  // namespace mpb
