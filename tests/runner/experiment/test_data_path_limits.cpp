// data.path for data.kind text: the corpus is held in memory whole, so a file
// over MlmData::kMaxTextBytes is refused at load time at the key, with its
// size; a symlink loop is named as one; the memory estimate counts the corpus
// (issue 33: a 5 GB file ended in std::bad_alloc after 30 s); an empty or
// non-UTF-8 file is named with the reason (issue 31). The big files
// are sparse (resize_file): nothing big is written to disk.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "models/mlm_data.h"
#include "tests/runner/config_test_helpers.h"
#include "train/cell_limits.h"

namespace mpb {
namespace {

namespace fs = std::filesystem;
using namespace config_test;

class DataPathLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("mpb_data_path_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A sparse file of `bytes` bytes: its size is real, its blocks are not.
  std::string sparse(const std::string& name, uintmax_t bytes) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << "abc";
    fs::resize_file(path, bytes);
    return path;
  }
  static std::string yaml(const std::string& path) {
    return "name: x\nmodel: {kind: bert, seq_len: 128}\ndata:\n  kind: text\n  path: " + path + "\n";
  }
  fs::path dir_;
};

TEST_F(DataPathLimits, AFileOverTheCapIsRefusedAtTheKeyWithItsSize) {
  const uintmax_t over = uintmax_t(MlmData::kMaxTextBytes) + 1;
  const std::string big = sparse("big.txt", over);
  expect_error(yaml(big), 5, 9, "data.path", "has " + std::to_string(over) + " bytes (256 MiB), over the 256 MiB cap");
  // The cap itself is allowed: the limit is "over", not "at".
  const std::string at_cap = sparse("at_cap.txt", uintmax_t(MlmData::kMaxTextBytes));
  EXPECT_EQ(load(yaml(at_cap)).cells.size(), 1u);
  // from_text (a cell built without the loader) refuses before reading a byte.
  MlmOptions options;
  options.seq_len = 128;
  try {
    MlmData::from_text(big, 1, options);
    ADD_FAILURE() << "from_text read a file over the cap";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cap on a text corpus"), std::string::npos) << e.what();
  }
}

TEST_F(DataPathLimits, ASymlinkLoopIsNamedNotMissing) {
  fs::create_symlink(dir_ / "loop_b", dir_ / "loop_a");
  fs::create_symlink(dir_ / "loop_a", dir_ / "loop_b");
  expect_error(yaml((dir_ / "loop_a").string()), 5, 9, "data.path", "is a symlink loop (ELOOP");
}

// An empty or non-UTF-8 file: refused at the key's file:line:col, naming the
// path and the reason (for non-UTF-8, the bad byte's line and column in the file).
TEST_F(DataPathLimits, EmptyAndNonUtf8FilesAreRefusedAtTheKey) {
  const std::string empty = (dir_ / "empty.txt").string();
  std::ofstream(empty, std::ios::binary).flush();
  expect_error(yaml(empty), 5, 9, "data.path", "data.path: '" + empty + "' is empty");
  const std::string latin1 = (dir_ / "latin1.txt").string();
  std::ofstream(latin1, std::ios::binary) << std::string(300, 'a') << "\nna\xEFve\n";
  expect_error(yaml(latin1), 5, 9, "data.path",
               "'" + latin1 + "' is not UTF-8: byte 0xef at line 2, column 3 (byte offset 303)");
  // The same bytes as UTF-8 load.
  std::ofstream(latin1, std::ios::binary) << std::string(300, 'a') << "\nna\xC3\xAFve\n";
  EXPECT_EQ(load(yaml(latin1)).cells.size(), 1u);
}

TEST_F(DataPathLimits, TheMemoryEstimateCountsTheCorpus) {
  CellConfig small = load(yaml(sparse("small.txt", 4096))).base;
  CellConfig large = load(yaml(sparse("large.txt", uintmax_t(200) << 20))).base;
  const double grown = estimate_cell_memory(large, false).host - estimate_cell_memory(small, false).host;
  // The text is held once, byte for byte: at least the 200 MiB difference.
  EXPECT_GE(grown, double((uintmax_t(200) << 20) - 4096));
}

}  // namespace
}  // namespace mpb
