// Calls f with the float dtype as a compile-time constant, so the loop inside
// f is specialised (and vectorised) for that storage type.
#pragma once

#include <type_traits>

#include "backends/cpu/kernel_errors.h"
#include "core/dtype.h"
#include "ops/dtype_io.h"

namespace mpb::cpu::MPB_CPU_ISA_NS {

template <DType T>
using DTypeTag = std::integral_constant<DType, T>;

template <typename F>
void dispatch_float(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(DTypeTag<DType::F32>{}); return;
    case DType::F16: f(DTypeTag<DType::F16>{}); return;
    case DType::BF16: f(DTypeTag<DType::BF16>{}); return;
    default: throw_not_float(t);
  }
}

// Two dtypes (for example an op's input and output).
template <typename F>
void dispatch_float2(DType a, DType b, F&& f) {
  dispatch_float(a, [&](auto A) { dispatch_float(b, [&](auto B) { f(A, B); }); });
}

// Three dtypes (two inputs and an output).
template <typename F>
void dispatch_float3(DType a, DType b, DType c, F&& f) {
  dispatch_float2(a, b, [&](auto A, auto B) { dispatch_float(c, [&](auto C) { f(A, B, C); }); });
}

}  // namespace mpb::cpu::MPB_CPU_ISA_NS
