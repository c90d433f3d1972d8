// Order statistics for timing samples.
#pragma once

#include <vector>

namespace mpb {

// Linear interpolation between closest ranks (numpy's default), q in [0, 1].
double quantile(std::vector<double> v, double q);
inline double median(const std::vector<double>& v) { return quantile(v, 0.5); }

}  // namespace mpb
