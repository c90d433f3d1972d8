// Reading the small text files of /proc and /sys, where a missing or
// unreadable file is an answer ("not readable here"), not an exception.
#pragma once

#include <optional>
#include <string>

namespace mpb {

// The whole file, or nullopt with *error (when given) set to
// "<path>: <strerror>" naming why it could not be read.
std::optional<std::string> read_text_file(const std::string& path, std::string* error = nullptr);

}  // namespace mpb
