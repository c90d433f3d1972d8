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
      saturated_(dev.alloc(Shape{kRoles * kMaxLinears}, DType::F32, MemCategory::Workspace)),
      fp8_max_(dev.alloc(Shape{kRoles * kMaxLinears}, DType::F32, MemCategory::Workspace)),
      steps_(dev.alloc(Shape{kRoles * kMaxLinears}, DType::I32, MemCategory::Workspace)) {
  // The recipe's limits, as Fp8TensorScale (core/fp8_scaling.h) states them.
  if (recipe.amax_history_len < 1) throw std::invalid_argument("fp8.amax_history_len must be at least 1");
  if (recipe.margin < 0) throw std::invalid_argument("fp8.margin must be >= 0");
  dev.fill(scale_, 1.0f);  // TE's initial scale
  dev.fill(amax_, 0.0f);
  dev.fill(saturated_, 0.0f);
  std::vector<float> fmax(static_cast<size_t>(kRoles * kMaxLinears));
  for (size_t i = 0; i < fmax.size(); ++i) fmax[i] = fp8_max(format_of(static_cast<int>(i % kRoles)));
  dev.upload(fp8_max_, fmax.data());
  const std::vector<int32_t> zeros(fmax.size(), 0);
  dev.upload(steps_, zeros.data());
}

GemmFp8Operand Fp8Linears::operand(const void* weight, Fp8Role role, int64_t elements) {
  auto it = layer_of_.find(weight);
  if (it == layer_of_.end()) {
    const int layer = static_cast<int>(layer_of_.size());
    if (layer >= kMaxLinears)
      throw std::length_error("fp8: more than " + std::to_string(kMaxLinears) + " linear layers");
    it = layer_of_.emplace(weight, layer).first;
    for (int r = 0; r < kRoles; ++r) {
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

void Fp8Linears::update(bool report) {
  const int64_t n = slots();
  if (n == 0) return;
  if (report) {  // before the update: the scales this step used
    std::vector<float> amax(static_cast<size_t>(n)), saturated(amax.size()), scale(amax.size());
    dev_->download(scale.data(), scale_.tensor().flat_slice(0, n));
    dev_->download(amax.data(), amax_.tensor().flat_slice(0, n));
    dev_->download(saturated.data(), saturated_.tensor().flat_slice(0, n));
    for (size_t s = 0; s < amax.size(); ++s) {
      Fp8TensorReport& r = report_[s];
      r.scale = scale[s];
      r.amax = amax[s];
      r.saturated_fraction = elements_[s] > 0 ? saturated[s] / elements_[s] : 0.0;
    }
  }
  reserve_history();
  // A slot no GEMM touched this step (none today) keeps its history.
  std::vector<bool> touched(static_cast<size_t>(n));
  for (size_t s = 0; s < touched.size(); ++s) {
    touched[s] = elements_[s] > 0;
    elements_[s] = 0.0;
  }
  dev_->fp8_update_scales(scale_.tensor().flat_slice(0, n), amax_.tensor().flat_slice(0, n),
                          history_.tensor().flat_slice(0, n * recipe_.amax_history_len)
                              .reshaped(Shape{n, recipe_.amax_history_len}),
                          steps_.tensor().flat_slice(0, n), fp8_max_.tensor().flat_slice(0, n), touched, recipe_.margin,
                          recipe_.amax_compute_algo == AmaxAlgo::MostRecent);
  dev_->fill(saturated_.tensor().flat_slice(0, n), 0.0f);
}

void Fp8Linears::reserve_history() {
  const int64_t n = slots(), len = recipe_.amax_history_len;
  if (n <= history_slots_) return;
  DeviceBuffer grown = dev_->alloc(Shape{n, len}, DType::F32, MemCategory::Workspace);
  dev_->fill(grown, 0.0f);
  if (history_slots_ > 0) dev_->copy(grown.tensor().flat_slice(0, history_slots_ * len), history_.tensor());
  history_ = std::move(grown);
  history_slots_ = n;
}

void Fp8Linears::discard() {
  const int64_t n = slots();
  if (n == 0) return;
  reserve_history();
  for (double& e : elements_) e = 0.0;
  dev_->fill(amax_.tensor().flat_slice(0, n), 0.0f);
  dev_->fill(saturated_.tensor().flat_slice(0, n), 0.0f);
}

}  // namespace mpb
