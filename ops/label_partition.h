// Scalar core of Device::label_positions: a stable partition of the
// positions [0, n) of a label vector, the labelled ones (label >= 0) first,
// in order, then the unlabelled ones, in order; the first `cap` positions of
// that order and their labels are written. The sparse MLM head gathers the
// hidden states of these positions and decodes only them (models/bert.cpp).
//
// Position i's slot needs only the number of labelled positions before it
// (`before`) and in all (`total`): labelled -> before, unlabelled -> total +
// (i - before). So the work splits into chunks: count each chunk's labels,
// scan the counts, then place each chunk from its prefix. The CPU runs one
// chunk per thread block of positions, the CUDA kernel one chunk per thread of
// a block (backends/*/label_positions.*); both call these two functions, so
// the slots are the same integers on both.
#pragma once

#include <cstdint>

#include "ops/scalar.h"

namespace mpb::scalar {
MPB_ISA_NAMESPACE_BEGIN

// Labelled positions (label >= 0) in [begin, end).
MPB_HD inline int64_t count_labelled(const int32_t* labels, int64_t begin, int64_t end) {
  int64_t k = 0;
  for (int64_t i = begin; i < end; ++i) k += labels[i] >= 0 ? 1 : 0;
  return k;
}

// Places the positions [begin, end): `before` labelled positions precede
// begin, `total` in all. Slots >= cap are not written (unlabelled positions
// beyond the capacity are simply not decoded); returns how many labelled
// positions of the chunk fell beyond cap (each one a position whose loss
// would be lost: the ops report it as an error).
MPB_HD inline int64_t place_labelled(const int32_t* labels, int64_t begin, int64_t end, int64_t before,
                                     int64_t total, int64_t cap, int32_t* pos, int32_t* pos_labels) {
  int64_t lost = 0;
  for (int64_t i = begin; i < end; ++i) {
    const int32_t y = labels[i];
    const bool labelled = y >= 0;
    const int64_t slot = labelled ? before : total + (i - before);
    if (labelled) ++before;
    if (slot < cap) {
      pos[slot] = static_cast<int32_t>(i);
      pos_labels[slot] = y;
    } else if (labelled) {
      ++lost;
    }
  }
  return lost;
}

MPB_ISA_NAMESPACE_END
}  // namespace mpb::scalar
