// How a file is written to a path the user named (--json FILE, a results
// directory's files): the one rule every writer keeps (docs/RESULTS.md,
// Guarantees).
//   - a regular file, or a path that does not exist yet: replaced atomically
//     (write PATH.tmp, fsync, rename), so a reader never sees half a file;
//   - "-", a character device, a FIFO, or a symlink to anything but a
//     directory (/dev/stdout -> /proc/self/fd/1): written in place, as a
//     stream, so the device stays a device and the link stays a link;
//   - a directory, a block device, a socket, a symlink loop or a dangling
//     symlink, a missing or unwritable parent: refused (OutputPathError),
//     before any work when the caller checks up front.
#pragma once

#include <stdexcept>
#include <string>

namespace mpb {

struct OutputPathError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class OutputMode { Replace, Stream, StandardOutput };

// Throws OutputPathError naming the path and what it is. Touches nothing:
// opening a FIFO would block until a reader comes, so it only stats.
OutputMode check_output_path(const std::string& path);

// A results directory the user named (--out): refused (OutputPathError) when it exists and is
// not a directory, or when the nearest existing directory on its path is not writable (a
// read-only filesystem, no permission). Creates nothing: a refusal must leave no trace.
void check_output_dir(const std::string& path);

}  // namespace mpb
