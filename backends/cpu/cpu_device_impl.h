// CpuDevice: the Device implementation behind make_cpu_device(). Internal to
// the CPU backend. Its memory, copy and timing members are defined in
// backends/cpu/cpu_device.cpp, the numeric ops (*_impl) in the file named
// for each group of the list below: element-wise work as OpenMP loops over the scalar cores in
// ops/*.h, GEMMs through oneDNN. The public Device ops have checked the
// arguments against core/device.h before any *_impl runs, so the code here
// checks nothing but what only the CPU backend knows (the ids and labels in
// host memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/device.h"
#include "core/host_memory.h"

namespace mpb::cpu {

// oneDNN's engine and stream and the matmul primitives cached per
// shape/dtype/epilogue (backends/cpu/gemm_onednn.cpp).
struct OnednnMatmul;
struct OnednnMatmulDeleter {
  void operator()(OnednnMatmul* p) const;
};
std::unique_ptr<OnednnMatmul, OnednnMatmulDeleter> make_onednn_matmul();

// dst[i] = src[i] converted (any float dtypes, same element count; unchecked):
// the loop behind cast(), for the ops that convert internally
// (backends/cpu/elementwise.cpp).
void convert(const Tensor& dst, const Tensor& src);

class CpuDevice final : public Device {
 public:
  CpuDevice();
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
  // Defined in the file named for each group of the list:
  //   memory and copies   backends/cpu/cpu_device.cpp
  //   GEMM                backends/cpu/gemm_onednn.cpp
  //   element-wise        backends/cpu/elementwise.cpp
  //   losses              backends/cpu/loss.cpp
  //   reductions          backends/cpu/reduce.cpp
  //   transformer ops     backends/cpu/transformer.cpp
  //   attention           backends/cpu/attention.cpp
  //   embeddings          backends/cpu/embedding.cpp
  //   optimizers          backends/cpu/optimizer.cpp
#include "core/device_impl_overrides.inc"

 private:
  // Grow-only scratch buffers for GEMM emulation (slot 0..3), tracked as
  // workspace memory; valid until the next call for the same slot.
  void* workspace(int slot, size_t bytes);

  DeviceInfo info_;
  DeviceBuffer workspace_[4];
  std::unique_ptr<OnednnMatmul, OnednnMatmulDeleter> onednn_;
};

}  // namespace mpb::cpu
