// Writes a file by runner/io/output_path.h's rule: a regular file (or a new one)
// so that readers see either the old content or the new one, never a partial
// file (write a fresh <path>.<hex>.tmp created exclusively, never through a
// link, flush it to disk, rename over <path>); "-", a
// device, a FIFO or a symlink in place, as a stream; a directory and the
// other refusals throw OutputPathError before anything is written.
#pragma once

#include <cstdint>
#include <string>

namespace mpb {

void write_file_atomic(const std::string& path, const std::string& content);
// The whole of a regular file of at most kMaxReadFileBytes; anything else (a FIFO, a device,
// a directory, a bigger file) throws std::runtime_error naming the path, without reading it.
inline constexpr uint64_t kMaxReadFileBytes = uint64_t{256} << 20;
std::string read_file(const std::string& path);

}  // namespace mpb
