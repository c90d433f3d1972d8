#include "opcheck/host.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "ops/dtype_io.h"
#include "opcheck/numerics_reference.h"

namespace mpb::opcheck {

Host::Host(DType t, Shape s) : dtype(t), shape(s), bytes(static_cast<size_t>(s.numel()) * dtype_size(t)) {}

float Host::get(int64_t i) const { return scalar::load_f32(bytes.data(), dtype, i); }

double Host::value(int64_t i) const {
  switch (dtype) {
    case DType::F16: return numref::half_to_double(static_cast<uint16_t>(bits(i)));
    case DType::BF16: return numref::bf16_to_double(static_cast<uint16_t>(bits(i)));
    case DType::I32: return label(i);
    case DType::F32: break;
  }
  return numref::float_of(bits(i));
}

std::vector<double> Host::values() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[static_cast<size_t>(i)] = value(i);
  return v;
}

void Host::set(int64_t i, float v) { scalar::store_f32(bytes.data(), dtype, i, v); }

int32_t Host::label(int64_t i) const {
  int32_t v;
  std::memcpy(&v, bytes.data() + i * 4, 4);
  return v;
}

void Host::set_label(int64_t i, int32_t v) { std::memcpy(bytes.data() + i * 4, &v, 4); }

uint32_t Host::bits(int64_t i) const {
  if (dtype_size(dtype) == 2) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + i * 2, 2);
    return h;
  }
  uint32_t u;
  std::memcpy(&u, bytes.data() + i * 4, 4);
  return u;
}

Host filled(DType t, Shape s, float v) {
  Host h(t, s);
  for (int64_t i = 0; i < h.numel(); ++i) h.set(i, v);
  return h;
}

Host ints(const std::vector<int32_t>& v, Shape s) {
  if (static_cast<int64_t>(v.size()) != s.numel()) throw std::logic_error("opcheck::ints: size mismatch");
  Host h(DType::I32, s);
  for (size_t i = 0; i < v.size(); ++i) h.set_label(static_cast<int64_t>(i), v[i]);
  return h;
}

DeviceBuffer put(Device& dev, const Host& h, MemCategory cat) {
  DeviceBuffer b = dev.alloc(h.shape, h.dtype, cat);
  dev.upload(b, h.bytes.data());
  return b;
}

Host fetch(Device& dev, const Tensor& t) {
  Host h(t.dtype, t.shape);
  dev.download(h.bytes.data(), t);
  return h;
}

bool identical(const Host& a, const Host& b, std::string* where) {
  if (a.dtype != b.dtype || a.bytes.size() != b.bytes.size()) {
    if (where) *where = "layouts differ";
    return false;
  }
  const size_t es = dtype_size(a.dtype);
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(a.bytes.data() + i * es, b.bytes.data() + i * es, es) != 0 &&
        !(std::isnan(a.value(i)) && std::isnan(b.value(i)))) {
      if (where) *where = "[" + std::to_string(i) + "]: " + std::to_string(a.value(i)) + " vs " + std::to_string(b.value(i));
      return false;
    }
  return true;
}

double ulp(DType t, double x) {
  const int digits = t == DType::F16 ? 11 : (t == DType::BF16 ? 8 : 24);
  const int min_exp = t == DType::F16 ? -14 : -126;
  int e = 0;
  std::frexp(std::max(std::fabs(x), std::ldexp(1.0, min_exp)), &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, e - digits);
}

double stored(DType t, double x) {
  const float f = static_cast<float>(x);
  switch (t) {
    case DType::F16: {
      static const numref::HalfRoundRef round_half;
      return numref::half_to_double(round_half(f));
    }
    case DType::BF16: return numref::bf16_to_double(numref::bf16_bits_ref(f));
    default: return f;
  }
}

const char* short_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
  }
  return "?";
}

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::None: return "None";
    case Epilogue::Bias: return "Bias";
    case Epilogue::BiasRelu: return "BiasRelu";
    case Epilogue::BiasGelu: return "BiasGelu";
    case Epilogue::DGelu: return "DGelu";
    case Epilogue::DGeluBGrad: return "DGeluBGrad";
  }
  return "?";
}

Host Gen::uniform(DType t, Shape s, float lo, float hi) {
  Host h(t, s);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < h.numel(); ++i) h.set(i, d(rng_));
  return h;
}

Host Gen::nonzero(DType t, Shape s, float lo, float hi) {
  Host h(t, s);
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  for (int64_t i = 0; i < h.numel(); ++i) {
    const float m = mag(rng_);
    h.set(i, neg(rng_) ? -m : m);
  }
  return h;
}

}  // namespace mpb::opcheck
