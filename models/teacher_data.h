// A deterministic, learnable classification task: Gaussian inputs labelled by
// a fixed random teacher network, label = argmax(W2 tanh(W1 x / sqrt(d))).
// Each optimizer step's batch is drawn fresh from (run seed, step), so a run
// is reproducible on any machine, and micro-batches (gradient accumulation)
// are row slices of the same batch. The held-out set comes from its own
// stream, independent of the run seed.
#pragma once

#include <cstdint>
#include <vector>

namespace mpb {

struct HostBatch {
  int64_t size = 0;
  int input_dim = 0;
  std::vector<float> x;       // [size, input_dim]
  std::vector<int32_t> y;     // [size]
};

class TeacherData {
 public:
  TeacherData(uint64_t seed, int input_dim, int classes, int teacher_hidden);
  HostBatch train_batch(int64_t step, int64_t size) const;
  HostBatch eval_batch(int64_t offset, int64_t size) const;  // samples [offset, offset+size) of the eval set
  int input_dim() const { return input_dim_; }
  int classes() const { return classes_; }

 private:
  HostBatch make(uint64_t stream, int64_t size) const;
  int label(const float* x) const;

  uint64_t seed_;
  int input_dim_, classes_, hidden_;
  std::vector<float> w1_, w2_;  // [hidden, input_dim], [classes, hidden]
};

}  // namespace mpb
