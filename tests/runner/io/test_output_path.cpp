// runner/io/output_path.h's rule, with the special files made in a temporary
// directory (mkfifo, mknod, symlinks), never the machine's own /dev nodes:
// a regular or new file is replaced atomically, a FIFO, a character device or
// a symlink is written in place and stays what it was, a directory or a
// missing parent is refused before anything is written (issue 33).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <future>
#include <thread>
#include <string>

#include "runner/io/atomic_file.h"
#include "runner/io/output_path.h"

namespace mpb {
namespace {

namespace fs = std::filesystem;

// Whether a temp file of BASE's writes is left in DIR: the writer names them
// BASE.<hex>.tmp (runner/io/atomic_file.cpp), the old one BASE.tmp.
bool temp_left(const fs::path& dir, const std::string& base) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(base + ".", 0) == 0 && n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) return true;
  }
  return false;
}

class OutputPath : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("mpb_output_path_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (dir_ / name).string(); }
  static mode_t type_of(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
    return st.st_mode & S_IFMT;
  }
  // The error check_output_path throws for `path`, or "" when it throws none.
  static std::string refusal(const std::string& path) {
    try {
      check_output_path(path);
    } catch (const OutputPathError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(OutputPath, RegularAndNewFilesAreReplacedAtomically) {
  EXPECT_EQ(check_output_path(at("new.json")), OutputMode::Replace);
  std::ofstream(at("old.json")) << "old";
  EXPECT_EQ(check_output_path(at("old.json")), OutputMode::Replace);
  write_file_atomic(at("old.json"), "new\n");
  EXPECT_EQ(read_file(at("old.json")), "new\n");
  EXPECT_FALSE(temp_left(fs::path(at("old.json")).parent_path(), "old.json"));
  EXPECT_EQ(check_output_path("-"), OutputMode::StandardOutput);
}

TEST_F(OutputPath, ADirectoryOrAMissingParentIsRefusedAndNothingIsWritten) {
  fs::create_directories(at("results"));
  EXPECT_NE(refusal(at("results")).find("is a directory"), std::string::npos) << refusal(at("results"));
  EXPECT_THROW(write_file_atomic(at("results"), "x"), OutputPathError);
  EXPECT_FALSE(fs::exists(at("results.tmp")));  // the old writer left DIR.tmp behind
  EXPECT_NE(refusal(at("no/such/dir/x.json")).find("does not exist"), std::string::npos);
  EXPECT_FALSE(fs::exists(at("no")));
  std::ofstream(at("file")) << "x";
  EXPECT_NE(refusal(at("file/x.json")).find("is not a directory"), std::string::npos) << refusal(at("file/x.json"));
  EXPECT_NE(refusal("").find("empty"), std::string::npos);
}

TEST_F(OutputPath, SymlinkLoopsAndDanglingLinksAreNamed) {
  fs::create_symlink(at("b"), at("a"));
  fs::create_symlink(at("a"), at("b"));
  EXPECT_NE(refusal(at("a")).find("symlink loop (ELOOP"), std::string::npos) << refusal(at("a"));
  fs::create_symlink(at("missing"), at("dangling"));
  EXPECT_NE(refusal(at("dangling")).find("does not exist"), std::string::npos) << refusal(at("dangling"));
  fs::create_directories(at("d"));
  fs::create_symlink(at("d"), at("to_dir"));
  EXPECT_NE(refusal(at("to_dir")).find("symlink to a directory"), std::string::npos);
}

TEST_F(OutputPath, AFifoIsWrittenInPlaceAndTheContentReachesItsReader) {
  ASSERT_EQ(::mkfifo(at("pipe").c_str(), 0600), 0);
  EXPECT_EQ(check_output_path(at("pipe")), OutputMode::Stream);
  // The reader opens the FIFO first (an open for writing waits for one),
  // without blocking, and gives up after 10 s: a writer that replaced the
  // FIFO would otherwise leave it waiting for ever.
  const int fd = ::open(at("pipe").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  auto reader = std::async(std::launch::async, [fd] {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    char buf[256];
    while (got.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) got.append(buf, size_t(n));
      else std::this_thread::sleep_for(std::chrono::milliseconds(5));  // no writer yet, or nothing written yet
    }
    ::close(fd);
    return got;
  });
  write_file_atomic(at("pipe"), "{\"a\": 1}\n");
  EXPECT_EQ(reader.get(), "{\"a\": 1}\n");
  EXPECT_EQ(type_of(at("pipe")), mode_t(S_IFIFO));
  EXPECT_FALSE(temp_left(fs::path(at("pipe")).parent_path(), "pipe"));
}

// Issue 43, item 1: a symlink planted at PATH.tmp (or any file there) is never
// opened; the temp file is created fresh beside PATH, so the victim keeps its
// content and PATH becomes a regular file, not a link out of the directory.
TEST_F(OutputPath, APlantedTmpLinkIsNeverFollowed) {
  std::ofstream(at("victim")) << "precious\n";
  for (const char* name : {"t.json", "manifest.json"}) {
    const std::string target = at(name);
    fs::create_symlink(at("victim"), target + ".tmp");
    write_file_atomic(target, "{\"new\": 1}\n");
    EXPECT_EQ(read_file(at("victim")), "precious\n") << name;
    EXPECT_EQ(type_of(target), mode_t(S_IFREG)) << name;
    EXPECT_EQ(read_file(target), "{\"new\": 1}\n") << name;
    EXPECT_EQ(type_of(target + ".tmp"), mode_t(S_IFLNK)) << name;  // left for the sweep to move
  }
  size_t entries = 0;  // victim, two targets, two planted links: no temp file left behind
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 5u);
}

TEST_F(OutputPath, ASymlinkStaysALinkAndItsFileGetsTheContent) {
  std::ofstream(at("target.json")) << "a much longer old content";
  fs::create_symlink(at("target.json"), at("link.json"));
  EXPECT_EQ(check_output_path(at("link.json")), OutputMode::Stream);
  write_file_atomic(at("link.json"), "new\n");
  EXPECT_EQ(type_of(at("link.json")), mode_t(S_IFLNK));
  EXPECT_EQ(read_file(at("target.json")), "new\n");  // truncated, not overwritten at the front
}

TEST_F(OutputPath, ACharacterDeviceStaysADevice) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod of a character device needs root (CI runs as root)";
  // The null device's numbers (1, 3): writes succeed and go nowhere.
  ASSERT_EQ(::mknod(at("null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << std::strerror(errno);
  EXPECT_EQ(check_output_path(at("null")), OutputMode::Stream);
  write_file_atomic(at("null"), "{}\n");
  EXPECT_EQ(type_of(at("null")), mode_t(S_IFCHR));
  EXPECT_FALSE(temp_left(fs::path(at("null")).parent_path(), "null"));
  // A full device (1, 7) refuses the write: the error says so, the device stays.
  ASSERT_EQ(::mknod(at("full").c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
  EXPECT_THROW(write_file_atomic(at("full"), "{}\n"), std::runtime_error);
  EXPECT_EQ(type_of(at("full")), mode_t(S_IFCHR));
}

TEST_F(OutputPath, BlockDevicesAndSocketsAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod of a block device needs root (CI runs as root)";
  // Numbers of a loop device; the node is never opened, only refused.
  ASSERT_EQ(::mknod(at("disk").c_str(), S_IFBLK | 0600, makedev(7, 0)), 0);
  EXPECT_NE(refusal(at("disk")).find("block device"), std::string::npos) << refusal(at("disk"));
  // A listening Unix socket: open() cannot write one, so it is refused by name.
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = at("sock");
  ASSERT_LT(name.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, name.c_str(), name.size() + 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  EXPECT_NE(refusal(name).find("is a socket"), std::string::npos) << refusal(name);
  ::close(sock);
}

// Root passes access(W_OK) on any directory, so as root (CI, the fresh machine) the check
// runs in a child that has dropped to nobody (65534): the same rule, asked by a user the
// mode-0555 directory really refuses.
TEST_F(OutputPath, AnUnwritableParentIsRefused) {
  fs::create_directories(at("ro"));
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(at("ro"), fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const std::string target = at("ro/x.json");
  if (::geteuid() != 0) {
    EXPECT_NE(refusal(target).find("not writable"), std::string::npos) << refusal(target);
  } else {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0) << std::strerror(errno);
    if (child == 0) {
      // 2: could not drop to nobody; 1: not refused as unwritable; 0: refused.
      if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
          ::setresuid(65534, 65534, 65534) != 0)
        ::_exit(2);
      ::_exit(refusal(target).find("not writable") != std::string::npos ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: could not become nobody, 1: the check did not refuse";
  }
  fs::permissions(at("ro"), fs::perms::owner_all);
}

}  // namespace
}  // namespace mpb
