// FP8 GEMM operands on the GPU: an operand (any float dtype) quantized to
// E4M3 or E5M2 codes in the layout cuBLASLt's FP8 kernels take, with the
// bookkeeping of core/device.h's GemmFp8Operand (amax, saturated count).
#pragma once

#include <cstdint>

#include "backends/cuda/fp8_gemm_layout.h"
#include "core/device.h"

namespace mpb::cuda {

class CudaDevice;

// cuBLASLt's FP8 matmuls take both operands with the reduction index
// contiguous (its "TN" layout) and leading dimensions that are multiples of
// 16 bytes: the codes are written as a row-major [out_rows, ld] matrix,
// ld = fp8_padded_k(k) (fp8_gemm_layout.h), the pad columns zero (0x00 is +0
// in both formats, so a padded product adds exact zeros: the same sums).

// Quantizes x, stored row-major [rows, cols], into q: row-major [cols, ld]
// (x transposed) when `transpose`, else [rows, ld]; the logical width (rows
// or cols) must be <= ld. Per element core/fp8.h's fp8_quantize(x, scale,
// format), the CPU emulation's code. Also, on the device's stream:
//   f.amax (if set):      max(amax, max |x|), NaN when x holds a NaN;
//   f.saturated (if set): += the count of |x * scale| above the format's max;
//   descale[0] = 1 / scale (exact: the scales are powers of two), the factor
//   cuBLASLt's A/B_SCALE_POINTER multiplies the product by.
void fp8_quantize_operand(CudaDevice& dev, uint8_t* q, int64_t ld, float* descale, const Tensor& x, int64_t rows,
                          int64_t cols, bool transpose, const GemmFp8Operand& f);

}  // namespace mpb::cuda
