// Where fused attention reads and writes its operands. Every operand is a
// logical [B,H,T,D] tensor (batch, head, token, head dim); its HeadLayout says
// where element (b, h, t, d) lies in the storage of the tensor that holds it,
// with d contiguous. Two layouts occur:
//  - heads:  a contiguous [B,H,T,D] tensor (attention_forward/backward);
//  - packed: one of the parts of a [B,T,parts,H,D] tensor, the QKV
//    projection's output [B*T, 3C] (parts 3: q, k, v) or the merged heads
//    [B*T, C] the output projection reads (parts 1), so the packed ops read
//    and write the models' own buffers and no head shuffle runs
//    (attention_forward_packed/backward_packed).
// The backends' kernels address every operand through its layout, so both ops
// run the same arithmetic in the same order: on the CPU the packed op's
// results are the split, attend, merge composition's bit for bit.
#pragma once

#include <cstdint>

#include "core/hd.h"
#include "core/tensor.h"

namespace mpb {

struct HeadLayout {
  int64_t offset = 0, batch = 0, head = 0, row = 0;  // in elements
  // The element index of (b, h, t, 0).
  MPB_HD int64_t at(int64_t b, int64_t h, int64_t t) const { return offset + b * batch + h * head + t * row; }
  bool operator==(const HeadLayout& o) const {
    return offset == o.offset && batch == o.batch && head == o.head && row == o.row;
  }
  bool operator!=(const HeadLayout& o) const { return !(*this == o); }
};

// A contiguous [B,H,T,D] tensor.
inline HeadLayout heads_layout(int64_t H, int64_t T, int64_t D) { return HeadLayout{0, H * T * D, T * D, D}; }

// Part `part` of a [B,T,parts,H,D] tensor: rows of parts*H*D elements per token.
inline HeadLayout packed_layout(int64_t T, int64_t H, int64_t D, int parts, int part) {
  const int64_t ld = parts * H * D;
  return HeadLayout{part * H * D, T * ld, D, ld};
}

// One operand: the tensor that holds it and where in it.
struct AttnOperand {
  Tensor t;
  HeadLayout at;
};

// Dropout on the attention probabilities inside fused attention: the
// dropout op's rule (ops/dropout.h) on the [B,H,Tq,Tk] probabilities, element
// ((b*H + h)*Tq + i)*Tk + j of a call with `seed` kept iff its bits clear
// p's threshold, then scaled by 1/(1-p). The same mask as Device::dropout on
// the unfused path's probabilities with that seed. p = 0: none.
struct AttnDropout {
  float p = 0.0f;
  uint64_t seed = 0;
};

// A checked fused-attention call as the backends receive it: q [B,H,Tq,D],
// k and v [B,H,Tk,D] (one dtype), key_valid int32 [B,Tk] (1 real key, 0
// padding), the scale, the unrounded mask value (ops/attention.h's rule) and
// the dropout.
struct AttentionProblem {
  int64_t B = 0, H = 0, Tq = 0, Tk = 0, D = 0;
  AttnOperand q, k, v;
  Tensor key_valid;
  float scale = 1.0f, mask_value = 0.0f;
  AttnDropout dropout;
};

}  // namespace mpb
