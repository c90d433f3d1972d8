// FP8 GEMM operands (fp8_quantize.h): one pass over the operand that
// quantizes, transposes where cuBLASLt's layout needs it, pads the reduction
// index to 16, and folds max |x| and the saturated count into the operand's
// device scalars.
//
// Layout of the work: 32 x 32 tiles of the output q, 256-thread blocks (32 x
// 8, four rows per thread). A block reads its tile's source elements along
// the source rows (coalesced), quantizes them into shared memory, then writes
// the codes along the output rows (coalesced), so a transposing operand costs
// the same as a copying one.
//
// amax: each warp reduces its threads' max |x| and NaN flags and folds them
// in with one atomicMax on the float's bits. For non-negative floats the
// IEEE order is the order of their bit patterns as ints, the caller zeroes
// amax (+0), and a NaN is stored as the positive quiet NaN 0x7FC00000, above
// every finite value and +inf: so max wins, and a NaN, once folded in, stays,
// as on the CPU (backends/cpu/gemm_onednn.cpp, quantize_operand_fp8).
#include "backends/cuda/fp8_quantize.h"

#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_device_impl.h"
#include "backends/cuda/kernel_util.cuh"
#include "core/fp8.h"
#include "ops/dtype_io.h"

namespace mpb::cuda {

namespace {

constexpr int kTile = 32;
constexpr int kTileRows = kThreads / kTile;  // 8: each thread handles kTile / kTileRows rows
static_assert(kTile % kTileRows == 0, "a block covers its tile in whole passes");
constexpr int kMaxGridY = 65535;
constexpr int kNaNBits = 0x7FC00000;

template <DType T, bool Transpose>
__global__ void fp8_quantize_kernel(uint8_t* q, int64_t ld, int64_t out_rows, float* descale, const void* x,
                                    int64_t rows, int64_t cols, const float* scale_ptr, Fp8Format fmt, float* amax,
                                    float* saturated) {
  using E = scalar::Elem<T>;
  // +4: the codes of a column of the tile are read by one warp in the
  // transposed write; the padding spreads them over the banks.
  __shared__ uint8_t tile[kTile][kTile + 4];
  const float scale = *scale_ptr;
  const int tx = threadIdx.x % kTile, ty = threadIdx.x / kTile;
  float local_max = 0.0f;
  bool nan = false;
  int sat = 0;
  const int64_t ytiles = (out_rows + kTile - 1) / kTile;
  for (int64_t by = blockIdx.y; by < ytiles; by += gridDim.y) {
    const int64_t r0 = by * kTile, c0 = static_cast<int64_t>(blockIdx.x) * kTile;  // the output tile's corner
    // Source tile: rows [c0, +32) x columns [r0, +32) of x when transposed, else rows [r0, ..) x columns [c0, ..).
    const int64_t sr0 = Transpose ? c0 : r0, sc0 = Transpose ? r0 : c0;
    for (int j = ty; j < kTile; j += kTileRows) {
      const int64_t sr = sr0 + j, sc = sc0 + tx;
      uint8_t code = 0;  // pad (or past the edge): +0
      if (sr < rows && sc < cols) {
        const float v = E::load(x, sr * cols + sc);
        const Fp8Quantized qv = fp8_quantize(v, scale, fmt);
        code = qv.code;
        sat += qv.saturated ? 1 : 0;
        if (v != v) nan = true;
        else local_max = fmaxf(local_max, fabsf(v));
      }
      tile[j][tx] = code;
    }
    __syncthreads();
    for (int j = ty; j < kTile; j += kTileRows) {
      const int64_t orow = r0 + j, ocol = c0 + tx;
      if (orow < out_rows && ocol < ld) q[orow * ld + ocol] = Transpose ? tile[tx][j] : tile[j][tx];
    }
    __syncthreads();  // the tile is rewritten by the next pass
  }
  // Fold this warp's max, NaN and count into the operand's scalars.
  for (int off = 16; off > 0; off >>= 1) {
    local_max = fmaxf(local_max, __shfl_xor_sync(0xffffffffu, local_max, off));
    sat += __shfl_xor_sync(0xffffffffu, sat, off);
  }
  nan = __any_sync(0xffffffffu, nan);
  if ((threadIdx.x & 31u) == 0) {
    if (amax != nullptr) {
      if (nan) atomicMax(reinterpret_cast<int*>(amax), kNaNBits);
      else if (local_max > 0.0f) atomicMax(reinterpret_cast<int*>(amax), __float_as_int(local_max));
    }
    if (saturated != nullptr && sat > 0) atomicAdd(saturated, static_cast<float>(sat));  // <= 128: exact
  }
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) descale[0] = 1.0f / scale;
}

}  // namespace

void fp8_quantize_operand(CudaDevice& dev, uint8_t* q, int64_t ld, float* descale, const Tensor& x, int64_t rows,
                          int64_t cols, bool transpose, const GemmFp8Operand& f) {
  const int64_t out_rows = transpose ? cols : rows, width = transpose ? rows : cols;
  require(width <= ld, "gemm", "FP8 operand: the padded leading dimension is narrower than the operand");
  const int64_t xtiles = (ld + kTile - 1) / kTile, ytiles = (out_rows + kTile - 1) / kTile;
  require(xtiles <= 0x7FFFFFFF, "gemm", "FP8 operand too wide for one grid");
  const dim3 grid(static_cast<unsigned>(xtiles), static_cast<unsigned>(ytiles < kMaxGridY ? ytiles : kMaxGridY));
  float* amax = f.amax.empty() ? nullptr : static_cast<float*>(f.amax.data);
  float* sat = f.saturated.empty() ? nullptr : static_cast<float*>(f.saturated.data);
  const float* scale = static_cast<const float*>(f.scale.data);
  dispatch_float(x.dtype, "gemm", [&](auto T) {
    constexpr DType t = decltype(T)::value;
    if (transpose)
      fp8_quantize_kernel<t, true><<<grid, kThreads, 0, dev.stream()>>>(q, ld, out_rows, descale, x.data, rows, cols,
                                                                         scale, f.format, amax, sat);
    else
      fp8_quantize_kernel<t, false><<<grid, kThreads, 0, dev.stream()>>>(q, ld, out_rows, descale, x.data, rows,
                                                                          cols, scale, f.format, amax, sat);
    MPB_CHECK_LAUNCH("fp8_quantize_kernel");
  });
}

}  // namespace mpb::cuda
