// CpuDevice: the Device implementation behind make_cpu_device(). Internal to
// the CPU backend. It defines memory, copies and timing (backends/cpu/
// cpu_device.cpp), the GEMM (backends/cpu/gemm_onednn.cpp, oneDNN), the
// step's host-side state (backends/cpu/step_state.cpp) and the FP8 scale
// update (backends/cpu/fp8_scales.cpp); every other op is a hand-written
// kernel: OpenMP loops over the scalar cores in ops/*.h, in
// backends/cpu/kernels/, built once per ISA into a class Kernels derived from
// CpuDevice. make_cpu_device() makes the Kernels of the ISA chosen at run
// time (backends/cpu/cpu_isa.h), so an op is one virtual call, straight into
// that ISA's loop. Which class defines which group: backends/cpu/cpu_op_owner.h.
// The public Device ops have checked the arguments against core/device.h
// before any *_impl runs, so the code here checks nothing but what only the
// CPU backend knows (the ids and labels in host memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backends/cpu/cpu_op_owner.h"
#include "core/device.h"

namespace mpb::cpu {

struct CpuIsaChoice;  // backends/cpu/cpu_isa.h

// oneDNN's engine and stream and the matmul primitives cached per
// shape/dtype/epilogue (backends/cpu/gemm_onednn.cpp).
struct OnednnMatmul;
struct OnednnMatmulDeleter {
  void operator()(OnednnMatmul* p) const;
};
std::unique_ptr<OnednnMatmul, OnednnMatmulDeleter> make_onednn_matmul();

// Abstract: each ISA's Kernels (backends/cpu/kernels/kernels.h) completes it.
// A test that plants a bug in one op wraps the device in a ForwardingDevice
// (core/forwarding_device.h) instead of deriving from it.
class CpuDevice : public Device {
 public:
  explicit CpuDevice(const CpuIsaChoice& isa);  // isa: the Kernels' own, for DeviceInfo
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  // Defined in backends/cpu/cpu_device.cpp, never inline: the ISA builds
  // derive from this class, and an inline member they emitted (compiled with
  // their flags) could stand in for everyone's at link time.
  ~CpuDevice() override;
  const DeviceInfo& info() const override;
  void synchronize() override;  // nothing to wait for; counted as the call it is
  std::unique_ptr<DeviceTimer> make_timer() override;
  Support supports(Feature f) const override;           // backends/cpu/gemm_onednn.cpp
  std::string gemm_math(GemmCompute c) const override;  // backends/cpu/gemm_onednn.cpp
  std::optional<size_t> free_memory_bytes() const override;

  // dst[i] = src[i] converted (any float dtypes, same element count; unchecked):
  // the ISA's loop behind cast(), for the ops that convert internally (the
  // GEMM's operand widening, the optimizers' parameter copies).
  virtual void convert(const Tensor& dst, const Tensor& src) = 0;

 protected:
  // The groups of core/device_ops.inc that CpuDevice defines (cpu_op_owner.h):
  //   memory and copies   backends/cpu/cpu_device.cpp
  //   GEMM                backends/cpu/gemm_onednn.cpp
  //   the step's state    backends/cpu/step_state.cpp
  //   FP8 delayed scaling backends/cpu/fp8_scales.cpp (no ISA build: a few thousand scalars)
#define MPB_DEVICE_OP(group, ret, name, params, args) MPB_CPU_OWNER_##group(ret name##_impl params override;, )
#include "core/device_ops.inc"
#undef MPB_DEVICE_OP
  void* raw_alloc(size_t bytes) override;
  void raw_free(void* ptr) override;

  // For the kernels (backends/cpu/step_state.cpp):
  // A loss op's result: `loss` returned, or (deferred) added to the loss sum
  // in call order, as the CUDA backend's sum on the device is, and 0 returned.
  double loss_result(double loss, bool deferred);
  // A decided GradScale (Device::decide_step): false on a skip (no update at
  // all); otherwise the factor to use, into `factor`.
  bool resolve(GradScale grad_scale, float& factor) const;

 private:
  // Grow-only scratch buffers for GEMM emulation (slot 0..3), tracked as
  // workspace memory; valid until the next call for the same slot.
  void* workspace(int slot, size_t bytes);

  DeviceInfo info_;
  DeviceBuffer workspace_[4];
  double loss_sum_ = 0.0;  // the loss ops' deferred sum (Device::read_loss_sum)
  StepResults decision_;   // the last decide_step's statistics and decision (loss_sum unused)
  std::unique_ptr<OnednnMatmul, OnednnMatmulDeleter> onednn_;
};

}  // namespace mpb::cpu
