// The device's GEMM ceiling: the FLOP rate of a large square GEMM in a given
// compute mode, measured at start so that each cell can report its achieved
// rate as a fraction of what this device reaches.
#pragma once

#include "core/device.h"

namespace mpb {

// Best of `reps` timed n x n x n GEMMs after one warm-up, in GFLOP/s.
double measure_gemm_ceiling(Device& dev, GemmCompute compute, int n = 2048, int reps = 5);

}  // namespace mpb
