// The float64 references: plain loops in double written from the
// mathematical definitions, shared by the op-check table (opcheck/cases_*.cpp)
// and the tests that still need them (test_cpu_gemm.cpp, test_approx_math.cpp,
// test_half_safe_constants.cpp).
//
// They never call the code under test (ops/*, backends/*). Values
// of 16-bit bit patterns are decoded with numerics_reference.h (value
// arithmetic, independent of core/numerics.h). The only things taken from the
// library are the Device API itself (to allocate, upload and download) and,
// where a test says so, core/numerics.h's encoders to *build* 16-bit inputs
// (those are proven bit-exact in test_numerics.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/numerics.h"
#include "opcheck/numerics_reference.h"

namespace mpb::opcheck {

constexpr double kU32 = 0x1p-24;  // unit roundoff of fp32 (half an ulp of 1)

// ---- random inputs -----------------------------------------------------------------
// Uniform in +-[lo, hi] with a random sign: never zero, never tiny, so relative
// tolerances stay meaningful and every mantissa bit is random.
inline std::vector<float> random_nonzero(size_t n, uint64_t seed, float lo = 0.1f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = neg(rng) ? -mag(rng) : mag(rng);
  return v;
}

inline std::vector<int32_t> random_labels(size_t n, int32_t classes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, classes - 1);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// ---- formats ------------------------------------------------------------------------
inline double bf16_value(uint16_t h) { return numref::bf16_to_double(h); }
inline double half_value(uint16_t h) { return numref::half_to_double(h); }

// Half an ulp of a format with `mant_bits` explicit mantissa bits at magnitude
// |x| (the ulp of the binade containing |x|), with the format's subnormal floor:
// the largest error of rounding a value of magnitude about |x| to nearest.
inline double half_ulp(double x, int mant_bits, int min_exp) {
  const double a = std::fabs(x);
  int e = min_exp;
  if (a > 0) {
    int fe;
    std::frexp(a, &fe);  // a in [2^(fe-1), 2^fe)
    e = std::max(fe - 1, min_exp);
  }
  return std::ldexp(1.0, e - mant_bits - 1);
}
inline double half_ulp_f32(double x) { return half_ulp(x, 23, -126); }
inline double half_ulp_f16(double x) { return half_ulp(x, 10, -14); }
inline double half_ulp_bf16(double x) { return half_ulp(x, 7, -126); }
inline double half_ulp_of(DType t, double x) {
  switch (t) {
    case DType::F16: return half_ulp_f16(x);
    case DType::BF16: return half_ulp_bf16(x);
    default: return half_ulp_f32(x);
  }
}

// ---- activations in double ------------------------------------------------------------
constexpr double kPi = 3.14159265358979323846;

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline double gelu(double x) {
  const double c = std::sqrt(2.0 / kPi);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
// Its derivative: 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2).
inline double gelu_grad(double x) {
  const double c = std::sqrt(2.0 / kPi);
  const double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}
// max |gelu'(x)| over the reals (attained near x = +-2.4): error in the
// pre-activation propagates to the activation by at most this factor.
constexpr double kGeluLipschitz = 1.13;

// ---- device helpers -------------------------------------------------------------------
template <typename T>
DeviceBuffer upload(Device& dev, const std::vector<T>& host, Shape shape, DType dtype,
                    MemCategory cat = MemCategory::Activations) {
  DeviceBuffer b = dev.alloc(shape, dtype, cat);
  if (b.bytes() != host.size() * sizeof(T)) throw std::logic_error("opcheck::upload: size mismatch");
  dev.upload(b, host.data());
  return b;
}

template <typename T>
std::vector<T> download(Device& dev, const Tensor& t) {
  std::vector<T> host(t.bytes() / sizeof(T));
  dev.download(host.data(), t);
  return host;
}

// Values of a downloaded tensor of any float dtype, exactly, as double.
inline std::vector<double> download_values(Device& dev, const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F32) {
    auto h = download<float>(dev, t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = h[i];
  } else {
    auto h = download<uint16_t>(dev, t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = t.dtype == DType::F16 ? half_value(h[i]) : bf16_value(h[i]);
  }
  return out;
}

// A float vector stored in `dt` (values first rounded to dt by core/numerics.h's
// encoders, proven in test_numerics.cpp): the buffer and the exact stored values.
struct Stored {
  DeviceBuffer buf;
  std::vector<double> value;
};
inline Stored store(Device& dev, const std::vector<float>& x, Shape shape, DType dt) {
  Stored s;
  s.value.resize(x.size());
  if (dt == DType::F32) {
    s.buf = upload(dev, x, shape, dt);
    for (size_t i = 0; i < x.size(); ++i) s.value[i] = x[i];
  } else {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      h[i] = dt == DType::F16 ? float_to_half_bits(x[i]) : float_to_bf16_bits(x[i]);
      s.value[i] = dt == DType::F16 ? half_value(h[i]) : bf16_value(h[i]);
    }
    s.buf = upload(dev, h, shape, dt);
  }
  return s;
}

// ---- CPU features ------------------------------------------------------------------------
// True when /proc/cpuinfo's "flags" line lists `flag` as a whole word.
inline bool cpuinfo_has_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    while (words >> w)
      if (w == flag) return true;
    return false;  // the first CPU's flags decide
  }
  return false;
}


// ---- op references (reference.cpp) ------------------------------------------------------
// GELU's fp32 evaluation error (ops/activation.h with ops/approx_math.h's
// tanh), the derivation in reference.cpp: forward and derivative at x.
double gelu_eval_tol(double x);
double gelu_grad_eval_tol(double x);

// One product op(A)[m,k] op(B)[k,n] (A stored [k,m] when ta, B [n,k] when
// tb) from the values the multiplier sees, starting at element offsets a0,
// b0: P = the exact product, S = op(|A|) op(|B|) (what rounding bounds scale with).
struct Product {
  std::vector<double> p, s;
};
Product gemm_ref(const std::vector<double>& a, const std::vector<double>& b, int64_t m, int64_t n, int64_t k,
                 bool ta, bool tb, int64_t a0 = 0, int64_t b0 = 0);

// LayerNorm over rows of C: mean, rstd = 1/sqrt(var + eps), y = xhat g + b;
// its gradient for upstream dy (dx, dgamma, dbeta), from the exact statistics.
struct LnRef {
  std::vector<double> mean, rstd, y;
};
LnRef layernorm_ref(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& b,
                    int64_t rows, int64_t C, double eps);
struct LnGrad {
  std::vector<double> dx, dg, db;
};
LnGrad layernorm_grad_ref(const std::vector<double>& x, const std::vector<double>& g, const std::vector<double>& dy,
                          const LnRef& f, int64_t rows, int64_t C);

// Softmax cross-entropy over rows of logits [B, C] with labels (< 0: an
// ignored row, no loss, probabilities still defined): the summed loss and the
// probabilities, with the bounds of an fp32 evaluation (reference.cpp).
struct XentRef {
  double loss = 0, loss_tol = 0;
  std::vector<double> probs, probs_tol;
};
XentRef xent_ref(const std::vector<double>& x, const std::vector<int32_t>& labels, int64_t B, int64_t C);

// One attention problem in exact values: q, k, v, dout [B,H,T,D], key_valid
// [B,T], the scale and the mask value as q's dtype holds it.
struct AttnInputs {
  int64_t B = 0, H = 0, T = 0, D = 0;
  double scale = 0, mask = 0;
  std::vector<int32_t> kv;
  std::vector<double> q, k, v, dout;
  // Dropout on the probabilities: per [B,H,T,T] element 0 or the fp32
  // 1/(1-p) the kernels multiply by (ops/dropout.h); empty: none.
  std::vector<double> drop;
  size_t at(int64_t bh, int64_t t, int64_t d) const { return static_cast<size_t>((bh * T + t) * D + d); }
  double drop_at(size_t e) const { return drop.empty() ? 1.0 : drop[e]; }
  // One more rounding (the fp32 product by 1/(1-p)) where dropout acts.
  double drop_u() const { return drop.empty() ? 0.0 : kU32; }
};
// The exact P, O, lse and bounds on a computed O / lse (reference.cpp).
struct AttnRef {
  std::vector<double> P, O, lse;
  std::vector<double> eps_p;  // per row: relative error bound of a computed P
  std::vector<double> tol_o, tol_lse;
};
// extra_p: extra relative error of P (a 16-bit probs tensor); gemm: the
// factor on dot-product bounds (2 for tensor-core GEMMs).
AttnRef attention_ref(const AttnInputs& p, double extra_p, DType out_dt, double gemm = 1.0);
struct AttnGradRef {
  std::vector<double> dq, dk, dv, tol_dq, tol_dk, tol_dv;
};
// d_err: per row, the absolute error of the computation's D_i = rowsum(P dP);
// extra_ds: extra relative error of dS (a 16-bit dscores tensor).
AttnGradRef attention_grad_ref(const AttnInputs& p, const AttnRef& f, const std::vector<double>& d_err,
                               double extra_ds, DType out_dt, double gemm = 1.0);
// D_i's error computed from a stored O (fused), or as rowsum(P dP) (unfused).
std::vector<double> d_err_fused(const AttnInputs& p, const AttnRef& f, const std::vector<double>& o_stored);
std::vector<double> d_err_unfused(const AttnInputs& p, const AttnRef& f, double gemm = 1.0);

// torch.optim.AdamW (amsgrad = False) on one element in double, with the sum
// of |terms| of m (for its bound).
struct AdamRef {
  double p = 0, m = 0, v = 0, m_mag = 0;
};
void adamw_ref_step(AdamRef& s, double g, const AdamWHyper& h);

// LAMB written from the paper (You et al. 2019, "Large Batch Optimization for
// Deep Learning: Training BERT in 76 minutes", Algorithm 2), sharing no code
// with ops/optimizer.h, with apex FusedLAMB's choices where the paper leaves
// one: the scaling function phi is the identity, the trust ratio is 1 when
// ||x|| or ||u|| is 0, bias correction can be turned off, and weight decay
// is left out of the tensors excluded from it.
struct PaperLamb {
  double lr, beta1, beta2, eps, wd;
  bool bias_correction;
};
// One step t (1-based) on one layer (parameter tensor) x with gradient g, in
// double; `decayed` false: lambda = 0 for this layer (biases, LayerNorm).
void paper_lamb_layer(std::vector<double>& x, const std::vector<double>& g, std::vector<double>& m,
                      std::vector<double>& v, const PaperLamb& h, bool decayed, long long t);
// One step t over a flat parameter vector split into `tensors` (each its own
// layer, paper_lamb_layer), with gradient g (already unscaled); the new
// weights are rounded to `param_t`, as the device stores them (apex O3: no
// fp32 master copy), so the reference follows the device's trajectory.
void paper_lamb_step(std::vector<double>& x, std::vector<double>& m, std::vector<double>& v,
                     const std::vector<double>& g, const std::vector<LambTensor>& tensors, const PaperLamb& h,
                     DType param_t, long long t);

}  // namespace mpb::opcheck
