// GEMM on the CPU through oneDNN's matmul primitive.
//  - fp32: oneDNN fp32 matmul.
//  - bf16: oneDNN bf16 matmul (fp32 accumulation) where the CPU has AVX512-BF16
//    or AMX ("native"); otherwise operands are widened to fp32 exactly and
//    multiplied in fp32 ("emulated": the same products and fp32 sums).
//  - fp16, tf32: "emulated": operands rounded to the format (fp16 is exact in
//    fp32; tf32 keeps 10 mantissa bits), then an fp32 matmul. That is what
//    tensor cores compute: exact products of the rounded operands, fp32 sums.
// Strided batches (GemmArgs::batch > 1, attention's per-head products) are one
// oneDNN matmul over 3-D descriptors {batch, rows, cols} whose leading stride
// is the element stride between matrices (>= the matrix size: gaps allowed,
// overlap and broadcast not); emulated modes widen every batch's operands; a
// 16-bit C is written matrix by matrix so its gaps are never touched. Batched
// GEMMs take no epilogue and no pre_act (std::invalid_argument).
// Primitives are created once per shape/dtype/epilogue/batch/strides and cached.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/device.h"

namespace mpb::cpu {

class OnednnGemm {
 public:
  // `workspace(slot, bytes)` returns scratch memory that stays valid until the
  // next call with the same slot (the device tracks it as Workspace).
  using WorkspaceFn = std::function<void*(int slot, size_t bytes)>;
  explicit OnednnGemm(WorkspaceFn workspace);
  ~OnednnGemm();
  OnednnGemm(const OnednnGemm&) = delete;
  OnednnGemm& operator=(const OnednnGemm&) = delete;

  void run(const GemmArgs& args);
  std::string support(GemmCompute c) const;  // native | emulated
  bool native_bf16() const { return native_bf16_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool native_bf16_ = false;
};

}  // namespace mpb::cpu
