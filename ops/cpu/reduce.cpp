#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_ops.h"
#include "ops/cpu/dispatch.h"
#include "ops/dtype_io.h"

namespace mpb::cpu {

using scalar::load_f32;

namespace {
// Fixed-size chunks reduced in index order: the result does not depend on the
// number of threads.
constexpr int64_t kChunk = 1 << 15;
}  // namespace

TensorStats stats(const Tensor& t) {
  const int64_t n = t.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> sq(static_cast<size_t>(chunks));
  std::vector<int64_t> bad(static_cast<size_t>(chunks));
  dispatch_float(t.dtype, [&](auto T) {
    using E = scalar::Elem<decltype(T)::value>;
    const void* p = t.data;
#pragma omp parallel for
    for (int64_t ch = 0; ch < chunks; ++ch) {
      double s = 0.0;
      int64_t b = 0;
      const int64_t end = std::min(n, (ch + 1) * kChunk);
      // Branch-free so it vectorises: a non-finite element counts and adds 0.
#pragma omp simd reduction(+ : s, b)
      for (int64_t i = ch * kChunk; i < end; ++i) {
        const float x = E::load(p, i);
        const bool finite = std::fabs(x) <= FLT_MAX;  // false for inf and NaN
        const double d = finite ? double(x) : 0.0;
        s += d * d;
        b += finite ? 0 : 1;
      }
      sq[static_cast<size_t>(ch)] = s;
      bad[static_cast<size_t>(ch)] = b;
    }
  });
  TensorStats out;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    out.sum_squares += sq[static_cast<size_t>(ch)];
    out.nonfinite += bad[static_cast<size_t>(ch)];
  }
  return out;
}

ExponentHistogram exponent_histogram(const Tensor& t, int lo, int nbins) {
  require(nbins >= 1, "exponent_histogram", "nbins must be >= 1");
  ExponentHistogram h;
  h.lo = lo;
  h.bins.assign(static_cast<size_t>(nbins), 0);
  const int64_t n = t.numel();
  h.total = n;
  for (int64_t i = 0; i < n; ++i) {
    float x = load_f32(t.data, t.dtype, i);
    if (!std::isfinite(x)) { ++h.nonfinite; continue; }
    if (x == 0.0f) { ++h.zeros; continue; }
    int e;
    std::frexp(x, &e);  // |x| = f * 2^e, f in [0.5, 1)  =>  floor(log2|x|) = e - 1
    int bin = e - 1 - lo;
    bin = bin < 0 ? 0 : (bin >= nbins ? nbins - 1 : bin);
    ++h.bins[static_cast<size_t>(bin)];
  }
  return h;
}

}  // namespace mpb::cpu
