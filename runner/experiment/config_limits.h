// The limits on an experiment file (docs/CONFIG.md, "Limits"). Each one is far
// beyond any hand-written experiment and stops a generated file gone wrong
// with a ConfigError at the offending key, instead of minutes of loading,
// a message hundreds of kilobytes long, or days of training.
#pragma once

#include <cstddef>

namespace mpb {

// The file itself. 1 MiB is ~50,000 lines; the largest experiment shipped is
// under 4 KB.
inline constexpr size_t kMaxFileBytes = size_t{1} << 20;

// The experiment name names the directory results/<name>/; NAME_MAX is 255
// bytes, and a name is for people to read.
inline constexpr size_t kMaxNameChars = 100;

// Cells: the product of the axes (counted before exclude drops any), and the
// cells after exclude and include. Ten thousand cells of even one second each
// are hours of training.
inline constexpr size_t kMaxCells = 10000;

// Values of one matrix axis: an axis longer than this alone gives more than
// kMaxCells cells; the cap says so at the axis, before its values are parsed.
inline constexpr size_t kMaxAxisValues = kMaxCells;

// exclude entries: a longer list removes more combinations than there can be
// cells. Matching is one hash lookup per cell and distinct key set.
inline constexpr size_t kMaxExcludes = kMaxCells;

// The nearest cells a baseline that matches none lists (by how many of its
// keys differ), and the matched cells a baseline that matches many lists.
inline constexpr size_t kBaselineCandidatesShown = 5;

}  // namespace mpb
