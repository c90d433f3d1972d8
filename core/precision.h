// A precision policy: what parameters are stored in, what GEMMs and stored
// activations compute in, and what the model's output (logits) is.
#pragma once

#include <string>

#include "core/device.h"
#include "core/dtype.h"

namespace mpb {

struct PrecisionPolicy {
  std::string name = "fp32";
  DType param = DType::F32;    // the weights the forward pass reads
  DType compute = DType::F32;  // GEMM operands and stored activations
  DType output = DType::F32;   // logits
  GemmCompute gemm = GemmCompute::F32;
  bool master_weights = true;  // fp32 master copy updated by the optimizer
};

// Resolves a precision value from the config. Throws std::invalid_argument.
PrecisionPolicy resolve_policy(const std::string& precision);

}  // namespace mpb
