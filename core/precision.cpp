#include "core/precision.h"

#include <stdexcept>

namespace mpb {

PrecisionPolicy resolve_policy(const std::string& precision) {
  PrecisionPolicy p;
  p.name = precision;
  if (precision == "fp32") return p;
  if (precision == "tf32") {
    p.gemm = GemmCompute::TF32;
    return p;
  }
  throw std::invalid_argument("precision '" + precision + "' is not supported yet");
}

}  // namespace mpb
