// MPB_HD marks functions both backends compile: plain host functions in C++,
// __host__ __device__ under nvcc.
#pragma once

#ifndef MPB_HD
#if defined(__CUDACC__)
#define MPB_HD __host__ __device__
#else
#define MPB_HD
#endif
#endif
