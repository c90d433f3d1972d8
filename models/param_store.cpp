#include "models/param_store.h"

#include <stdexcept>
#include <string>

namespace mpb {

int ParamStore::add(const std::string& name, Shape shape, ParamRole role, int packed_layers) {
  if (allocated()) throw std::logic_error("ParamStore::add('" + name + "') after allocate()");
  if (packed_layers < 1 || (packed_layers > 1 && (shape.ndim == 0 || shape[0] % packed_layers != 0)))
    throw std::logic_error("ParamStore::add('" + name + "'): " + std::to_string(packed_layers) +
                           " packed layers do not divide its first dimension");
  info_.push_back({name, shape, numel_, role, packed_layers});
  numel_ += shape.numel();
  return static_cast<int>(info_.size()) - 1;
}

void ParamStore::allocate() {
  if (allocated()) throw std::logic_error("ParamStore::allocate() called twice");
  if (numel_ == 0) throw std::logic_error("ParamStore::allocate() with an empty table");
  const Shape n{numel_};
  const bool half_params = pol_.param != DType::F32;
  if (!half_params || pol_.master_weights) master_ = dev_->alloc(n, DType::F32, MemCategory::Params);
  if (half_params) half_ = dev_->alloc(n, pol_.param, MemCategory::Params);
  if (pol_.compute != pol_.param) compute_ = dev_->alloc(n, pol_.compute, MemCategory::Params);
  grads_ = dev_->alloc(n, pol_.grad(), MemCategory::Grads);
}

ParamRef ParamStore::ref(int index) const {
  if (!allocated()) throw std::logic_error("ParamStore::ref before allocate()");
  const ParamInfo& pi = info_.at(static_cast<size_t>(index));
  const int64_t count = pi.shape.numel();
  auto view = [&](const Tensor& flat) { return flat.flat_slice(pi.offset, count).reshaped(pi.shape); };
  const Tensor p = model_params();
  return ParamRef{view(p), view(compute_.empty() ? p : compute_.tensor()), view(grads_.tensor())};
}

void ParamStore::upload(const std::vector<float>& host) {
  if (!allocated()) throw std::logic_error("ParamStore::upload before allocate()");
  if (static_cast<int64_t>(host.size()) != numel_)
    throw std::invalid_argument("ParamStore::upload: " + std::to_string(host.size()) + " values for " +
                                std::to_string(numel_) + " parameters");
  if (!master_.empty()) {
    dev_->upload(master_.tensor(), host.data());
  } else {  // no master copy: the half parameters are initialised directly
    DeviceBuffer staging = dev_->alloc(Shape{numel_}, DType::F32, MemCategory::Workspace);
    dev_->upload(staging, host.data());
    dev_->cast(half_.tensor(), staging);
  }
  load_compute_weights();
}

Tensor ParamStore::weight_copy() const {
  if (!compute_.empty()) return compute_.tensor();             // autocast
  if (!master_.empty() && !half_.empty()) return half_.tensor();  // apex O2
  return Tensor{};
}

void ParamStore::load_compute_weights() {
  if (!master_.empty() && !half_.empty()) dev_->cast(half_.tensor(), master_.tensor());
  if (!compute_.empty()) dev_->cast(compute_.tensor(), model_params());
}

}  // namespace mpb
