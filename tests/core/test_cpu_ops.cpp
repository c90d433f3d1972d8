// The CPU backend's element-wise ops, losses, reductions and optimizers
// against float64 references written here (ops/cpu/*.cpp through Device).
//
// What is proven
//  * fill / cast / scale / add_bias: bit-exact "compute in fp32, store in the
//    destination dtype rounding to nearest even" for fp32, fp16 and bf16, on
//    sizes below and above the OpenMP threshold (exact references: the double
//    sum/product of two floats rounded to fp32 is the fp32 operation).
//  * activation_forward/backward: GELU (tanh form) and its derivative against
//    the double formulas, within a bound derived from approx_math.h's tanh
//    accuracy; ReLU exactly; fp32 and bf16 storage.
//  * bias_grad: column sums, Overwrite vs Accumulate.
//  * softmax cross-entropy: summed loss vs a double log-sum-exp, probs vs the
//    double softmax, dlogits = (probs - onehot) * grad_scale; fused == unfused
//    bit for bit (loss and dlogits), with grad_scale.
//  * count_correct with ties (lowest index wins), incl. ties created by bf16.
//  * stats (sum of squares, non-finite count) and exponent_histogram on a
//    hand-made tensor with known exponents.
//  * adamw_step vs PyTorch's AdamW in double for 3 steps; fused == unfused bit
//    for bit; sgd_step vs torch.optim.SGD (momentum, weight decay) in double.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/numerics.h"
#include "tests/core/reference.h"

namespace {

using namespace mpb;
using testref::kU32;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

using testref::store;
using testref::Stored;

// The bits an fp32 value gets when stored in dt (fp32: its own bits).
uint32_t stored_bits(float f, DType dt) {
  switch (dt) {
    case DType::F16: return float_to_half_bits(f);
    case DType::BF16: return float_to_bf16_bits(f);
    default: return bits(f);
  }
}
// The value an fp32-representable x takes when stored in dt.
double stored_value(double x, DType dt) {
  const float f = static_cast<float>(x);
  switch (dt) {
    case DType::F16: return testref::half_value(float_to_half_bits(f));
    case DType::BF16: return testref::bf16_value(float_to_bf16_bits(f));
    default: return f;
  }
}
std::vector<uint32_t> download_bits(Device& dev, const Tensor& t) {
  std::vector<uint32_t> out(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::F32) {
    auto h = testref::download<float>(dev, t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bits(h[i]);
  } else {
    auto h = testref::download<uint16_t>(dev, t);
    for (size_t i = 0; i < out.size(); ++i) out[i] = h[i];
  }
  return out;
}

// Random floats with magnitudes spread over 2^[-30, 20] (fp16 subnormals,
// normals and overflow; bf16 everywhere), random signs.
std::vector<float> wide_random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> e(-30.0, 20.0);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>((neg(rng) ? -1.0 : 1.0) * std::exp2(e(rng)));
  return v;
}

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};
// Below and above the element-wise ops' OpenMP threshold (2^14).
const int64_t kSizes[] = {37, 40'009};

// ---------------------------------------------------------------------------------
TEST(CpuOps, Fill) {
  auto dev = make_cpu_device();
  for (DType dt : kFloatTypes)
    for (int64_t n : kSizes)
      for (float v : {0.3f, -1.0f / 3.0f, 0.0f, 70000.0f}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " v=" + std::to_string(v));
        DeviceBuffer b = dev->alloc(Shape{n}, dt, MemCategory::Activations);
        dev->fill(b, v);
        const auto got = download_bits(*dev, b);
        for (uint32_t g : got) ASSERT_EQ(g, stored_bits(v, dt));
      }
}

TEST(CpuOps, CastRoundsToNearestEven) {
  auto dev = make_cpu_device();
  for (int64_t n : kSizes) {
    const std::vector<float> x = wide_random(static_cast<size_t>(n), 11 + static_cast<uint64_t>(n));
    DeviceBuffer src = testref::upload(*dev, x, Shape{n}, DType::F32);
    for (DType mid : {DType::F16, DType::BF16}) {
      SCOPED_TRACE(std::string("via ") + dtype_name(mid) + " n=" + std::to_string(n));
      DeviceBuffer m = dev->alloc(Shape{n}, mid, MemCategory::Activations);
      DeviceBuffer back = dev->alloc(Shape{n}, DType::F32, MemCategory::Activations);
      dev->cast(m, src);
      dev->cast(back, m);
      const auto got = testref::download<float>(*dev, back);
      for (size_t i = 0; i < got.size(); ++i) {
        const float want = mid == DType::F16 ? round_to_half(x[i]) : round_to_bf16(x[i]);
        ASSERT_EQ(bits(got[i]), bits(want)) << "x = " << x[i];
      }
      // 16-bit -> the other 16-bit format: the stored value, rounded again.
      const DType other = mid == DType::F16 ? DType::BF16 : DType::F16;
      DeviceBuffer o = dev->alloc(Shape{n}, other, MemCategory::Activations);
      dev->cast(o, m);
      const auto got_o = download_bits(*dev, o);
      const auto mid_vals = testref::download_values(*dev, m);
      for (size_t i = 0; i < got_o.size(); ++i)
        ASSERT_EQ(got_o[i], stored_bits(static_cast<float>(mid_vals[i]), other)) << "x = " << x[i];
    }
  }
  DeviceBuffer a = dev->alloc(Shape{4}, DType::F32, MemCategory::Activations);
  DeviceBuffer b = dev->alloc(Shape{5}, DType::F16, MemCategory::Activations);
  EXPECT_THROW(dev->cast(b, a), std::invalid_argument);
}

TEST(CpuOps, ScaleIsOneFp32Multiply) {
  auto dev = make_cpu_device();
  for (DType dt : kFloatTypes)
    for (int64_t n : kSizes) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      Stored s = store(*dev, testref::random_nonzero(static_cast<size_t>(n), 21), Shape{n}, dt);
      const float f = -0.3712f;
      dev->scale(s.buf, f);
      const auto got = download_bits(*dev, s.buf);
      for (size_t i = 0; i < got.size(); ++i) {
        // The double product of two floats is exact; rounding it to fp32 is
        // the fp32 multiply. Then the store rounds to dt.
        const float prod = static_cast<float>(s.value[i] * static_cast<double>(f));
        ASSERT_EQ(got[i], stored_bits(prod, dt)) << "i = " << i;
      }
    }
}

TEST(CpuOps, AddBias) {
  auto dev = make_cpu_device();
  const Shape shapes[] = {Shape{37, 29}, Shape{3, 5, 29}, Shape{311, 129}};
  for (DType dt : kFloatTypes)
    for (DType bdt : {DType::F32, dt})  // fp32 bias, or the parameters' own dtype
      for (const Shape& sh : shapes) {
        SCOPED_TRACE(std::string("y ") + dtype_name(dt) + ", bias " + dtype_name(bdt) + " " + sh.str());
        const int64_t cols = sh.cols();
        Stored y = store(*dev, testref::random_nonzero(static_cast<size_t>(sh.numel()), 31), sh, dt);
        Stored b = store(*dev, testref::random_nonzero(static_cast<size_t>(cols), 32), Shape{cols}, bdt);
        dev->add_bias(y.buf, b.buf);
        const auto got = download_bits(*dev, y.buf);
        for (size_t i = 0; i < got.size(); ++i) {
          // |y|, |b| in [0.1, 1]: the double sum is exact, so its fp32 rounding is the fp32 add.
          const float sum = static_cast<float>(y.value[i] + b.value[i % static_cast<size_t>(cols)]);
          ASSERT_EQ(got[i], stored_bits(sum, dt)) << "i = " << i;
        }
      }
  DeviceBuffer y = dev->alloc(Shape{4, 3}, DType::F32, MemCategory::Activations);
  DeviceBuffer b4 = dev->alloc(Shape{4}, DType::F32, MemCategory::Params);
  EXPECT_THROW(dev->add_bias(y, b4), std::invalid_argument);
}

// ---------------------------------------------------------------------------------
// GELU tolerances (fp32 evaluation; derivation):
//  t = tanh_approx(u) has |t - tanh(u)| <= eps_t = 2e-7 (approx_math.h; the
//  exhaustive maximum over fp32 u in [-20, 20] is 1.79e-7). u itself is
//  computed with ~4 roundings (relative 4u), which moves tanh by at most
//  4u |u| sech^2(u) <= 4u * 0.45 = 1.1e-7. So |t_err| <= 3.1e-7.
//  gelu = 0.5 x (1 + t): error 0.5 |x| |t_err| + 2 roundings of <= |x|.
//  gelu' = 0.5 (1 + t) + 0.5 x (1 - t^2) du, du = c (1 + 3 a x^2): the t error
//  enters with weight 0.5 + |x t| du; ~6 roundings of terms <= 1 + 0.5 |x| du.
//  (Near saturation 1 - t^2 cancels, which is what makes the |x| du weight
//  real: an fp32 gelu' at |x| ~ 5 is only good to ~1e-5 absolute.)
constexpr double kTanhErr = 2e-7 + 1.1e-7;
constexpr double kGeluC = 0.79788456080286535588;  // sqrt(2/pi)

double gelu_tol(double x) { return 0.5 * std::fabs(x) * kTanhErr + 3 * kU32 * std::fabs(x) + 1e-12; }
double gelu_grad_tol(double x) {
  const double du = kGeluC * (1.0 + 3.0 * 0.044715 * x * x);
  return kTanhErr * (0.5 + std::fabs(x) * du) + 6 * kU32 * (1.0 + 0.5 * std::fabs(x) * du);
}

// Inputs: +-[0.1, 1] and a sweep of [-8, 8] (saturated tails included).
std::vector<float> activation_inputs(size_t n, uint64_t seed) {
  std::vector<float> x = testref::random_nonzero(n / 2, seed);
  const size_t rest = n - x.size();
  for (size_t i = 0; i < rest; ++i) x.push_back(static_cast<float>(-8.0 + 16.0 * (static_cast<double>(i) + 0.5) / rest));
  return x;
}

struct ActTypes {
  DType in, out;
};
const ActTypes kActTypes[] = {
    {DType::F32, DType::F32}, {DType::BF16, DType::BF16}, {DType::F32, DType::BF16}, {DType::BF16, DType::F32}};

TEST(CpuOps, ActivationForward) {
  auto dev = make_cpu_device();
  double worst_ratio = 0;
  for (const ActTypes& ty : kActTypes)
    for (int64_t n : kSizes)
      for (Activation act : {Activation::Gelu, Activation::Relu}) {
        SCOPED_TRACE(std::string(act == Activation::Gelu ? "gelu " : "relu ") + dtype_name(ty.in) + "->" +
                     dtype_name(ty.out) + " n=" + std::to_string(n));
        Stored in = store(*dev, activation_inputs(static_cast<size_t>(n), 41), Shape{n}, ty.in);
        DeviceBuffer out = dev->alloc(Shape{n}, ty.out, MemCategory::Activations);
        dev->activation_forward(act, out, in.buf);
        const auto got = testref::download_values(*dev, out);
        for (size_t i = 0; i < got.size(); ++i) {
          const double x = in.value[i];
          if (act == Activation::Relu) {  // exact, then the store's rounding
            ASSERT_EQ(got[i], stored_value(x > 0 ? x : 0.0, ty.out)) << "x = " << x;
            continue;
          }
          const double ref = testref::gelu(x);
          const double t = gelu_tol(x);
          const double tol = ty.out == DType::F32 ? t : t + testref::half_ulp_of(ty.out, std::fabs(ref) + t);
          const double err = std::fabs(got[i] - ref);
          if (ty.out == DType::F32) worst_ratio = std::max(worst_ratio, err / tol);
          ASSERT_LE(err, tol) << "gelu(" << x << ") = " << got[i] << ", reference " << ref;
        }
      }
  RecordProperty("gelu_worst_error_over_tolerance", std::to_string(worst_ratio));
}

TEST(CpuOps, ActivationBackward) {
  auto dev = make_cpu_device();
  double worst_ratio = 0;
  for (const ActTypes& ty : kActTypes)
    for (int64_t n : kSizes)
      for (Activation act : {Activation::Gelu, Activation::Relu}) {
        SCOPED_TRACE(std::string(act == Activation::Gelu ? "gelu " : "relu ") + dtype_name(ty.in) + "->" +
                     dtype_name(ty.out) + " n=" + std::to_string(n));
        Stored pre = store(*dev, activation_inputs(static_cast<size_t>(n), 51), Shape{n}, ty.in);
        Stored dout = store(*dev, testref::random_nonzero(static_cast<size_t>(n), 52), Shape{n}, ty.in);
        DeviceBuffer din = dev->alloc(Shape{n}, ty.out, MemCategory::Activations);
        dev->activation_backward(act, din, dout.buf, pre.buf);
        const auto got = testref::download_values(*dev, din);
        for (size_t i = 0; i < got.size(); ++i) {
          const double x = pre.value[i], g = dout.value[i];
          if (act == Activation::Relu) {  // dout or 0 exactly, then the store's rounding
            ASSERT_EQ(got[i], stored_value(x > 0 ? g : 0.0, ty.out)) << "x = " << x;
            continue;
          }
          const double ref = g * testref::gelu_grad(x);
          // times dout (|g| <= 1), plus the rounding of that product
          const double t = std::fabs(g) * gelu_grad_tol(x) + kU32 * std::fabs(ref);
          const double tol = ty.out == DType::F32 ? t : t + testref::half_ulp_of(ty.out, std::fabs(ref) + t);
          const double err = std::fabs(got[i] - ref);
          if (ty.out == DType::F32) worst_ratio = std::max(worst_ratio, err / tol);
          ASSERT_LE(err, tol) << "dout " << g << " * gelu'(" << x << ") = " << got[i] << ", reference " << ref;
        }
      }
  RecordProperty("gelu_grad_worst_error_over_tolerance", std::to_string(worst_ratio));
  DeviceBuffer a = dev->alloc(Shape{4}, DType::F32, MemCategory::Activations);
  DeviceBuffer b = dev->alloc(Shape{5}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(dev->activation_backward(Activation::Gelu, a, a, b), std::invalid_argument);
  EXPECT_THROW(dev->activation_forward(Activation::Relu, a, b), std::invalid_argument);
}

TEST(CpuOps, BiasGradOverwriteAndAccumulate) {
  auto dev = make_cpu_device();
  const Shape shapes[] = {Shape{5, 3}, Shape{300, 130}, Shape{4, 25, 131}};
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (DType dbt : {DType::F32, DType::BF16})  // fp32 master gradient, or a half parameter's own dtype
      for (const Shape& sh : shapes)
        for (GradMode mode : {GradMode::Overwrite, GradMode::Accumulate}) {
          SCOPED_TRACE(std::string("dy ") + dtype_name(dt) + ", db " + dtype_name(dbt) + " " + sh.str() +
                       (mode == GradMode::Overwrite ? " overwrite" : " accumulate"));
          const int64_t rows = sh.rows(), cols = sh.cols();
          Stored dy = store(*dev, testref::random_nonzero(static_cast<size_t>(sh.numel()), 61), sh, dt);
          // Overwrite must ignore what is there (garbage 123); Accumulate adds to it.
          const std::vector<float> db0 = mode == GradMode::Overwrite
                                             ? std::vector<float>(static_cast<size_t>(cols), 123.0f)
                                             : testref::random_nonzero(static_cast<size_t>(cols), 62);
          Stored db = store(*dev, db0, Shape{cols}, dbt);
          dev->bias_grad(db.buf, dy.buf, mode);
          const auto got = testref::download_values(*dev, db.buf);
          for (int64_t c = 0; c < cols; ++c) {
            double sum = mode == GradMode::Accumulate ? db.value[static_cast<size_t>(c)] : 0.0;
            double mag = std::fabs(sum);
            for (int64_t r = 0; r < rows; ++r) {
              sum += dy.value[static_cast<size_t>(r * cols + c)];
              mag += std::fabs(dy.value[static_cast<size_t>(r * cols + c)]);
            }
            // fp32 summation of rows + 1 terms in any order: gamma_(rows+1) * sum |terms|;
            // a bf16 db then rounds once more.
            double tol = static_cast<double>(rows + 2) * kU32 * mag;
            if (dbt != DType::F32) tol += testref::half_ulp_bf16(std::fabs(sum) + tol);
            ASSERT_NEAR(got[static_cast<size_t>(c)], sum, tol) << "column " << c;
          }
        }
  DeviceBuffer dy = dev->alloc(Shape{4, 3}, DType::F32, MemCategory::Activations);
  DeviceBuffer db = dev->alloc(Shape{4}, DType::F32, MemCategory::Grads);
  EXPECT_THROW(dev->bias_grad(db, dy, GradMode::Overwrite), std::invalid_argument);
}

// ---------------------------------------------------------------------------------
// Softmax cross-entropy. Logits spread over [-4, 4], B and C odd-ish.
struct XentRef {
  double loss = 0, loss_tol = 0;
  std::vector<double> probs, probs_tol;
};

XentRef xent_reference(const std::vector<double>& x, const std::vector<int32_t>& y, int64_t B, int64_t C) {
  XentRef r;
  r.probs.resize(x.size());
  r.probs_tol.resize(x.size());
  for (int64_t b = 0; b < B; ++b) {
    const double* row = &x[static_cast<size_t>(b * C)];
    double mx = row[0];
    for (int64_t c = 1; c < C; ++c) mx = std::max(mx, row[c]);
    double sum = 0, spread = 0;
    for (int64_t c = 0; c < C; ++c) {
      sum += std::exp(row[c] - mx);
      spread = std::max(spread, mx - row[c]);
    }
    const double row_loss = std::log(sum) - (row[y[static_cast<size_t>(b)]] - mx);
    r.loss += row_loss;
    // fp32 evaluation: x - max rounds (relative u of <= spread, carried into
    // exp as an absolute u*spread), expf <= 1 ulp, a C-term sum (C u
    // relative), logf <= 1 ulp, two more subtractions: per row
    // (C + 4 + 2 spread) u + 3 u |row loss|.
    r.loss_tol += (static_cast<double>(C) + 4 + 2 * spread) * kU32 + 3 * kU32 * std::fabs(row_loss) + 2 * kU32 * std::log(sum);
    for (int64_t c = 0; c < C; ++c) {
      const auto i = static_cast<size_t>(b * C + c);
      r.probs[i] = std::exp(row[c] - mx) / sum;
      // relative: (x - max) rounding, expf, the sum, the division
      r.probs_tol[i] = (static_cast<double>(C) + 4 + spread) * kU32 * r.probs[i];
    }
  }
  return r;
}

TEST(CpuOps, SoftmaxXentForwardBackwardFused) {
  auto dev = make_cpu_device();
  const int64_t B = 50, C = 37;
  const std::vector<int32_t> labels = testref::random_labels(static_cast<size_t>(B), static_cast<int32_t>(C), 71);
  DeviceBuffer lab = testref::upload(*dev, labels, Shape{B}, DType::I32);
  std::vector<float> logits_f = testref::random_nonzero(static_cast<size_t>(B * C), 72);
  for (float& v : logits_f) v *= 4.0f;

  for (DType ldt : {DType::F32, DType::BF16})
    for (float grad_scale : {1.0f / 50.0f, 1024.0f / 50.0f})
      for (DType ddt : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(std::string("logits ") + dtype_name(ldt) + ", dlogits " + dtype_name(ddt) + ", grad_scale " +
                     std::to_string(grad_scale));
        Stored logits = store(*dev, logits_f, Shape{B, C}, ldt);
        const XentRef ref = xent_reference(logits.value, labels, B, C);

        DeviceBuffer probs = dev->alloc(Shape{B, C}, DType::F32, MemCategory::Activations);
        const double loss = dev->softmax_xent_forward(probs, logits.buf, lab);
        EXPECT_NEAR(loss, ref.loss, ref.loss_tol);
        const auto p = testref::download<float>(*dev, probs);
        for (size_t i = 0; i < p.size(); ++i) ASSERT_NEAR(p[i], ref.probs[i], ref.probs_tol[i]) << "prob " << i;

        DeviceBuffer d_unfused = dev->alloc(Shape{B, C}, ddt, MemCategory::Activations);
        dev->softmax_xent_backward(d_unfused, probs, lab, grad_scale);
        const auto d = testref::download_values(*dev, d_unfused);
        for (int64_t b = 0; b < B; ++b)
          for (int64_t c = 0; c < C; ++c) {
            const auto i = static_cast<size_t>(b * C + c);
            const double onehot = c == labels[static_cast<size_t>(b)] ? 1.0 : 0.0;
            // From the device's own probs: (p - onehot) * grad_scale, two fp32 roundings.
            const double want = (static_cast<double>(p[i]) - onehot) * grad_scale;
            const double t = 2.0000001 * kU32 * std::fabs(want);
            ASSERT_NEAR(d[i], want, t + (ddt == DType::F32 ? 0.0 : testref::half_ulp_bf16(std::fabs(want) + t)))
                << "dlogits[" << b << "," << c << "] from probs";
            // End to end against the double softmax.
            const double want2 = (ref.probs[i] - onehot) * grad_scale;
            const double t2 = ref.probs_tol[i] * grad_scale + 2.0000001 * kU32 * std::fabs(want2);
            ASSERT_NEAR(d[i], want2, t2 + (ddt == DType::F32 ? 0.0 : testref::half_ulp_bf16(std::fabs(want2) + t2)))
                << "dlogits[" << b << "," << c << "] vs double softmax";
          }

        // Fused: the same per-element expression, so the same bits and the same loss.
        DeviceBuffer d_fused = dev->alloc(Shape{B, C}, ddt, MemCategory::Activations);
        const double loss_fused = dev->softmax_xent_fused(d_fused, logits.buf, lab, grad_scale);
        EXPECT_EQ(loss_fused, loss);
        EXPECT_EQ(download_bits(*dev, d_fused), download_bits(*dev, d_unfused));
      }

  // Bad arguments: labels not int32 / wrong count, output size.
  DeviceBuffer logits = dev->alloc(Shape{4, 3}, DType::F32, MemCategory::Activations);
  DeviceBuffer probs = dev->alloc(Shape{4, 3}, DType::F32, MemCategory::Activations);
  DeviceBuffer probs_small = dev->alloc(Shape{3, 3}, DType::F32, MemCategory::Activations);
  DeviceBuffer lab_f = dev->alloc(Shape{4}, DType::F32, MemCategory::Activations);
  DeviceBuffer lab3 = dev->alloc(Shape{3}, DType::I32, MemCategory::Activations);
  EXPECT_THROW(dev->softmax_xent_forward(probs, logits, lab_f), std::invalid_argument);
  EXPECT_THROW(dev->softmax_xent_forward(probs, logits, lab3), std::invalid_argument);
  DeviceBuffer lab4 = testref::upload(*dev, std::vector<int32_t>{0, 1, 2, 0}, Shape{4}, DType::I32);
  EXPECT_THROW(dev->softmax_xent_forward(probs_small, logits, lab4), std::invalid_argument);
  EXPECT_THROW(dev->softmax_xent_fused(probs_small, logits, lab4, 1.0f), std::invalid_argument);
}

TEST(CpuOps, CountCorrectTiesGoToLowestIndex) {
  auto dev = make_cpu_device();
  const int64_t C = 6;
  // clang-format off
  const std::vector<float> logits{
      0.1f, 0.2f, 0.3f, 0.9f, 0.4f, 0.5f,        // argmax 3
      0.1f, 0.8f, 0.3f, 0.2f, 0.8f, 0.5f,        // tie 1 and 4 -> 1
      0.1f, 0.8f, 0.3f, 0.2f, 0.8f, 0.5f,        // tie 1 and 4 -> 1
      0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f,        // all equal -> 0
      -3.f, -2.f, -4.f, -5.f, -6.f, -1.f,        // argmax 5 (last column)
      -3.f, -2.f, -1.f, -5.f, -6.f, -7.f,        // argmax 2
      0.1f, 1.0f, 0.2f, 1.001f, 0.3f, 0.4f,      // fp32: 3; bf16: 1.001 -> 1.0, tie -> 1
  };
  // clang-format on
  const std::vector<int32_t> labels{3, 1, 4, 0, 5, 0, 3};
  const int64_t B = static_cast<int64_t>(labels.size());
  DeviceBuffer lab = testref::upload(*dev, labels, Shape{B}, DType::I32);
  Stored l32 = store(*dev, logits, Shape{B, C}, DType::F32);
  Stored l16 = store(*dev, logits, Shape{B, C}, DType::BF16);
  // correct: rows 0, 1, 3, 4, 6(fp32 only)
  EXPECT_EQ(dev->count_correct(l32.buf, lab), 5);
  EXPECT_EQ(dev->count_correct(l16.buf, lab), 4);

  // Random rows vs a double argmax (lowest index on ties).
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const int64_t Bn = 2000, Cn = 10;
    Stored x = store(*dev, testref::random_nonzero(static_cast<size_t>(Bn * Cn), 81), Shape{Bn, Cn}, dt);
    std::vector<int32_t> y = testref::random_labels(static_cast<size_t>(Bn), 10, 82);
    // Make about half the labels right, so the count is not trivially small.
    int64_t want = 0;
    for (int64_t b = 0; b < Bn; ++b) {
      int32_t best = 0;
      for (int32_t c = 1; c < Cn; ++c)
        if (x.value[static_cast<size_t>(b * Cn + c)] > x.value[static_cast<size_t>(b * Cn + best)]) best = c;
      if (b % 2 == 0) y[static_cast<size_t>(b)] = best;
      want += y[static_cast<size_t>(b)] == best;
    }
    DeviceBuffer yl = testref::upload(*dev, y, Shape{Bn}, DType::I32);
    EXPECT_EQ(dev->count_correct(x.buf, yl), want) << dtype_name(dt);
  }
}

// ---------------------------------------------------------------------------------
TEST(CpuOps, StatsSumOfSquaresAndNonfinite) {
  auto dev = make_cpu_device();
  for (DType dt : kFloatTypes)
    for (int64_t n : {int64_t{7}, int64_t{100'003}}) {  // 100003 spans 4 reduction chunks of 2^15
      SCOPED_TRACE(std::string(dtype_name(dt)) + " n=" + std::to_string(n));
      std::vector<float> x = testref::random_nonzero(static_cast<size_t>(n), 91, 0.1f, 8.0f);
      Stored s = store(*dev, x, Shape{n}, dt);
      // Plant +inf, NaN and -inf directly in the stored bits.
      std::vector<size_t> planted{1, static_cast<size_t>(n / 2), static_cast<size_t>(n - 1)};
      if (dt == DType::F32) {
        auto h = testref::download<float>(*dev, s.buf);
        h[planted[0]] = INFINITY, h[planted[1]] = std::nanf(""), h[planted[2]] = -INFINITY;
        dev->upload(s.buf, h.data());
      } else {
        auto h = testref::download<uint16_t>(*dev, s.buf);
        const bool f16 = dt == DType::F16;
        h[planted[0]] = f16 ? 0x7C00 : 0x7F80, h[planted[1]] = f16 ? 0x7E00 : 0x7FC0,
        h[planted[2]] = f16 ? 0xFC00 : 0xFF80;
        dev->upload(s.buf, h.data());
      }
      double want = 0;
      for (size_t i = 0; i < s.value.size(); ++i)
        if (i != planted[0] && i != planted[1] && i != planted[2]) want += s.value[i] * s.value[i];
      const TensorStats st = dev->stats(s.buf);
      EXPECT_EQ(st.nonfinite, 3);
      // The device sums fp32 squares in fp32 over blocks of 256 (16 SIMD
      // lanes of 16 terms, then a lane tree of depth 4) and blocks in double:
      // all terms are positive, so the relative error is at most about
      // (1 + 16 + 4) * 2^-24 < 2^-19 (core/device.h's stats contract).
      EXPECT_NEAR(st.sum_squares, want, std::ldexp(want, -19));
    }
  // A clean fp16 tensor with its largest finite value: its square is finite
  // (no overflow is mistaken for a non-finite element).
  Stored h = store(*dev, {65504.0f, -65504.0f, 1.0f}, Shape{3}, DType::F16);
  const TensorStats st = dev->stats(h.buf);
  EXPECT_EQ(st.nonfinite, 0);
  const double want = 2.0 * 65504.0 * 65504.0 + 1.0;
  EXPECT_NEAR(st.sum_squares, want, std::ldexp(want, -19));
}

TEST(CpuOps, ExponentHistogramHandMade) {
  auto dev = make_cpu_device();
  const int lo = -4, nbins = 8;  // bins: exponents -4 .. 3
  const float below = std::nextafter(0.0625f, 0.0f);
  // clang-format off
  const std::vector<float> x{
      1.0f, 1.5f, std::nextafter(2.0f, 0.0f),         // exponent 0  -> bin 4
      2.0f, -3.0f,                                     // exponent 1  -> bin 5
      0.75f,                                           // exponent -1 -> bin 3
      0.3f,                                            // exponent -2 -> bin 2
      0.2f,                                            // exponent -3 -> bin 1
      0.0625f, 0.1f,                                   // exponent -4 -> bin 0
      below, 1e-30f, -1e-40f,                          // below lo (incl. a subnormal) -> bin 0
      8.0f, -15.99f,                                   // exponent 3 -> bin 7
      16.0f, 1e30f, -FLT_MAX,                          // above the top bin -> bin 7
      0.0f, -0.0f,                                     // zeros
      INFINITY, -INFINITY, std::nanf(""),              // non-finite
  };
  // clang-format on
  DeviceBuffer t = testref::upload(*dev, x, Shape{static_cast<int64_t>(x.size())}, DType::F32);
  const ExponentHistogram h = dev->exponent_histogram(t, lo, nbins);
  EXPECT_EQ(h.lo, lo);
  EXPECT_EQ(h.bins, (std::vector<int64_t>{5, 1, 1, 1, 3, 2, 0, 5}));
  EXPECT_EQ(h.zeros, 2);
  EXPECT_EQ(h.nonfinite, 3);
  EXPECT_EQ(h.total, static_cast<int64_t>(x.size()));

  // One bin: every finite non-zero value lands in it.
  const ExponentHistogram h1 = dev->exponent_histogram(t, 0, 1);
  EXPECT_EQ(h1.bins, (std::vector<int64_t>{18}));

  // Random fp32/fp16/bf16 values vs std::ilogb.
  for (DType dt : kFloatTypes) {
    const int64_t n = 50'000;
    Stored s = store(*dev, wide_random(static_cast<size_t>(n), 101), Shape{n}, dt);
    const int rlo = -20, rn = 30;
    std::vector<int64_t> want(rn, 0);
    int64_t zeros = 0, nonfinite = 0;
    for (double v : s.value) {
      if (!std::isfinite(v)) { ++nonfinite; continue; }
      if (v == 0) { ++zeros; continue; }
      const int e = std::ilogb(v);
      ++want[static_cast<size_t>(std::min(std::max(e - rlo, 0), rn - 1))];
    }
    const ExponentHistogram hr = dev->exponent_histogram(s.buf, rlo, rn);
    EXPECT_EQ(hr.bins, want) << dtype_name(dt);
    EXPECT_EQ(hr.zeros, zeros) << dtype_name(dt);
    EXPECT_EQ(hr.nonfinite, nonfinite) << dtype_name(dt);
    EXPECT_EQ(hr.total, n);
  }
  EXPECT_THROW(dev->exponent_histogram(t, 0, 0), std::invalid_argument);
}

// ---------------------------------------------------------------------------------
// torch.optim.AdamW (amsgrad=False, maximize=False) in double, one element:
//   p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
struct AdamRef {
  double p, m = 0, v = 0, m_mag = 0;
};
void adamw_ref_step(AdamRef& s, double g, const AdamWHyper& h) {
  const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  const double t = static_cast<double>(h.step);
  s.p *= 1.0 - lr * wd;
  s.m = b1 * s.m + (1.0 - b1) * g;
  s.m_mag = b1 * s.m_mag + (1.0 - b1) * std::fabs(g);
  s.v = b2 * s.v + (1.0 - b2) * g * g;
  const double denom = std::sqrt(s.v) / std::sqrt(1.0 - std::pow(b2, t)) + eps;
  s.p -= lr / (1.0 - std::pow(b1, t)) * s.m / denom;
}

TEST(CpuOps, AdamWMatchesPyTorchAndFusedEqualsUnfused) {
  auto dev = make_cpu_device();
  const int64_t n = 40'000;
  const float grad_scale = 0.37f;  // not a power of two: the multiply is visible
  const std::vector<float> p0 = testref::random_nonzero(static_cast<size_t>(n), 111);
  std::vector<AdamRef> ref(static_cast<size_t>(n));
  for (size_t i = 0; i < ref.size(); ++i) ref[i].p = p0[i];

  DeviceBuffer p[2], m[2], v[2];
  for (int f = 0; f < 2; ++f) {
    p[f] = testref::upload(*dev, p0, Shape{n}, DType::F32, MemCategory::Params);
    m[f] = dev->alloc(Shape{n}, DType::F32, MemCategory::Optimizer);
    v[f] = dev->alloc(Shape{n}, DType::F32, MemCategory::Optimizer);
    dev->fill(m[f], 0.0f);
    dev->fill(v[f], 0.0f);
  }
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<float> g = testref::random_nonzero(static_cast<size_t>(n), 120 + static_cast<uint64_t>(step));
    for (float& x : g) x *= 4.0f;  // "scaled" gradients; true gradient = g * grad_scale
    DeviceBuffer gb = testref::upload(*dev, g, Shape{n}, DType::F32, MemCategory::Grads);
    const AdamWHyper h{1e-2f, 0.9f, 0.999f, 1e-8f, 0.05f, step};
    dev->adamw_step(p[0], gb, m[0], v[0], h, grad_scale, /*fused=*/false, Tensor{});
    dev->adamw_step(p[1], gb, m[1], v[1], h, grad_scale, /*fused=*/true, Tensor{});
    for (size_t i = 0; i < ref.size(); ++i)
      adamw_ref_step(ref[i], static_cast<double>(g[i]) * grad_scale, h);
  }
  const auto pu = testref::download<float>(*dev, p[0]), pf = testref::download<float>(*dev, p[1]);
  const auto mu = testref::download<float>(*dev, m[0]), mf = testref::download<float>(*dev, m[1]);
  const auto vu = testref::download<float>(*dev, v[0]), vf = testref::download<float>(*dev, v[1]);
  // Tolerance, 1e-6 relative: per step p takes 2 roundings (decay, update)
  // of ~|p| and the update ~8 roundings of ~lr; over 3 steps that is
  // <= 6u|p| + 24u*lr*few = 3.6e-7|p| + ~5e-8, under 1e-6|p| since |p| >= 0.07
  // (|p0| >= 0.1, 3 steps of <= ~lr). m: ~3 roundings per step of terms
  // bounded by m's magnitude sum; v: all terms positive, ~3u per step.
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(pu[i], ref[i].p, 1e-6 * std::fabs(ref[i].p)) << "param " << i;
    ASSERT_NEAR(mu[i], ref[i].m, 1e-6 * ref[i].m_mag) << "m " << i;
    ASSERT_NEAR(vu[i], ref[i].v, 1e-6 * ref[i].v) << "v " << i;
    ASSERT_EQ(bits(pf[i]), bits(pu[i])) << "fused param " << i;
    ASSERT_EQ(bits(mf[i]), bits(mu[i])) << "fused m " << i;
    ASSERT_EQ(bits(vf[i]), bits(vu[i])) << "fused v " << i;
  }
  // Optimizer state must be fp32; element counts must agree.
  const AdamWHyper h1{1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1};
  DeviceBuffer g = dev->alloc(Shape{n}, DType::F32, MemCategory::Grads);
  DeviceBuffer m16 = dev->alloc(Shape{n}, DType::BF16, MemCategory::Optimizer);
  DeviceBuffer g_short = dev->alloc(Shape{n - 1}, DType::F32, MemCategory::Grads);
  EXPECT_THROW(dev->adamw_step(p[0], g, m16, v[0], h1, 1.0f, true, Tensor{}), std::invalid_argument);
  EXPECT_THROW(dev->adamw_step(p[0], g_short, m[0], v[0], h1, 1.0f, false, Tensor{}), std::invalid_argument);
}

// torch.optim.SGD(lr, momentum, weight_decay, dampening=0, nesterov=False):
//   g += wd * p; buf = g (first step) else momentum * buf + g; p -= lr * buf.
TEST(CpuOps, SgdMatchesPyTorch) {
  auto dev = make_cpu_device();
  const int64_t n = 40'000;
  const float grad_scale = 0.37f;
  const SgdHyper h{0.05f, 0.9f, 1e-2f};
  const std::vector<float> p0 = testref::random_nonzero(static_cast<size_t>(n), 131);
  std::vector<double> p(p0.begin(), p0.end()), buf(static_cast<size_t>(n)), buf_mag(static_cast<size_t>(n));
  DeviceBuffer pb = testref::upload(*dev, p0, Shape{n}, DType::F32, MemCategory::Params);
  DeviceBuffer bb = dev->alloc(Shape{n}, DType::F32, MemCategory::Optimizer);
  dev->fill(bb, 0.0f);
  for (int step = 1; step <= 3; ++step) {
    const std::vector<float> g = testref::random_nonzero(static_cast<size_t>(n), 140 + static_cast<uint64_t>(step));
    DeviceBuffer gb = testref::upload(*dev, g, Shape{n}, DType::F32, MemCategory::Grads);
    dev->sgd_step(pb, gb, bb, h, grad_scale);
    for (size_t i = 0; i < p.size(); ++i) {
      const double gi = static_cast<double>(g[i]) * grad_scale + static_cast<double>(h.weight_decay) * p[i];
      buf[i] = step == 1 ? gi : static_cast<double>(h.momentum) * buf[i] + gi;
      buf_mag[i] = (step == 1 ? 0.0 : static_cast<double>(h.momentum) * buf_mag[i]) + std::fabs(gi);
      p[i] -= static_cast<double>(h.lr) * buf[i];
    }
  }
  const auto pg = testref::download<float>(*dev, pb), bg = testref::download<float>(*dev, bb);
  // ~4 roundings per step of terms bounded by the magnitudes; 1e-6 relative
  // to those magnitudes covers 3 steps with margin.
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_NEAR(bg[i], buf[i], 1e-6 * buf_mag[i]) << "momentum " << i;
    ASSERT_NEAR(pg[i], p[i], 1e-6 * (std::fabs(p[i]) + 3 * static_cast<double>(h.lr) * buf_mag[i])) << "param " << i;
  }
}

}  // namespace
