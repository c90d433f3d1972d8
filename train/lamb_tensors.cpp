#include "train/lamb_tensors.h"

#include <stdexcept>
#include <string>

namespace mpb {

std::vector<LambTensor> lamb_tensors(const std::vector<ParamInfo>& params, const std::vector<bool>& decayed,
                                     LambQkv qkv) {
  if (decayed.size() != params.size())
    throw std::invalid_argument("lamb_tensors: " + std::to_string(decayed.size()) + " decay flags for " +
                                std::to_string(params.size()) + " parameter tensors");
  std::vector<LambTensor> out;
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = params[i];
    const int64_t n = p.shape.numel();
    if (n == 0) continue;
    const int64_t parts = qkv == LambQkv::Split ? p.packed_layers : 1;
    // ParamStore::add made sure the layers divide the first dimension, and so numel.
    if (parts < 1 || n % parts != 0)
      throw std::logic_error("lamb_tensors: '" + p.name + "' does not split into " + std::to_string(parts) + " layers");
    const int64_t each = n / parts;
    for (int64_t k = 0; k < parts; ++k)
      out.push_back({p.offset + k * each, p.offset + (k + 1) * each, static_cast<bool>(decayed[i])});
  }
  return out;
}

}  // namespace mpb
