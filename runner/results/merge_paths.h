// Where `runner merge OUT DIR...` may write: never into one of its inputs,
// and never around one (a merged set inside a shard's directory would be read
// as part of that shard; a shard inside OUT would sit among merged sets).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mpb {

// Empty when OUT and the inputs are apart; otherwise the refusal, naming both
// paths. Paths are compared canonically (symlinks, "..", "." resolved; OUT
// need not exist yet), so a different spelling of the same place is caught.
std::string merge_path_conflict(const std::filesystem::path& out, const std::vector<std::filesystem::path>& inputs);

// True when `inner` is `outer` or lies below it, component by component
// (a/bc is not inside a/b). Both paths canonical.
bool path_is_within(const std::filesystem::path& inner, const std::filesystem::path& outer);

}  // namespace mpb
