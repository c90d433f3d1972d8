#include "models/fp8_linears.h"

#include <stdexcept>

namespace mpb {

namespace {
constexpr int kRoles = 3;
const char* const kRoleNames[kRoles] = {"input", "weight", "grad_output"};
Fp8Format format_of(int role) { return role == int(Fp8Role::GradOutput) ? Fp8Format::E5M2 : Fp8Format::E4M3; }
}  // namespace

Fp8Linears::Fp8Linears(Device& dev, const Fp8Recipe& recipe)
    : dev_(&dev),
      recipe_(recipe),
      scale_(dev.alloc(Shape{kRoles * kMaxLinears}, DType::F32, MemCategory::Workspace)),
      amax_(dev.alloc(Shape{kRoles * kMaxLinears}, DType::F32, MemCategory::Workspace)),
      saturated_(dev.alloc(Shape{kRoles * kMaxLinears}, DType::F32, MemCategory::Workspace)) {
  dev.fill(scale_, 1.0f);  // TE's initial scale
  dev.fill(amax_, 0.0f);
  dev.fill(saturated_, 0.0f);
}

GemmFp8Operand Fp8Linears::operand(const void* weight, Fp8Role role, int64_t elements) {
  auto it = layer_of_.find(weight);
  if (it == layer_of_.end()) {
    const int layer = static_cast<int>(layer_of_.size());
    if (layer >= kMaxLinears)
      throw std::length_error("fp8: more than " + std::to_string(kMaxLinears) + " linear layers");
    it = layer_of_.emplace(weight, layer).first;
    for (int r = 0; r < kRoles; ++r) {
      scales_.emplace_back(recipe_, fp8_max(format_of(r)));
      elements_.push_back(0.0);
      report_.push_back(Fp8TensorReport{"linear" + std::to_string(layer) + "." + kRoleNames[r],
                                        format_of(r) == Fp8Format::E4M3 ? "e4m3" : "e5m2", 1.0f, 0.0f, 0.0});
    }
  }
  const int slot = kRoles * it->second + static_cast<int>(role);
  elements_[static_cast<size_t>(slot)] += static_cast<double>(elements);
  GemmFp8Operand op;
  op.enabled = true;
  op.format = format_of(static_cast<int>(role));
  op.scale = scale_.tensor().flat_slice(slot, 1);
  op.amax = amax_.tensor().flat_slice(slot, 1);
  op.saturated = saturated_.tensor().flat_slice(slot, 1);
  return op;
}

void Fp8Linears::update() {
  const int64_t n = static_cast<int64_t>(scales_.size());
  if (n == 0) return;
  std::vector<float> amax(static_cast<size_t>(n)), saturated(static_cast<size_t>(n)), scale(static_cast<size_t>(n));
  dev_->download(amax.data(), amax_.tensor().flat_slice(0, n));
  dev_->download(saturated.data(), saturated_.tensor().flat_slice(0, n));
  for (int64_t i = 0; i < n; ++i) {
    const size_t s = static_cast<size_t>(i);
    Fp8TensorReport& r = report_[s];
    r.scale = scales_[s].scale();  // what this step used
    r.amax = amax[s];
    r.saturated_fraction = elements_[s] > 0 ? saturated[s] / elements_[s] : 0.0;
    // A slot no GEMM touched this step (none today) keeps its history.
    if (elements_[s] > 0) scales_[s].update(amax[s]);
    scale[s] = scales_[s].scale();
    elements_[s] = 0.0;
  }
  dev_->upload(scale_.tensor().flat_slice(0, n), scale.data());
  dev_->fill(amax_.tensor().flat_slice(0, n), 0.0f);
  dev_->fill(saturated_.tensor().flat_slice(0, n), 0.0f);
}

void Fp8Linears::discard() {
  const int64_t n = static_cast<int64_t>(scales_.size());
  if (n == 0) return;
  for (double& e : elements_) e = 0.0;
  dev_->fill(amax_.tensor().flat_slice(0, n), 0.0f);
  dev_->fill(saturated_.tensor().flat_slice(0, n), 0.0f);
}

}  // namespace mpb
