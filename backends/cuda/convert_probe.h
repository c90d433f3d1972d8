// The GPU's own fp32 -> fp16 / bf16 / TF32 conversion instructions, exposed
// to host code so tests can hold core/numerics.h's bit-exact software
// conversions (float_to_half_bits, float_to_bf16_bits, round_to_tf32)
// against the hardware (tests/gpu/test_convert_probe.cpp). Test support: the
// backend itself never calls this. Plain C++ (no CUDA headers), like
// backends/cuda/cuda_device.h; implemented in backends/cuda/convert_probe.cu.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpb {

// Converts host_in[0..n) on CUDA device 0, one GPU thread per element:
//   half_out[i] = bits of __float2half_rn(x)      (cvt.rn.f16.f32)
//   bf16_out[i] = bits of __float2bfloat16_rn(x)  (cvt.rn.bf16.f32 on sm_80+)
//   tf32_out[i] = the 32-bit register cvt.rna.tf32.f32 writes (sm_80+), as
//                 is; a tensor core reads only its top 19 bits, so compare
//                 it masked with 0xFFFFE000
// Synchronous; the calling thread's current CUDA device is restored. Throws
// DeviceError (core/device.h) when there is no usable device (see
// cuda_unavailable_reason()) or a CUDA call fails.
void cuda_convert_probe(const float* host_in, size_t n, uint16_t* half_out, uint16_t* bf16_out, float* tf32_out);

}  // namespace mpb
