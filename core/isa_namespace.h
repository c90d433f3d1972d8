// MPB_ISA_NAMESPACE_BEGIN/END wrap the inline functions of the scalar cores
// (ops/*.h, core/numerics.h). In the CPU kernel sources, which CMakeLists.txt
// compiles once per ISA with MPB_CPU_ISA_NS set (isa_avx2, ...), they open an
// inline namespace of that name: each ISA's copy of, say, scalar::gelu is then
// a symbol of its own, and the linker can never keep the AVX-512 copy for a
// call the AVX2 kernels make (a crash on a CPU without AVX-512). Everywhere
// else (the CUDA kernels, the models, the tests) they are empty.
#pragma once

#if defined(MPB_CPU_ISA_NS) && !defined(__CUDACC__)
#define MPB_ISA_NAMESPACE_BEGIN inline namespace MPB_CPU_ISA_NS {
#define MPB_ISA_NAMESPACE_END }
#else
#define MPB_ISA_NAMESPACE_BEGIN
#define MPB_ISA_NAMESPACE_END
#endif
