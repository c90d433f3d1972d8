#include "core/device.h"

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

// The transformer ops' defaults: a clear error naming the op and the backend.
namespace {
[[noreturn]] void missing(const Device& d, const char* op) {
  throw DeviceError(std::string(op) + " is not implemented on the " + d.info().kind + " device");
}
}  // namespace

void Device::add(const Tensor&, const Tensor&, const Tensor&) { missing(*this, "add"); }
void Device::layernorm_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, float) {
  missing(*this, "layernorm_forward");
}
void Device::residual_layernorm_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                        const Tensor&, const Tensor&, const Tensor&, float) {
  missing(*this, "residual_layernorm_forward");
}
void Device::layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                const Tensor&, const Tensor&, const Tensor&, GradMode, GradMode) {
  missing(*this, "layernorm_backward");
}
void Device::split_heads(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { missing(*this, "split_heads"); }
void Device::merge_qkv_grads(const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  missing(*this, "merge_qkv_grads");
}
void Device::merge_heads(const Tensor&, const Tensor&) { missing(*this, "merge_heads"); }
void Device::split_heads_grad(const Tensor&, const Tensor&) { missing(*this, "split_heads_grad"); }
void Device::masked_softmax_forward(const Tensor&, const Tensor&, const Tensor&, float, float) {
  missing(*this, "masked_softmax_forward");
}
void Device::softmax_backward(const Tensor&, const Tensor&, const Tensor&, float) { missing(*this, "softmax_backward"); }
void Device::attention_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, float, float) {
  missing(*this, "attention_forward");
}
void Device::attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float,
                                float) {
  missing(*this, "attention_backward");
}
void Device::embedding_forward(const Tensor&, const Tensor&, const Tensor&) { missing(*this, "embedding_forward"); }
void Device::embedding_backward(const Tensor&, const Tensor&, const Tensor&, GradMode) {
  missing(*this, "embedding_backward");
}
void Device::dropout(const Tensor&, const Tensor&, float, uint64_t) { missing(*this, "dropout"); }

}  // namespace mpb
