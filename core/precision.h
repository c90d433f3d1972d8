// A precision policy: what parameters are stored in, what GEMMs and stored
// activations compute in, and what the model's output (logits) is; parsed
// from the presets (fp32, tf32, amp_fp16, amp_bf16, fp8), apex opt levels (O0-O3)
// or JMP-style policy strings (params=float32,compute=float16,output=float32).
#pragma once

#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/fp8_scaling.h"

namespace mpb {

struct PrecisionPolicy {
  std::string name = "fp32";
  // The model's parameters as the model holds them (apex/JMP sense). Their
  // gradients are stored in this dtype too (PyTorch: .grad has the param's dtype).
  DType param = DType::F32;
  // An fp32 copy the optimizer updates. Always the parameters themselves when
  // param is fp32; apex O2 keeps one beside half parameters; O3 and JMP
  // params=half have none (updates are rounded to half every step).
  bool master_weights = true;
  DType compute = DType::F32;  // GEMM operands and stored activations
  DType output = DType::F32;   // logits
  GemmCompute gemm = GemmCompute::F32;
  // Precision `fp8` (Transformer Engine's hybrid recipe): the linear layers'
  // GEMMs take FP8 operands (E4M3 inputs and weights, E5M2 gradients) with
  // delayed per-tensor scaling; everything else runs as amp_bf16 (compute,
  // stored activations and the attention GEMMs bf16, fp32 master weights).
  bool fp8 = false;
  Fp8Recipe fp8_recipe;  // the cell's fp8.* keys (the cell factory copies them in)

  DType grad() const { return param; }
  bool is_mixed() const { return compute != DType::F32; }
  std::string describe() const;  // "params=float32,compute=bfloat16,output=bfloat16,gemm=bf16,master=yes"
};

// Resolves a precision value from the config. Throws std::invalid_argument
// with a message saying what is wrong and what is accepted.
PrecisionPolicy resolve_policy(const std::string& precision);

// The named precisions (presets and apex levels) in display order: the one
// list of them. Each resolves; reports order cells by it (the manifest's
// vocabulary.precisions, docs/RESULTS.md).
const std::vector<std::string>& named_precisions();

// The additive attention-mask constant for padded keys when scores are in
// `compute`: large and negative (exp of it is exactly 0 next to real
// logits), finite in the compute dtype (so 0 * it = 0 for the real keys; see
// the mask rule in ops/attention.h). -1e4 for fp16, -1e9 for fp32/bf16.
float attention_mask_value(DType compute);

// The LayerNorm epsilon to use in `compute`: `requested`, except for fp16
// where it is at least 1e-5 (a smaller one, such as BERT's 1e-12, flushes to
// zero in fp16 and a constant row then divides by sqrt(0)).
float layernorm_eps(DType compute, float requested);

}  // namespace mpb
