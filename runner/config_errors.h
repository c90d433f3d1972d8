// Helpers for configuration error messages: "did you mean" suggestions.
// Internal to runner/config*.cpp and runner/matrix.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mpb {

// Optimal-string-alignment distance: insertions, deletions, substitutions and
// transpositions of adjacent characters each cost 1 ("widht" -> "width" is 1).
int edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `name`, if it is close enough to be a typo. A dotted
// candidate also matches by its last segment ("width" -> "model.width").
std::optional<std::string> nearest_name(const std::string& name,
                                        const std::vector<std::string>& candidates);

// "unknown key 'optimiser'; did you mean 'optimizer'?" when a candidate is close,
// else "unknown key 'xyz' (valid keys: a, b, c)". `what` is the noun ("key", "value").
std::string unknown_name_message(const std::string& what, const std::string& name,
                                 const std::vector<std::string>& candidates);

}  // namespace mpb
