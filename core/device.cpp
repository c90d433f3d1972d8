#include "core/device.h"

#include <optional>
#include <string>
#include <utility>

namespace mpb {

const char* gemm_compute_name(GemmCompute c) {
  switch (c) {
    case GemmCompute::F32: return "fp32";
    case GemmCompute::TF32: return "tf32";
    case GemmCompute::F16: return "fp16";
    case GemmCompute::BF16: return "bf16";
  }
  return "?";
}

Feature gemm_feature(GemmCompute c) {
  switch (c) {
    case GemmCompute::F32: return Feature::GemmF32;
    case GemmCompute::TF32: return Feature::GemmTf32;
    case GemmCompute::F16: return Feature::GemmF16;
    case GemmCompute::BF16: return Feature::GemmBf16;
  }
  return Feature::GemmF32;  // unreachable: every mode is listed (-Wswitch checks)
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    device_ = std::exchange(o.device_, nullptr);
    view_ = std::exchange(o.view_, Tensor{});
    category_ = o.category_;
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() {
  if (device_ && view_.data) {
    device_->raw_free(view_.data);
    device_->memory().on_free(category_, bytes_);
  }
  device_ = nullptr;
  view_ = Tensor{};
  bytes_ = 0;
}

DeviceBuffer Device::alloc(Shape shape, DType dtype, MemCategory category) {
  Tensor view(nullptr, dtype, shape);
  size_t bytes = view.bytes();
  if (bytes == 0) throw DeviceError("Device::alloc: empty tensor " + shape.str());
  view.data = raw_alloc(bytes);
  memory().on_alloc(category, bytes);
  return DeviceBuffer(this, view, category, bytes);
}

// The defaults of Device's optional members (core/device.h says why they are not inline).
std::optional<size_t> Device::free_memory_bytes() const { return std::nullopt; }
std::optional<size_t> Device::reserved_peak_bytes() const { return std::nullopt; }
void Device::range_push(const char* name) { (void)name; }
void Device::range_pop() {}

}  // namespace mpb
