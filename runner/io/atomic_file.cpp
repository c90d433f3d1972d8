#include "runner/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "runner/io/output_path.h"

namespace mpb {

namespace {

// Writes all of `content` to `fd`; false with errno set on a failed write.
bool write_all(int fd, const std::string& content) {
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// A device, FIFO or symlink target keeps its identity: opened as it is
// (no O_CREAT, so nothing new appears), written, closed.
void write_stream(const std::string& path, const std::string& content, OutputMode mode) {
  if (mode == OutputMode::StandardOutput) {
    std::fflush(stdout);  // what printf buffered goes first, then the file
    if (!write_all(STDOUT_FILENO, content))
      throw std::runtime_error(std::string("cannot write to standard output: ") + std::strerror(errno));
    return;
  }
  std::fflush(stdout);  // /dev/stdout may be our own standard output
  int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  // A symlink to a regular file: the file it names gets the new content in place.
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::ftruncate(fd, 0) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot truncate " + path + ": " + std::strerror(err));
  }
  if (!write_all(fd, content)) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
  }
  if (::close(fd) != 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

// Creates the temp file beside `path` under a fresh name, exclusively and
// without following a link (O_CREAT|O_EXCL|O_NOFOLLOW): a planted PATH.tmp
// symlink, or any file already there, is never opened, so the write cannot
// reach a file the runner did not create (issue 43, item 1). The name is
// "<base>.<8 hex>.tmp" (base cut to 200 bytes so it stays under NAME_MAX);
// ".tmp" keeps it sweepable as an unfinished write. Returns the fd; sets `tmp`.
int create_temp_beside(const std::string& path, std::string& tmp) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = path.substr(dir.size()).substr(0, 200);
  static std::mt19937_64 rng{std::random_device{}() ^ static_cast<uint64_t>(::getpid())};
  for (int attempt = 0; attempt < 100; ++attempt) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(rng()));
    tmp = dir + base + "." + hex + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST) throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  }
  throw std::runtime_error("cannot write beside " + path + ": no free temporary name in 100 tries");
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  const OutputMode mode = check_output_path(path);
  if (mode != OutputMode::Replace) return write_stream(path, content, mode);
  std::string tmp;
  int fd = create_temp_beside(path, tmp);
  if (!write_all(fd, content)) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(err));
  }
  // fsync before rename: after a crash the new name never points at missing data.
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot flush " + tmp + ": " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
}

std::string read_file(const std::string& path) {
  // Non-blocking open and fstat before any read: a FIFO planted as manifest.json hung
  // `runner --resume` and `runner merge` for ever (issue 43 item 6), a device never ends.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error("cannot read " + path + ": not a regular file (a FIFO, device, socket or directory)");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxReadFileBytes) {
    ::close(fd);
    throw std::runtime_error("cannot read " + path + ": " + std::to_string(st.st_size) +
                             " bytes, more than a result file holds (" + std::to_string(kMaxReadFileBytes >> 20) +
                             " MiB)");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      if (n == 0) {  // the file shrank while read: what is there
        text.resize(got);
        return text;
      }
      throw std::runtime_error("cannot read " + path + ": " + std::strerror(err));
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return text;
}

}  // namespace mpb
