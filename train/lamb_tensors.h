// LAMB's tensors: the element ranges of the flat parameters that each get
// one trust ratio ||w|| / ||u|| (Device::lamb_step's LambTensor list).
#pragma once

#include <vector>

#include "config/cell_config.h"
#include "core/device.h"
#include "models/model.h"

namespace mpb {

// One range per parameter tensor, in order, skipping empty ones; a tensor
// that packs k layers of the reference model (ParamInfo::packed_layers, BERT's
// QKV weight and bias) is cut into its k equal blocks under LambQkv::Split, as
// NVIDIA's BERT recipe's separate query, key and value Linears get three
// ratios, and stays whole under LambQkv::Packed. decayed[i]: whether
// params[i] takes weight decay (each block inherits it).
std::vector<LambTensor> lamb_tensors(const std::vector<ParamInfo>& params, const std::vector<bool>& decayed,
                                     LambQkv qkv);

}  // namespace mpb
