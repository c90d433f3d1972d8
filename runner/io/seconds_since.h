// Wall-clock seconds elapsed since a steady_clock time point: the one
// expression the runner's time boxes, budgets and reports use.
#pragma once

#include <chrono>

namespace mpb {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace mpb
