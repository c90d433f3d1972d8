// The device's GEMM ceiling: the FLOP rate of a large square GEMM in a given
// compute mode, measured at start so that each cell can report its achieved
// rate as a fraction of what this device reaches.
#pragma once

#include <atomic>

#include "core/device.h"

namespace mpb {

// The ceiling's matrix size for a device: large enough to reach the peak
// rate, small enough to re-measure before every repeat (CPU: 1024, about 5 ms
// per GEMM on 2 Zen 5 cores; GPU: 8192, a few ms on tensor cores, where 2048
// would take tens of microseconds and time the launch instead).
int ceiling_gemm_size(const Device& dev);

// Best of `reps` timed n x n x n GEMMs after one warm-up, in GFLOP/s
// (n = 0: ceiling_gemm_size). `stop` (Ctrl-C) is checked between GEMMs: once
// set, the best so far is returned (0 if none was timed) and the caller,
// who checks it too, stops.
double measure_gemm_ceiling(Device& dev, GemmCompute compute, int n = 0, int reps = 5,
                            const std::atomic<bool>* stop = nullptr);

}  // namespace mpb
