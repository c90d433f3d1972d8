// 16-byte loads and stores for the memory-bound element-wise kernels: eight
// consecutive elements at a time (one 16-byte access for fp16/bf16, two for
// fp32) instead of eight 2- or 4-byte accesses with a dtype switch each. Each
// element is converted by the same scalar::Elem<T> functions load_f32 and
// store_f32 use (ops/dtype_io.h), applied to the registers, so a vectorised
// kernel gives the same bits as the element-by-element one.
//
// Use: a kernel takes `vec` (every pointer it touches 16-byte aligned:
// vec_aligned on the host), runs its first n / kVec * kVec elements through
// load8/store8 when vec is set, and the rest (all of them when not) one at a
// time (VecSplit says where the element-by-element part starts). map1 and
// map2 are that loop for one and two inputs, given the per-element function.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "backends/cuda/kernel_util.cuh"
#include "core/dtype.h"
#include "ops/dtype_io.h"

namespace mpb::cuda {

constexpr int kVec = 8;

// x[k] = element i + k as fp32, k < 8; i a multiple of 8, p 16-byte aligned.
__device__ inline void load8(const void* p, DType t, int64_t i, float (&x)[kVec]) {
  if (t == DType::F32) {
    const float4* v = static_cast<const float4*>(p) + i / 4;
    const float4 a = v[0], b = v[1];
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
    return;
  }
  const uint4 v = static_cast<const uint4*>(p)[i / kVec];
  const uint16_t* h = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
  for (int k = 0; k < kVec; ++k)
    x[k] = t == DType::F16 ? scalar::Elem<DType::F16>::load(h, k) : scalar::Elem<DType::BF16>::load(h, k);
}

// Elements i..i+7 = x[k] rounded to t (as store_f32 rounds them).
__device__ inline void store8(void* p, DType t, int64_t i, const float (&x)[kVec]) {
  if (t == DType::F32) {
    float4* v = static_cast<float4*>(p) + i / 4;
    v[0] = make_float4(x[0], x[1], x[2], x[3]);
    v[1] = make_float4(x[4], x[5], x[6], x[7]);
    return;
  }
  uint4 v;
  uint16_t* h = reinterpret_cast<uint16_t*>(&v);
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    if (t == DType::F16) scalar::Elem<DType::F16>::store(h, k, x[k]);
    else scalar::Elem<DType::BF16>::store(h, k, x[k]);
  }
  static_cast<uint4*>(p)[i / kVec] = v;
}

// The vectorised part of n elements: groups [0, groups) of kVec, then the
// single elements from `tail` on.
struct VecSplit {
  int64_t groups, tail;
  __host__ __device__ VecSplit(int64_t n, bool vec) : groups(vec ? n / kVec : 0), tail(vec ? n / kVec * kVec : 0) {}
};

// out[i] = f(a[i], i) for i < n, a and out as fp32 (out may be a): the
// vectorised groups through load8/store8, then the element-by-element tail,
// both through the same f, so both give the same bits. Grid-stride loops.
template <class F>
__device__ inline void map1(void* out, DType ot, const void* a, DType at, int64_t n, bool vec, F f) {
  const VecSplit v(n, vec);
  const int64_t stride = grid_threads(), first = global_thread();
  for (int64_t g = first; g < v.groups; g += stride) {
    float x[kVec];
    load8(a, at, g * kVec, x);
#pragma unroll
    for (int k = 0; k < kVec; ++k) x[k] = f(x[k], g * kVec + k);
    store8(out, ot, g * kVec, x);
  }
  for (int64_t i = v.tail + first; i < n; i += stride) scalar::store_f32(out, ot, i, f(scalar::load_f32(a, at, i), i));
}

// out[i] = f(a[i], b[i]) for i < n, as map1 (out may be a or b).
template <class F>
__device__ inline void map2(void* out, DType ot, const void* a, DType at, const void* b, DType bt, int64_t n, bool vec,
                            F f) {
  const VecSplit v(n, vec);
  const int64_t stride = grid_threads(), first = global_thread();
  for (int64_t g = first; g < v.groups; g += stride) {
    float x[kVec], y[kVec];
    load8(a, at, g * kVec, x);
    load8(b, bt, g * kVec, y);
#pragma unroll
    for (int k = 0; k < kVec; ++k) x[k] = f(x[k], y[k]);
    store8(out, ot, g * kVec, x);
  }
  for (int64_t i = v.tail + first; i < n; i += stride)
    scalar::store_f32(out, ot, i, f(scalar::load_f32(a, at, i), scalar::load_f32(b, bt, i)));
}

// Every pointer 16-byte aligned (the device allocator's are 256-byte aligned;
// a view at an odd offset is not).
inline bool vec_aligned(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

}  // namespace mpb::cuda
