// ForwardingDevice: a Device that passes every op to another device, after
// its own public op has checked the call. A test derives from it to change
// one op (plant a bug, log a call) on a real backend without knowing that
// backend's classes; each override can call ForwardingDevice::<op>_impl for
// the real thing. Generated from core/device_ops.inc, so a new op needs
// nothing here.
//
// Counters: this device counts what its public ops count (host waits of the
// ops that return host values); what the inner backend notes itself (plans,
// pinned allocations, a library's attention) lands in the inner device's
// counters().
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/device.h"

namespace mpb {

class ForwardingDevice : public Device {
 public:
  explicit ForwardingDevice(std::unique_ptr<Device> inner) : inner_(std::move(inner)) {
    if (!inner_) throw DeviceError("ForwardingDevice: no device to forward to");
  }
  Device& inner() { return *inner_; }

  const DeviceInfo& info() const override { return inner_->info(); }
  void synchronize() override { inner_->synchronize(); }
  std::unique_ptr<DeviceTimer> make_timer() override { return inner_->make_timer(); }
  void range_push(const char* name) override { inner_->range_push(name); }
  void range_pop() override { inner_->range_pop(); }
  Support supports(Feature f) const override { return inner_->supports(f); }
  std::string gemm_math(GemmCompute c) const override { return inner_->gemm_math(c); }
  std::optional<size_t> free_memory_bytes() const override { return inner_->free_memory_bytes(); }
  std::optional<size_t> reserved_peak_bytes() const override { return inner_->reserved_peak_bytes(); }

 protected:
#define MPB_DEVICE_OP(group, ret, name, params, args) \
  ret name##_impl params override { return inner_->name##_impl args; }
#include "core/device_ops.inc"
#undef MPB_DEVICE_OP
  void* raw_alloc(size_t bytes) override { return inner_->raw_alloc(bytes); }
  void raw_free(void* ptr) override { inner_->raw_free(ptr); }

 private:
  std::unique_ptr<Device> inner_;
};

}  // namespace mpb
