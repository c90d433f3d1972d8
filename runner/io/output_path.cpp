#include "runner/io/output_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace mpb {

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw OutputPathError("cannot write " + path + ": " + why);
}

// The directory a new file at `path` lands in must exist and take new files.
void check_parent(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) parent = ".";
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0)
    refuse(path, "its directory " + parent.string() + " " +
                     (errno == ENOENT ? std::string("does not exist") : std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) refuse(path, parent.string() + " is not a directory");
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    refuse(path, "its directory " + parent.string() + " is not writable (" + std::strerror(errno) + ")");
}

// A special file or a link's target: a stream if it is one we may write.
OutputMode stream_or_refuse(const std::string& path, mode_t mode, bool through_link) {
  if (S_ISDIR(mode)) refuse(path, through_link ? "it is a symlink to a directory" : "it is a directory");
  if (S_ISBLK(mode)) refuse(path, "it is a block device (a disk is never an output)");
  if (S_ISSOCK(mode)) refuse(path, "it is a socket");
  if (::access(path.c_str(), W_OK) != 0) refuse(path, std::strerror(errno));
  return OutputMode::Stream;
}

}  // namespace

OutputMode check_output_path(const std::string& path) {
  if (path == "-") return OutputMode::StandardOutput;
  if (path.empty()) refuse("''", "the path is empty");
  struct stat own {};
  if (::lstat(path.c_str(), &own) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) refuse(path, std::strerror(errno));
    check_parent(path);  // says which: a missing directory, or a file where one should be
    return OutputMode::Replace;
  }
  if (S_ISREG(own.st_mode)) {
    check_parent(path);  // the rename needs the directory, not only the file
    return OutputMode::Replace;
  }
  if (!S_ISLNK(own.st_mode)) return stream_or_refuse(path, own.st_mode, false);
  // A symlink is written through, never replaced: renaming over it would turn
  // /dev/stdout into a regular file that nobody reads.
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0) {
    if (errno == ELOOP) refuse(path, "a symlink loop (ELOOP: too many levels of symbolic links)");
    if (errno == ENOENT) refuse(path, "a symlink to a file that does not exist");
    refuse(path, std::strerror(errno));
  }
  return stream_or_refuse(path, target.st_mode, true);
}

void check_output_dir(const std::string& path) {
  if (path.empty()) throw OutputPathError("'': name a directory");
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_directory(st))
    throw OutputPathError(path + ": exists and is not a directory (a file, FIFO or device)");
  // The nearest directory that exists: the results go below it, so it must be writable.
  fs::path dir = fs::absolute(path, ec);
  while (!dir.empty() && !fs::exists(dir, ec)) dir = dir.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) throw OutputPathError(path + ": " + dir.string() + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    throw OutputPathError(path + ": cannot write in " + dir.string() + ": " + std::strerror(err) +
                          (err == EROFS ? "" : " (a read-only filesystem, or no write permission)"));
  }
}

}  // namespace mpb
