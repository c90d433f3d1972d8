// CpuDevice: the Device implementation behind make_cpu_device(). Internal to
// the CPU backend. Its memory, copy and timing members are defined in
// backends/cpu/cpu_device.cpp, the GEMM in backends/cpu/gemm_onednn.cpp
// (oneDNN), and every other op hands its call to the hand-written kernels
// (backends/cpu/cpu_kernel_calls.cpp): OpenMP loops over the scalar cores in
// ops/*.h, in backends/cpu/kernels/, built once per ISA and chosen at run time
// (backends/cpu/cpu_isa.h). The public Device ops have checked the arguments
// against core/device.h before any *_impl runs, so the code here checks nothing
// but what only the CPU backend knows (the ids and labels in host memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backends/cpu/cpu_kernels.h"
#include "core/device.h"
#include "core/host_memory.h"

namespace mpb::cpu {

struct CpuIsaChoice;  // backends/cpu/cpu_isa.h

// oneDNN's engine and stream and the matmul primitives cached per
// shape/dtype/epilogue (backends/cpu/gemm_onednn.cpp).
struct OnednnMatmul;
struct OnednnMatmulDeleter {
  void operator()(OnednnMatmul* p) const;
};
std::unique_ptr<OnednnMatmul, OnednnMatmulDeleter> make_onednn_matmul();

// Not final: tests plant a bug in one op by overriding its *_impl
// (tests/runner/commands/test_selftest.cpp proves that `runner selftest` fails then).
class CpuDevice : public Device {
 public:
  CpuDevice();  // the kernels choose_cpu_isa() picks (throws DeviceError as it does)
  explicit CpuDevice(const CpuIsaChoice& isa);
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  const DeviceInfo& info() const override { return info_; }
  void synchronize() override { note_host_sync(); }  // nothing to wait for; counted as the call it is
  std::unique_ptr<DeviceTimer> make_timer() override;
  std::string gemm_support(GemmCompute c) const override;  // backends/cpu/gemm_onednn.cpp
  std::string gemm_math(GemmCompute c) const override;     // backends/cpu/gemm_onednn.cpp
  std::string fp8_gemm_support() const override;           // backends/cpu/gemm_onednn.cpp
  std::optional<size_t> free_memory_bytes() const override { return host_available_memory_bytes(); }

 protected:
  // Defined in the file named for each group of the list (the kernel groups in
  // backends/cpu/cpu_kernel_calls.cpp, which calls the ISA build's copy of the
  // file named):
  //   memory and copies   backends/cpu/cpu_device.cpp
  //   GEMM                backends/cpu/gemm_onednn.cpp
  //   element-wise        backends/cpu/kernels/elementwise.cpp
  //   losses              backends/cpu/kernels/loss.cpp
  //   reductions          backends/cpu/kernels/reduce.cpp
  //   transformer ops     backends/cpu/kernels/transformer.cpp
  //   attention           backends/cpu/kernels/attention.cpp
  //   embeddings          backends/cpu/kernels/embedding.cpp
  //   optimizers          backends/cpu/kernels/optimizer.cpp
  //   FP8 delayed scaling backends/cpu/fp8_scales.cpp (no ISA build: a few thousand scalars)
#include "core/device_impl_overrides.inc"

 private:
  // Grow-only scratch buffers for GEMM emulation (slot 0..3), tracked as
  // workspace memory; valid until the next call for the same slot.
  void* workspace(int slot, size_t bytes);
  // A loss op's result: `loss` returned, or (deferred) added to loss_sum_ and 0 returned.
  double loss_result(double loss, bool deferred);
  // A decided GradScale (Device::decide_step): false on a skip (no update at
  // all); otherwise the factor to use, into `factor`.
  bool resolve(GradScale grad_scale, float& factor) const;

  DeviceInfo info_;
  CpuKernels* kernels_;  // the ISA build chosen at construction (backends/cpu/cpu_isa.cpp); never null
  DeviceBuffer workspace_[4];
  double loss_sum_ = 0.0;  // the loss ops' deferred sum (Device::read_loss_sum)
  StepResults decision_;   // the last decide_step's statistics and decision (loss_sum unused)
  std::unique_ptr<OnednnMatmul, OnednnMatmulDeleter> onednn_;
};

}  // namespace mpb::cpu
