// The results directory's rules (runner/results/result_dir.h): one writer at a time,
// and files that do not belong to the experiment as loaded now move to
// stale/<time>/ with the reason; nothing is deleted.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/io/atomic_file.h"
#include "runner/measure/ceiling.h"
#include "runner/machine/device_factory.h"
#include "runner/results/result_dir.h"

namespace fs = std::filesystem;

namespace mpb {
namespace {

class ResultDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mpb_result_dir_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "cells");
    fs::create_directories(dir_ / "partial");
    for (int i = 0; i < 2; ++i) {
      Cell c;
      c.id = "fusion=" + std::string(i ? "on" : "off");
      c.slug = cell_slug(c.id);
      c.config.steps = 10 + i;
      cells_.push_back(c);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string hash(const Cell& c) const { return config_hash(cell_config_to_json(c.config)); }
  fs::path write(const std::string& rel, const std::string& id, const std::string& hash) const {
    write_file_atomic((dir_ / rel).string(), nlohmann::json{{"cell_id", id}, {"config_hash", hash}}.dump());
    return dir_ / rel;
  }
  // Cell i's file in `sub` (cells or partial), as the current runner names and fills it.
  std::string current(const std::string& sub, size_t i) const {
    write(sub + "/" + cells_[i].slug + ".json", cells_[i].id, hash(cells_[i]));
    return sub + "/" + cells_[i].slug + ".json";
  }
  std::vector<std::string> stale_files() const {
    std::vector<std::string> out;
    if (!fs::exists(dir_ / "stale")) return out;
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "stale"))  // links not followed: one may loop
      if (fs::is_regular_file(e.symlink_status())) out.push_back(fs::relative(e.path(), dir_).string());
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<StaleMove> sweep(EarlierResults earlier, std::vector<const Cell*> running = {}) {
    return sweep_result_dir(dir_, cells_, running, earlier);
  }

  fs::path dir_;
  std::vector<Cell> cells_;
};

TEST_F(ResultDirTest, CurrentFilesStayWhenResuming) {
  current("cells", 0);
  current("partial", 1);
  EXPECT_TRUE(sweep(EarlierResults::Keep, {&cells_[0], &cells_[1]}).empty());
  EXPECT_TRUE(stale_files().empty());
}

TEST_F(ResultDirTest, EditedConfigUnknownCellsAndTmpFilesMoveToStaleWithReasons) {
  const fs::path edited = write("cells/" + cells_[0].slug + ".json", cells_[0].id, "0000000000000000");
  write("cells/gone.json", "fusion=maybe", "1111111111111111");
  { std::ofstream(dir_ / "cells" / "x.json.tmp") << "{\"cell_id\": \"fus"; }
  const auto moves = sweep(EarlierResults::Keep, {&cells_[0], &cells_[1]});
  ASSERT_EQ(moves.size(), 3u);
  EXPECT_FALSE(fs::exists(edited));
  const auto stale = stale_files();
  ASSERT_EQ(stale.size(), 4u) << "three files and why.txt";
  std::string why;
  for (const auto& f : stale)
    if (f.size() > 7 && f.substr(f.size() - 7) == "why.txt") why = read_file((dir_ / f).string());
  EXPECT_NE(why.find("ran with another configuration"), std::string::npos) << why;
  EXPECT_NE(why.find("not in the experiment any more"), std::string::npos) << why;
  EXPECT_NE(why.find("unfinished write"), std::string::npos) << why;
}

// Issue 43, item 14: a directory or a symlink loop at cells/<slug>.json, and a
// manifest.json that is a directory or garbage, move to stale/ before the run
// (the directory failed the run after it trained; the loop made --resume exit
// 1 with a raw error; the garbage manifest was overwritten).
TEST_F(ResultDirTest, DirectoriesLoopsAndGarbageManifestsMoveToStale) {
  fs::create_directories(dir_ / "cells" / (cells_[0].slug + ".json"));
  fs::create_symlink(dir_ / "partial" / "loop.json", dir_ / "partial" / "loop.json");  // points at itself
  { std::ofstream(dir_ / "manifest.json") << "garbage, not JSON"; }
  const auto moves = sweep(EarlierResults::Keep, {&cells_[0], &cells_[1]});
  ASSERT_EQ(moves.size(), 3u);
  std::string reasons;
  for (const auto& m : moves) reasons += m.from + ": " + m.reason + "\n";
  EXPECT_NE(reasons.find("cells/" + cells_[0].slug + ".json: not a regular file"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("partial/loop.json: not a regular file"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("manifest.json: manifest.json is not a manifest"), std::string::npos) << reasons;
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "cells" / (cells_[0].slug + ".json"))));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "manifest.json")));
  EXPECT_EQ(stale_files().size(), 2u) << "the garbage manifest and why.txt (the rest are a directory and a link)";
  fs::create_directories(dir_ / "manifest.json");
  const auto again = sweep(EarlierResults::Keep, {&cells_[0], &cells_[1]});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_NE(again[0].reason.find("manifest.json is not a regular file"), std::string::npos) << again[0].reason;
}

// Issue 43, item 2: the plan of a sweep says what would move and changes nothing.
TEST_F(ResultDirTest, APlannedSweepMovesNothing) {
  const std::string running = current("cells", 0);
  write("cells/gone.json", "fusion=maybe", "1111111111111111");
  { std::ofstream(dir_ / "manifest.json") << "garbage"; }
  const auto planned = sweep_result_dir(dir_, cells_, {&cells_[0]}, EarlierResults::Replace, SweepMode::Plan);
  ASSERT_EQ(planned.size(), 3u);
  EXPECT_TRUE(fs::exists(dir_ / running));
  EXPECT_TRUE(fs::exists(dir_ / "cells" / "gone.json"));
  EXPECT_TRUE(fs::exists(dir_ / "manifest.json"));
  EXPECT_FALSE(fs::exists(dir_ / "stale"));
  const auto done = sweep(EarlierResults::Replace, {&cells_[0]});
  ASSERT_EQ(done.size(), planned.size());
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].from, planned[i].from);
    EXPECT_EQ(done[i].reason, planned[i].reason);
  }
}

// Issue 43, item 1: a symlink planted as manifest.json.tmp or cells/y.json.tmp
// moves to stale/ as a link (never read or followed); its target is untouched.
TEST_F(ResultDirTest, PlantedTmpLinksMoveToStaleAndTheirTargetsStay) {
  const fs::path victim = fs::path(::testing::TempDir()) / ("mpb_victim_" + std::to_string(::getpid()));
  { std::ofstream(victim) << "precious\n"; }
  fs::create_directories(dir_ / "cells");
  fs::create_symlink(victim, dir_ / "manifest.json.tmp");
  fs::create_symlink(victim, dir_ / "cells" / "y.json.tmp");
  const auto moves = sweep(EarlierResults::Keep, {&cells_[0], &cells_[1]});
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "manifest.json.tmp")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "cells" / "y.json.tmp")));
  for (const auto& m : moves) EXPECT_TRUE(fs::is_symlink(dir_ / m.to)) << m.to;
  EXPECT_EQ(read_file(victim.string()), "precious\n");
  fs::remove(victim);
}

TEST_F(ResultDirTest, AFreshRunMovesOnlyTheFilesOfTheCellsItRuns) {
  const std::string kept = current("cells", 0), rerun = current("cells", 1);
  const auto moves = sweep(EarlierResults::Replace, {&cells_[1]});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from, rerun);
  EXPECT_NE(moves[0].reason.find("runs again"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / kept));
}

TEST_F(ResultDirTest, AnOlderSlugIsRenamedAndADuplicateMovesToStale) {
  write("cells/old-slug-0.json", cells_[0].id, hash(cells_[0]));
  current("cells", 1);
  write("cells/old-slug-1.json", cells_[1].id, hash(cells_[1]));
  const auto moves = sweep(EarlierResults::Keep);
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_TRUE(fs::exists(dir_ / "cells" / (cells_[0].slug + ".json")));
  EXPECT_TRUE(fs::exists(dir_ / "cells" / (cells_[1].slug + ".json")));
  EXPECT_EQ(stale_files().size(), 2u) << "old-slug-1.json and why.txt";
}

TEST_F(ResultDirTest, ASidecarOfAFinishedCellMovesToStale) {
  current("cells", 0);
  const std::string sidecar = current("partial", 0);
  const auto moves = sweep(EarlierResults::Keep, {&cells_[0]});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from, sidecar);
}

TEST_F(ResultDirTest, ASecondHolderOfTheLockIsRefusedWithTheFirstsPid) {
  // flock locks belong to open file descriptions: a second one in this
  // process conflicts like another process would, but a child makes the
  // PID in the message someone else's, as in real use.
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ResultDirLock held(dir_);
    char c = 1;
    (void)!::write(ready[1], &c, 1);
    (void)!::read(done[0], &c, 1);
    ::_exit(0);
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  try {
    ResultDirLock second(dir_);
    ADD_FAILURE() << "a second lock was granted";
  } catch (const ResultDirBusy& e) {
    EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(child)), std::string::npos) << e.what();
  }
  (void)!::write(done[1], &c, 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_NO_THROW(ResultDirLock again(dir_)) << "the lock is free once its holder exits";
}

TEST(GemmCeiling, AStopRequestEndsTheMeasurementBeforeAnyGemm) {
  const std::unique_ptr<Device> dev = make_device("cpu");
  const std::atomic<bool> stop{true};
  EXPECT_EQ(measure_gemm_ceiling(*dev, GemmCompute::F32, 64, 1000000, &stop), 0.0);
  const std::atomic<bool> go{false};
  EXPECT_GT(measure_gemm_ceiling(*dev, GemmCompute::F32, 64, 2, &go), 0.0);
}

}  // namespace
}  // namespace mpb
