// The sparse MLM head's row selection: label_positions, then the gather of
// the selected hidden rows (embedding_forward with the positions as ids) and
// the scatter of their gradients (embedding_backward, Overwrite), as
// models/bert.cpp chains them.
//
// Exact on every backend: the positions are integers, the gather copies
// values, and the scatter's sums have one term each (label_positions never
// repeats a position), so a row of dh is one dout row or exactly 0. The
// reference is written without the scalar core's slot formula: the labelled
// positions in order, then the unlabelled ones, cut at the capacity.
#include <cmath>
#include <string>
#include <vector>

#include "opcheck/cases.h"

namespace mpb::opcheck {
namespace {

enum class Pattern { Bert15, AllLabelled, NoneLabelled, Alternating };

class LabelPositions : public Instance {
 public:
  LabelPositions(int64_t N, int64_t cap, int64_t C, Pattern pattern, DType act) : N_(N), cap_(cap), C_(C) {
    Gen g(seed_of("label_positions", N, cap, C, pattern, act));
    labels_.resize(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) {
      int32_t y = -1;
      switch (pattern) {
        case Pattern::Bert15: y = g.coin(0.15) ? g.below(30522) : (i % 5 == 0 ? -100 : -1); break;
        case Pattern::AllLabelled: y = g.below(1000); break;
        case Pattern::NoneLabelled: y = -1; break;
        case Pattern::Alternating: y = i % 2 ? static_cast<int32_t>(i % 7) : -1; break;
      }
      labels_[static_cast<size_t>(i)] = y;
    }
    // The reference order, and the capacity must hold every labelled position.
    for (int64_t i = 0; i < N; ++i)
      if (labels_[static_cast<size_t>(i)] >= 0) order_.push_back(i);
    labelled_ = static_cast<int64_t>(order_.size());
    for (int64_t i = 0; i < N; ++i)
      if (labels_[static_cast<size_t>(i)] < 0) order_.push_back(i);
    order_.resize(static_cast<size_t>(cap));
    h_ = g.nonzero(act, Shape{N, C});
    drows_ = g.nonzero(act, Shape{cap, C});
  }

  Outputs run(Device& dev) override {
    Outputs o;
    DeviceBuffer y = put(dev, ints(labels_, Shape{N_}));
    DeviceBuffer pos = put(dev, ints(std::vector<int32_t>(static_cast<size_t>(cap_), -7), Shape{cap_}));
    DeviceBuffer pos_y = put(dev, ints(std::vector<int32_t>(static_cast<size_t>(cap_), -7), Shape{cap_}));
    dev.label_positions(pos, pos_y, y);
    o.add("pos", dev, pos);
    o.add("pos_labels", dev, pos_y);
    DeviceBuffer h = put(dev, h_), rows = put(dev, filled(h_.dtype, Shape{cap_, C_}, NAN));
    dev.embedding_forward(rows, h, pos);
    o.add("gathered", dev, rows);
    DeviceBuffer dr = put(dev, drows_), dh = put(dev, filled(h_.dtype, Shape{N_, C_}, NAN));
    dev.embedding_backward(dh, dr, pos, GradMode::Overwrite);
    o.add("scattered", dev, dh);
    return o;
  }

  void check(Check& c, Device&, const Outputs& got) override {
    c.expect(labelled_ <= cap_, "the case's capacity holds its labelled positions");
    std::vector<double> pos(static_cast<size_t>(cap_)), pos_y(pos.size());
    std::vector<double> gathered(static_cast<size_t>(cap_ * C_));
    std::vector<double> scattered(static_cast<size_t>(N_ * C_), 0.0);
    for (int64_t k = 0; k < cap_; ++k) {
      const int64_t p = order_[static_cast<size_t>(k)];
      pos[static_cast<size_t>(k)] = static_cast<double>(p);
      pos_y[static_cast<size_t>(k)] = labels_[static_cast<size_t>(p)];
      for (int64_t j = 0; j < C_; ++j) {
        gathered[static_cast<size_t>(k * C_ + j)] = h_.value(p * C_ + j);
        scattered[static_cast<size_t>(p * C_ + j)] = drows_.value(k * C_ + j);
      }
    }
    c.exact("pos", got["pos"], pos);
    c.exact("pos_labels", got["pos_labels"], pos_y);
    c.exact("gathered", got["gathered"], gathered);
    c.exact("scattered", got["scattered"], scattered);
  }

 private:
  int64_t N_, cap_, C_, labelled_ = 0;
  std::vector<int32_t> labels_;
  std::vector<int64_t> order_;
  Host h_, drows_;
};

}  // namespace

void add_label_position_cases(std::vector<OpCase>& v) {
  struct Spec {
    int64_t N, cap, C;
    Pattern pattern;
    Size size;
    const char* label;
  };
  // N below, at and above the CUDA kernel's 256 chunks; capacities from 1 to
  // N; the BERT-mini micro-batch (32 x 128 tokens) at its head's capacity.
  const Spec specs[] = {{37, 24, 8, Pattern::Alternating, Size::Small, "N37 cap24 alternating"},
                        {256, 256, 8, Pattern::AllLabelled, Size::Small, "N256 cap256 all labelled"},
                        {1000, 1, 4, Pattern::NoneLabelled, Size::Small, "N1000 cap1 none labelled"},
                        {1001, 300, 16, Pattern::Bert15, Size::Small, "N1001 cap300 15% labelled"},
                        {4096, 800, 256, Pattern::Bert15, Size::Bert, "BERT-mini N4096 cap800 C256"}};
  for (const Spec& s : specs)
    for (DType act : {DType::F32, DType::BF16})
      v.push_back(make_case<LabelPositions>("label_positions + gather/scatter", s.label, "act " + dt(act), s.size,
                                            "exact (integers; one-term sums)", true, s.N, s.cap, s.C, s.pattern, act));
}

}  // namespace mpb::opcheck
